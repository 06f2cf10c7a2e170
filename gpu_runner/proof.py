"""Refuse to run a schedule the verifier has not proved (DESIGN.md, "Runner").

Calls the real verifier: `verifier.prove_allreduce(schedule)` (a Z3 proof), or, when a
certificate file is given, `verifier.check_certificate(schedule, path)` (re-executes the
schedule symbolically and re-checks the certificate's witness: no Z3, about linear time) or,
for a generator certificate (verifier.parametric.certificate), its check: the generator's
obligations re-proved by Z3 (once per process), the schedule compared with the proved formulas'
enumeration on its parameters and every duration with the timing model. Nothing here
decides correctness by itself. `require_numerics` adds the
floating-point side (verifier.numerics) for the dtype about to run.

`gate` is the library's door: every public entry point that executes a schedule (Executor,
StreamingExecutor, run_virtual; the CLI, the workers and the DDP hook via require_proof)
passes through it. A schedule require_proof accepted in this process (by proof or by a
re-checked certificate, recorded by sha256) passes at once; any other is proved (or its
certificate checked) there, and refused with OptccError("schedule" | "certificate", why).
Only an explicit `unsafe=True` (tests that must run a wrong schedule) skips it.
"""
from __future__ import annotations

from optcc.errors import OptccError
from optcc.schedule import Schedule


_PROVED: dict = {}    # sha256 -> Proof made in this process (launch writes the workers' certificate)
_ACCEPTED: dict = {}  # sha256 -> description: schedules require_proof accepted in this process
UNSAFE = "UNSAFE: executed without a proof or certificate (unsafe=True, for tests only)"


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
                return _accept(schedule, f"generator certificate {certificate}: {why}")
            raise OptccError("certificate", f"{certificate}: {why}; refusing to run it")
        ok, why = check_certificate(schedule, certificate)
        if ok:
            return _accept(schedule, f"certificate {certificate} re-checked (witness, causality, runnable) for "
                                     f"schedule sha256 {schedule.sha256()[:16]}")
        raise OptccError("certificate", f"{certificate} does not certify this schedule "
                                        f"(sha256 {schedule.sha256()[:16]}…): {why}; refusing to run it")
    proof = prove_allreduce(schedule, reported=())
    _PROVED[schedule.sha256()] = proof
    if not proof.proved:
        cx = proof.counterexample          # the first failed property, always with a message
        raise OptccError("schedule", "the verifier did not prove this schedule computes the AllReduce: "
                                     f"{cx['property']}: {cx['message']}; refusing to run it")
    unstated = "" if "time" in proof.properties else "; time not stated"
    return _accept(schedule, f"proved by the verifier ({', '.join(proof.properties)}{unstated}) in {proof.seconds:.2f} s")


def _accept(schedule: Schedule, description: str) -> str:
    _ACCEPTED[schedule.sha256()] = description
    return description


def gate(schedule: Schedule, certificate: str | None = None, unsafe: bool = False) -> str:
    """The proof description under which `schedule` may execute (module docstring), or OptccError."""
    if unsafe is True:
        return UNSAFE
    if unsafe is not False:
        raise OptccError("unsafe", f"expected True or False, got {unsafe!r}")
    if not isinstance(schedule, Schedule):
        raise OptccError("schedule", f"expected an optcc Schedule, got {type(schedule).__name__}")
    if certificate is None:
        known = _ACCEPTED.get(schedule.sha256())
        if known is not None:
            return known
    return require_proof(schedule, certificate)


def require_numerics(schedule: Schedule, dtype: str, allow_worse: bool = False) -> str:
    """Refuse a schedule whose rounding-error bound for `dtype` is worse than the ring's (or whose
    intermediates can overflow an integer dtype) unless `allow_worse`; returns the one-line report."""
    from verifier.numerics import analyze_numerics
    report = analyze_numerics(schedule, dtype)
    if not report.ok and not allow_worse:
        raise OptccError("schedule", f"numerics: {report.message}; refusing to run it "
                                     f"(allow it explicitly with --allow-worse-numerics)")
    return report.message
