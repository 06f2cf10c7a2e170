"""Rails certificates: a rails schedule proved by composition (verifier.rails_composition) gets a
certificate of one witness per distinct rail, re-checked in linear time, no Z3 on the schedule.

Format "optcc-rails-certificate/1": the schedule's sha256, the verifier version, the digest of the
composition theorem's obligations (verifier.parametric.rails) and, per distinct relabelled rail
(R2), the rails that are it, its sha256 and its WITNESS: the digest of its final coefficient
table (verifier.certificate.final_table). Checking one (`check_rails_certificate`), cheapest first:
  1. format, verifier version, schedule sha256, every required property recorded as proved;
  2. R1 (rails disjoint) and the relabelling of every rail, each of which must be a listed rail
     (its sha256), every listed rail used;
  3. per distinct rail: the exact symbolic execution, every final coefficient exactly 1 and the
     table's digest equal to the witness (the rail's sum property, as a per-instance certificate
     re-checks it), and its causality (no Z3);
  4. R3, the NVLink brackets against the rails' first touches and last landings (one pass);
  5. runnable on the whole schedule (the runner's posting order), as per-instance certificates;
  6. the composition theorem: its obligations' digest against the certificate's and every one
     proved by Z3 (once per process; the obligations do not depend on the schedule).
A forged witness fails 3, an edited schedule 1, a moved bracket 4. As for per-instance
certificates, only "capacity" and "time" (performance, not values) are taken from the file."""
from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

import z3

from optcc.errors import OptccError
from optcc.files import write_text_atomic
from optcc.jsonout import dumps
from verifier.trust_files import check_file, trust_format

if TYPE_CHECKING:
    from optcc.schedule import LocalOp, Schedule
    from verifier.proof import Proof

Rails = tuple[dict[int, int], dict[int, list[int]], dict[int, list["LocalOp"]], list[int],
              dict[str, tuple[list[int], "Schedule"]]]

FORMAT = trust_format("optcc-rails-certificate").format


def _theorem_digest() -> str:
    from verifier.parametric.prove import obligations_digest
    from verifier.parametric.rails import obligations
    return obligations_digest(obligations())


def _rails(schedule: Schedule) -> Rails | dict[str, Any]:
    """(rail map, NIC flows per rail, local ops per rail, NVLink flows, {rail sha256: (rails, rail schedule)})
    or the R1 failure dict."""
    from verifier.rails_composition import _split, rail_schedule
    split = _split(schedule)
    if isinstance(split, dict):
        return split
    rail, nic, ops, nv = split
    distinct: dict[str, tuple[list[int], Schedule]] = {}
    for l in sorted(set(rail.values())):
        rs = rail_schedule(schedule, l, rail, nic.get(l, []), ops.get(l, []))
        key = hashlib.sha256(rs.canonical_bytes()).hexdigest()
        distinct.setdefault(key, ([], rs))[0].append(l)
    return rail, nic, ops, nv, distinct


def write_rails_certificate(proof: Proof, schedule: Schedule, path: str, field: str = "certificate") -> None:
    """Write the certificate of a composition proof (prove_rails_composition) atomically; refuses
    any other proof, or one that did not prove every required property."""
    from verifier.certificate import VERIFIER_VERSION, final_table
    from verifier.proof import required_properties
    required = required_properties(schedule)
    if "distinct_rail_proofs" not in proof.facts:
        raise OptccError(field, "a rails certificate is for a proof by composition (optcc verify --by-rails)")
    if not proof.proved or not set(required) <= set(proof.properties):
        raise OptccError(field, f"only a proof of all of {', '.join(required)} gets a certificate")
    found = _rails(schedule)
    if isinstance(found, dict):                     # cannot happen for a proved schedule: refuse loudly
        raise OptccError(field, f"not a rails schedule: {found['message']}")
    rails: list[dict[str, Any]] = []
    for key, (ls, rs) in found[4].items():
        digest, wrong = final_table(rs)
        if wrong is not None:
            raise OptccError(field, f"rail {ls[0]}'s piece {wrong[0]} at node {wrong[1]} is not the sum; no certificate")
        rails.append({"rails": ls, "rail_sha256": key, "final_table_sha256": digest, "pieces": len(rs.pieces)})
    data = {"format": FORMAT, "verifier_version": VERIFIER_VERSION, "schedule_sha256": schedule.sha256(),
            "proved": True, "properties": {k: bool(proof.properties[k]) for k in required},
            "composition_obligations_sha256": _theorem_digest(), "rails": rails,
            "z3_version": z3.get_version_string(), "seconds": round(proof.seconds, 6)}
    write_text_atomic(path, dumps(data, indent=2) + "\n", field)


