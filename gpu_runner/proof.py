"""Refuse to run a schedule the verifier has not proved (DESIGN.md, "Runner").

Calls the real verifier: `verifier.prove_allreduce(schedule)` (a Z3 proof), or, when a
certificate file is given, `verifier.check_certificate(schedule, path)` (re-executes the
schedule symbolically and re-checks the certificate's witness: no Z3, about linear time) or,
for a generator certificate (verifier.parametric.certificate), its check: the generator's
obligations re-proved by Z3 (once per process), the schedule compared with the proved formulas'
enumeration on its parameters and every duration with the timing model. Nothing here
decides correctness by itself. `require_numerics` adds the
floating-point side (verifier.numerics) for the dtype about to run.
"""
from __future__ import annotations

from optcc.errors import OptccError
from optcc.schedule import Schedule


_PROVED: dict = {}    # sha256 -> Proof made in this process (launch writes the workers' certificate)


def proof_of(schedule: Schedule):
    """The Proof require_proof made for this exact schedule in this process, or None."""
    return _PROVED.get(schedule.sha256())


def require_proof(schedule: Schedule, certificate: str | None = None) -> str:
    """Return a one-line description of the proof, or raise OptccError('schedule', why)."""
    from verifier import check_certificate, prove_allreduce
    if certificate:
        from verifier.parametric.certificate import generator_certificate_check, is_generator_certificate
        if is_generator_certificate(certificate):      # a proof of the generator, for all sizes
            ok, why = generator_certificate_check(schedule, certificate)
            if ok:
                return f"generator certificate {certificate}: {why}"
            raise OptccError("certificate", f"{certificate}: {why}; refusing to run it")
        ok, why = check_certificate(schedule, certificate)
        if ok:
            return (f"certificate {certificate} re-checked (witness, causality, runnable) for schedule "
                    f"sha256 {schedule.sha256()[:16]}")
        raise OptccError("certificate", f"{certificate} does not certify this schedule "
                                        f"(sha256 {schedule.sha256()[:16]}…): {why}; refusing to run it")
    proof = prove_allreduce(schedule, reported=())
    _PROVED[schedule.sha256()] = proof
    if not proof.proved:
        cx = proof.counterexample          # the first failed property, always with a message
        raise OptccError("schedule", "the verifier did not prove this schedule computes the AllReduce: "
                                     f"{cx['property']}: {cx['message']}; refusing to run it")
    return f"proved by the verifier ({', '.join(proof.properties)}) in {proof.seconds:.2f} s"


def require_numerics(schedule: Schedule, dtype: str, allow_worse: bool = False) -> str:
    """Refuse a schedule whose rounding-error bound for `dtype` is worse than the ring's (or whose
    intermediates can overflow an integer dtype) unless `allow_worse`; returns the one-line report."""
    from verifier.numerics import analyze_numerics
    report = analyze_numerics(schedule, dtype)
    if not report.ok and not allow_worse:
        raise OptccError("schedule", f"numerics: {report.message}; refusing to run it "
                                     f"(allow it explicitly with --allow-worse-numerics)")
    return report.message
