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
    from verifier import certificate_matches, prove_allreduce
    if certificate:
        from verifier.parametric.certificate import generator_certificate_check, is_generator_certificate
        if is_generator_certificate(certificate):      # a proof of the generator, for all sizes
            ok, why = generator_certificate_check(schedule, certificate)
            if ok:
                return f"generator certificate {certificate}: {why}"
            raise OptccError("certificate", f"{certificate}: {why}; refusing to run it")
        if certificate_matches(schedule, certificate):
            return f"certificate {certificate} matches schedule sha256 {schedule.sha256()[:16]}"
        raise OptccError("certificate", f"{certificate} does not certify this schedule "
                                          f"(sha256 {schedule.sha256()[:16]}…); refusing to run it")
    proof = prove_allreduce(schedule)
    if not proof.proved:
        cx = proof.counterexample          # the first failed property, always with a message
        raise OptccError("schedule", "the verifier did not prove this schedule computes the AllReduce: "
                                     f"{cx['property']}: {cx['message']}; refusing to run it")
    return f"proved by the verifier ({', '.join(proof.properties)}) in {proof.seconds:.2f} s"