def check_rails_certificate(schedule: Schedule, path: str) -> tuple[bool, str]:
    """(True, "") iff `path` certifies this exact rails schedule after re-checking it (module
    docstring); else (False, the reason)."""
    return check_file(path, "optcc-rails-certificate", lambda data: check_rails_certificate_data(schedule, data))


def check_rails_certificate_data(schedule: Schedule, data: dict[str, Any]) -> tuple[bool, str]:
    """check_rails_certificate of a file verifier.trust_files has read (a current rails certificate)."""
    from optcc.timing import IntegerTimes, durations
    from verifier.causality import check_causality
    from verifier.certificate import VERIFIER_VERSION, final_table
    from verifier.parametric.rails import composition_theorem
    from verifier.port_checks import check_runnable
    from verifier.proof import required_properties
    from verifier.rails_composition import _touches, check_brackets
    if data.get("verifier_version") != VERIFIER_VERSION:
        return False, (f"stale: made by {data.get('verifier_version')!r}, this verifier is "
                       f"{VERIFIER_VERSION!r} (verify again)")
    if data.get("schedule_sha256") != schedule.sha256():
        return False, "it names another schedule (sha256 differs)"
    props = data.get("properties")
    if data.get("proved") is not True or not isinstance(props, dict) or any(
            props.get(k) is not True for k in required_properties(schedule)):
        return False, "it does not record every property as proved"
    listed = data.get("rails")
    if not isinstance(listed, list) or not all(isinstance(r, dict) and isinstance(r.get("rail_sha256"), str)
                                               and isinstance(r.get("final_table_sha256"), str) for r in listed):
        return False, "it carries no per-rail witnesses (rails[].rail_sha256, rails[].final_table_sha256)"
    c = schedule.cluster
    if c.g < 2 or c.servers < 2:
        return False, "a rails certificate needs q ≥ 2 servers of g ≥ 2 GPUs"
    found = _rails(schedule)
    if isinstance(found, dict):
        return False, f"R1: {found['message']}"
    rail, nic, ops, nv, distinct = found
    witness = {r["rail_sha256"]: r["final_table_sha256"] for r in listed}
    for key, (ls, rs) in distinct.items():
        if key not in witness:
            return False, f"rail {ls[0]} (sha256 {key[:16]}…) is not among the certified rails"
        digest, wrong = final_table(rs)
        if wrong is not None:
            return False, (f"re-executing rail {ls[0]}, node {wrong[1]}'s final piece {wrong[0]} is not the sum "
                           f"of the rail's inputs: the certificate is forged")
        if digest != witness[key]:
            return False, f"rail {ls[0]}'s final coefficient table's digest differs from the witness"
        ok, cx = check_causality(rs, IntegerTimes(rs))
        if not ok:
            assert cx is not None
            return False, f"re-checking rail {ls[0]}'s causality: {cx['message']}"
    unused = set(witness) - set(distinct)
    if unused:
        return False, f"it certifies a rail the schedule does not have (sha256 {sorted(unused)[0][:16]}…)"
    durs = durations(schedule)
    ft, lw = _touches(schedule, durs, nic, ops)
    cx = check_brackets(schedule, rail, nv, ft, lw, durs)
    if cx is not None:
        return False, f"R3: {cx['message']}"
    ok, cx = check_runnable(schedule, IntegerTimes(schedule, durs))
    if not ok:
        assert cx is not None
        return False, f"re-checking 'runnable': {cx['message']}"
    if data.get("composition_obligations_sha256") != _theorem_digest():
        return False, ("the composition theorem's obligations as the sources state them now differ from the "
                       "certificate's (composition_obligations_sha256); verify again")
    th = composition_theorem()
    if not th["proved"]:
        return False, f"the composition theorem is not proved here: {th['status']}"
    return True, ""
