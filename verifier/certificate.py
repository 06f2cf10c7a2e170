"""Proof certificates: a proof's witness that the runner re-checks cheaply before every run.

A certificate (format "optcc-certificate/2") names the schedule (sha256 of its canonical
JSON), the verifier that proved it (VERIFIER_VERSION) and carries a WITNESS: the sha256 of the
final coefficient table (for every piece and rank, the coefficients c_r of the final value
Σ c_r·x_r, from the exact symbolic execution). Checking one (`check_certificate`) redoes:
  1. format, verifier version (a certificate from another verifier version is stale),
     schedule sha256, every property recorded as proved;
  2. the linear-time exact symbolic execution of the schedule: every final coefficient must be
     exactly 1 (that alone is the sum property, no solver needed) and the table's digest must
     equal the witness;
  3. the "causality" and "runnable" properties (no Z3; about linear time), which the runner
     relies on to compute the values the symbolic execution assumed, and to neither deadlock
     nor mis-pair data.
A hand-written `"proved": true` for a wrong schedule therefore fails 2 or 3; an edited
schedule fails 1; a certificate of an older verifier is refused as stale. Only "capacity" and
"time" (performance claims, not the values computed) are taken from the certificate.
"""
from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

import z3

from optcc.errors import OptccError
from optcc.files import write_text_atomic
from optcc.jsonout import dumps
from optcc.timing import IntegerTimes
from verifier.causality import check_causality
from verifier.events import label_ranks, piece_events, piece_signature
from verifier.linear import ExpressionTable, execute_signature
from verifier.port_checks import check_runnable
from verifier.proof import required_properties
from verifier.trust_files import check_file, trust_format

if TYPE_CHECKING:
    from optcc.schedule import Schedule
    from verifier.proof import Proof

FORMAT = trust_format("optcc-certificate").format
VERIFIER_VERSION = "optcc-verifier/4"   # bump whenever a property's rule changes (3: same-instant landings in posting order, runnable on the runner's plans; 4: time against the stated slot time)


def final_table(schedule: Schedule, grid: IntegerTimes | None = None) -> tuple[str, tuple[int, int] | None]:
    """Exact symbolic execution: (sha256 of the final coefficient table, first wrong (piece, rank) or None).

    Linear in the flows: every distinct final expression (over the piece's rank labels, shared by
    pieces with one signature) is checked and digested once; a piece then costs O(p): its
    label -> rank map and, per rank, the digest of the expression it ends with. That encodes the
    whole table (rank r's coefficients are the expression's, relabelled by the map)."""
    grid = grid or IntegerTimes(schedule)
    p = schedule.cluster.p
    table = ExpressionTable()
    digest = hashlib.sha256()
    first_wrong = None
    cache: dict[tuple[tuple[int, ...], ...], dict[int, int]] = {}
    seen: dict[int, tuple[str, bool]] = {}      # expression id -> (its digest, is the full sum)
    untouched = (hashlib.sha256(b"input").hexdigest()[:32], p == 1)
    for piece, events in enumerate(piece_events(schedule, grid)):
        sig = piece_signature(schedule, events)
        finals = cache.get(sig)
        if finals is None:
            finals = cache[sig] = execute_signature(sig, table)
        ranks = label_ranks(schedule, events)
        by_rank = [untouched] * p                 # a rank the piece never reaches keeps x_r
        for label, expr in finals.items():
            known = seen.get(expr)
            if known is None:
                coefs = table.coefs[expr]
                known = seen[expr] = (
                    hashlib.sha256(json.dumps(sorted(coefs.items()), separators=(",", ":")).encode()).hexdigest()[:32],
                    len(coefs) == p and all(c == 1 for c in coefs.values()))
            by_rank[ranks[label]] = known
        if first_wrong is None:
            r = next((r for r in range(p) if not by_rank[r][1]), None)
            if r is not None:
                first_wrong = (piece, r)
        digest.update(json.dumps([piece, ranks, [k for k, _ in by_rank]], separators=(",", ":")).encode())
    return digest.hexdigest(), first_wrong


def write_certificate(proof: Proof, schedule: Schedule, path: str, field: str = "certificate") -> None:
    """Write the certificate atomically; refuses a proof that did not prove every required property
    (verifier.proof.required_properties: `time` too where the schedule states a slot time)."""
    required = required_properties(schedule)
    if not proof.proved or not set(required) <= set(proof.properties):
        raise OptccError("certificate", f"only a proof of all of {', '.join(required)} gets a certificate")
    digest, wrong = final_table(schedule)
    if wrong is not None:                  # cannot happen for a proved schedule: refuse loudly
        raise OptccError("certificate", f"piece {wrong[0]} of rank {wrong[1]} is not the sum; no certificate")
    data = {"format": FORMAT, "verifier_version": VERIFIER_VERSION, "schedule_sha256": schedule.sha256(),
            "proved": True, "properties": {k: bool(proof.properties[k]) for k in required},
            "witness": {"final_table_sha256": digest, "pieces": len(schedule.pieces), "p": schedule.cluster.p},
            "z3_version": z3.get_version_string(), "seconds": round(proof.seconds, 6)}
    write_text_atomic(path, dumps(data, indent=2) + "\n", field)


def check_certificate(schedule: Schedule, path: str) -> tuple[bool, str]:
    """(True, "") iff `path` certifies this exact schedule after re-checking its witness; else
    (False, the reason)."""
    return check_file(path, "optcc-certificate", lambda data: check_certificate_data(schedule, data))


def check_certificate_data(schedule: Schedule, data: dict[str, Any]) -> tuple[bool, str]:
    """check_certificate of a file verifier.trust_files has read (a current instance certificate)."""
    if data.get("verifier_version") != VERIFIER_VERSION:
        return False, (f"stale: made by {data.get('verifier_version')!r}, this verifier is "
                       f"{VERIFIER_VERSION!r} (verify again)")
    if data.get("schedule_sha256") != schedule.sha256():
        return False, "it names another schedule (sha256 differs)"
    props = data.get("properties")
    if data.get("proved") is not True or not isinstance(props, dict) or any(props.get(k) is not True for k in required_properties(schedule)):
        return False, "it does not record every property as proved"
    witness = data.get("witness")
    if not isinstance(witness, dict) or not isinstance(witness.get("final_table_sha256"), str):
        return False, "it carries no witness"
    grid = IntegerTimes(schedule)
    digest, wrong = final_table(schedule, grid)
    if wrong is not None:
        return False, (f"re-executing the schedule, rank {wrong[1]}'s final piece {wrong[0]} is not the sum "
                       f"of all inputs: the certificate is forged")
    if digest != witness["final_table_sha256"]:
        return False, "the final coefficient table's digest differs from the witness"
    for name, check in (("causality", check_causality), ("runnable", check_runnable)):
        ok, cx = check(schedule, grid)
        if not ok:
            assert cx is not None                # a failed property names its counterexample
            return False, f"re-checking '{name}': {cx['message']}"
    return True, ""


def certificate_matches(schedule: Schedule, path: str) -> bool:
    """True iff `path` is a valid certificate of this exact schedule (check_certificate)."""
    return check_certificate(schedule, path)[0]
