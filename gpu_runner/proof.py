"""Refuse to run a schedule the verifier has not proved (DESIGN.md, "Runner").

Calls the real verifier: `verifier.prove_allreduce(schedule)` (a Z3 proof), or, when a
certificate file is given, `verifier.certificate_matches(schedule, path)` (cheap hash check of a
proof made earlier). Nothing here decides correctness by itself.
"""
from __future__ import annotations

from optcc.errors import OptccError
from optcc.schedule import Schedule


def require_proof(schedule: Schedule, certificate: str | None = None) -> str:
    """Return a one-line description of the proof, or raise OptccError('schedule', why)."""
    from verifier import certificate_matches as matches
    from verifier import prove_allreduce as prove
    if certificate:
        if matches(schedule, certificate):
            return f"certificate {certificate} matches schedule sha256 {schedule.sha256()[:16]}"
        raise OptccError("--certificate", f"{certificate} does not certify this schedule "
                                          f"(sha256 {schedule.sha256()[:16]}…); refusing to run it")
    proof = prove(schedule)
    if not getattr(proof, "proved", False):
        cex = getattr(proof, "counterexample", None)
        if isinstance(cex, dict) and cex.get("message"):
            cex = f"{cex.get('property', 'property')}: {cex['message']}"
        raise OptccError("schedule", "the verifier did not prove this schedule computes the AllReduce"
                                     + (f": {cex}" if cex else "") + "; refusing to run it")
    props = getattr(proof, "properties", None) or {}
    names = [k for k, v in props.items() if v] if isinstance(props, dict) else list(props)
    return f"proved by the verifier ({', '.join(names) or 'allreduce'}) in {getattr(proof, 'seconds', 0):.2f} s"
