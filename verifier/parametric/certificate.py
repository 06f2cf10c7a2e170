"""Generator certificates: `optcc prove-all` proved a construction's families for all sizes;
a schedule is covered when regenerating it from its own parameters gives the same sha256.

The certificate names the construction, the quantified range and a digest of the sources the
proof is about (the family formulas and the obligations); a changed source invalidates it.
The check is only as good as the regeneration: the schedule must be byte-for-byte (sha256 of
its canonical JSON) the enumeration of the proved families on its cluster and segment count.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import z3

from optcc.errors import OptccError
from optcc.files import read_json, write_text_atomic

FORMAT = "optcc-generator-certificate/1"
_ROOT = Path(__file__).resolve().parents[2]
_SOURCES = {"ring": ["optcc/algorithms/families/__init__.py", "optcc/algorithms/families/ring.py",
                     "optcc/algorithms/ring.py"],
            "optcc": ["optcc/algorithms/families/__init__.py", "optcc/algorithms/families/optcc.py"]}
_MIN_P = {"ring": 2, "optcc": 3}


def sources_digest(algo: str) -> str:
    """sha256 over the family sources of `algo` and every verifier/parametric module."""
    files = _SOURCES.get(algo, []) + sorted(
        str(p.relative_to(_ROOT)) for p in (_ROOT / "verifier" / "parametric").glob("*.py"))
    h = hashlib.sha256()
    for rel in files:
        h.update(rel.encode() + b"\0" + (_ROOT / rel).read_bytes() + b"\0")
    return h.hexdigest()


def write_generator_certificate(result: dict, path: str) -> None:
    """Atomically write the certificate of a prove_all result; refuses one that did not prove."""
    if not result.get("proved") or result["algo"] not in _SOURCES:
        raise OptccError("certificate", "only a proved construction gets a generator certificate")
    data = {"format": FORMAT, "algo": result["algo"], "proved": True, "for_all": result["for_all"],
            "properties": result["properties"], "obligations": result["obligations"],
            "sources_sha256": sources_digest(result["algo"]), "z3_version": z3.get_version_string()}
    write_text_atomic(path, json.dumps(data, indent=2) + "\n", "certificate")


def is_generator_certificate(path: str) -> bool:
    """Whether `path` is a regular JSON file in the generator format (never waits on a FIFO)."""
    try:
        data = read_json(path, "certificate")
    except OptccError:
        return False
    return isinstance(data, dict) and data.get("format") == FORMAT


def _regenerate(algo: str, schedule):
    """The proved families enumerated on the schedule's own cluster and segment count."""
    from optcc.algorithms import check_segments
    from optcc.algorithms.families.optcc import optcc_flows
    from optcc.algorithms.ring import ring_allreduce
    from optcc.schedule import Schedule
    k = check_segments(schedule.meta.get("segments"))
    c = schedule.cluster
    if algo == "ring":
        return ring_allreduce(c, k)                 # ring_allreduce is the family enumeration
    (s, ell), = c.stragglers.items() if c.stragglers else [(0, 1)]
    meta = schedule.meta                            # descriptive, but its semantic keys must agree
    want = {"algorithm": "optcc", "segments": k, "capacity": "exclusive", "straggler": s}
    if any(meta.get(key) != v for key, v in want.items()):
        raise OptccError("meta", f"expected {want} in the schedule's meta")
    pieces, flows = optcc_flows(c.p, k, s, ell)
    return Schedule(c, pieces, flows, meta=meta)


def generator_certificate_check(schedule, path: str) -> tuple[bool, str]:
    """(True, note) iff `path` certifies the construction that produces exactly `schedule`."""
    try:
        data = read_json(path, "certificate")
    except OptccError as e:
        return False, f"cannot read {path}: {e.message}"
    if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("proved") is not True:
        return False, f"{path} is not a proved generator certificate"
    algo = data.get("algo")
    if algo not in _SOURCES or schedule.meta.get("algorithm") != algo:
        return False, f"certificate is for {algo!r}, schedule says {schedule.meta.get('algorithm')!r}"
    props = data.get("properties")
    if not isinstance(props, dict) or any(v != "proved" for v in props.values()) or "sum" not in props:
        return False, "certificate does not prove every property"
    if data.get("sources_sha256") != sources_digest(algo):
        return False, "the family sources changed since the proof (sources_sha256 differs); run prove-all again"
    c = schedule.cluster
    if c.g != 1 or len(c.stragglers) > 1 or c.p < _MIN_P[algo]:
        return False, (f"the proof covers g = 1, p ≥ {_MIN_P[algo]} and at most one straggler, "
                       f"not {c.describe()}")
    try:
        again = _regenerate(algo, schedule)
    except OptccError as e:
        return False, f"cannot regenerate the schedule from its parameters: {e}"
    if again.sha256() != schedule.sha256():
        return False, (f"the schedule (sha256 {schedule.sha256()[:16]}…) is not what the proved {algo} "
                       f"generator produces for its cluster and segments ({again.sha256()[:16]}…)")
    return True, (f"{algo} generator proved for {data['for_all']}; schedule regenerated, "
                  f"sha256 {schedule.sha256()[:16]}… matches")
