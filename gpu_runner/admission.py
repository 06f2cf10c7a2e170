"""How each form of a schedule is admitted to run: one row per form, read by every run path.

A schedule comes in two forms (optcc.schedule.ScheduleForm): "flows", the flow list, proved as
an instance (or its certificate re-checked); and "generated", a proved construction's
parameters, accepted by its generator's proof, each rank building and checking only its own
part. The launcher (`optcc run`, bench, testbed), a worker (attested by its launcher, or alone
under torchrun) and the DDP hook ask the row of `schedule.form` what to do at each door, so a
new form is one row here, and no run path tells the forms apart by itself.

The proofs themselves are gpu_runner.proof's; this module only says which of them each form
needs, and refuses what a form cannot do (a generated schedule takes no certificate and runs
only with the streaming runners: each rank lowers only its own part).
"""
from __future__ import annotations

from typing import Protocol

from optcc.errors import OptccError
from optcc.schedule import Schedule, ScheduleForm


class Admission(Protocol):
    """The doors a schedule of one form passes, in the order a run meets them."""

    def before_launch(self, schedule: ScheduleForm, certificate: str | None, dtype: str | None,
                      allow_worse: bool) -> str:
        """A launcher, before any process starts: accept it (and its numerics for `dtype`)."""

    def runner_note(self, schedule: ScheduleForm, runner: str) -> str:
        """What `runner` needs of this schedule, checked now; OptccError("runner") if refused."""

    def attest(self, schedule: ScheduleForm, path: str, runner: str, dtype: str | None, allow_worse: bool,
               certificate: str | None) -> None:
        """Write, signed, what this process accepted, for the workers it starts."""

    def attested(self, schedule: ScheduleForm, attestation: str, dtype: str, allow_worse: bool) -> str:
        """A launcher's worker: check the launcher's attestation instead of proving."""

    def here(self, schedule: ScheduleForm, certificate: str | None, dtype: str | None, allow_worse: bool,
             runner: str) -> str:
        """A process with no launcher (torchrun, the DDP hook): accept it by a proof made here."""

    def rank_part(self, schedule: ScheduleForm, rank: int, runner: str, dtype: str | None = None,
                  allow_worse: bool = False) -> Schedule:
        """What rank `rank` lowers: the flow list, or its own part, checked."""

    def numerics(self, schedule: ScheduleForm, dtype: str, allow_worse: bool = False) -> str:
        """The rounding-error decision for `dtype`, as `optcc run` makes it."""


def streaming_key(runner: str) -> tuple[int, bool]:
    """(window, recv_order) of a streaming runner; OptccError("runner") for the others, which
    lower the whole flow list (optcc.lowering.step) a generated schedule never builds per rank."""
    from gpu_runner.runners import program_key
    key = program_key(runner)
    if key is None:
        raise OptccError("runner", f"a generated schedule runs with the streaming runners (each rank builds and "
                                   f"checks only its own program); --runner {runner} needs the flow list "
                                   f"(optcc schedule --form flows)")
    return key


def _no_certificate(certificate: str | None) -> None:
    if certificate:
        raise OptccError("certificate", "a generated schedule is accepted by its generator's proof, re-proved "
                                        "here; it takes no certificate")


class FlowListAdmission:
    """A flow list: proved as an instance (verifier.prove_allreduce) or its certificate re-checked;
    numerics by verifier.numerics on the instance; streaming programs proved for every rank."""

    def before_launch(self, schedule, certificate, dtype, allow_worse):
        from gpu_runner.proof import require_numerics, require_proof
        note = require_proof(schedule, certificate)
        if dtype is not None:
            note += "; " + require_numerics(schedule, dtype, allow_worse)
        return note

    def runner_note(self, schedule, runner):
        from gpu_runner.proof import require_streaming
        from gpu_runner.runners import program_key
        key = program_key(runner)
        if key is None:
            return f"{runner} runner"                     # step, graph: the step plans (checked per plan)
        program = require_streaming(schedule, *key)       # OptccError("runner") when refuted
        order = ", receives in port order" if program.recv_order else ""
        return f"streaming runner (proved safe, window {program.window}{order})"

    def attest(self, schedule, path, runner, dtype, allow_worse, certificate):
        from gpu_runner.proof import gate, write_attestation, write_generated_attestation
        from gpu_runner.runners import program_key
        gate(schedule, certificate)                       # accepted in this process already: a lookup
        generated = getattr(schedule, "generated", None)  # built here from a generated file (launch.flows_of)
        if generated is not None:
            write_generated_attestation(generated, schedule, path, dtype, allow_worse, [streaming_key(runner)])
        else:
            key = program_key(runner)
            write_attestation(schedule, path, dtype, allow_worse, [key] if key else [])

    def attested(self, schedule, attestation, dtype, allow_worse):
        from gpu_runner.proof import accept_attestation, require_numerics
        note = accept_attestation(schedule, attestation)   # its signature, not the proof
        require_numerics(schedule, dtype, allow_worse)      # attested: a lookup
        return note

    def here(self, schedule, certificate, dtype, allow_worse, runner):
        from gpu_runner.proof import require_numerics, require_proof, require_streaming
        from gpu_runner.runners import program_key
        note = require_proof(schedule, certificate)        # a certificate is re-checked (witness), never trusted
        if dtype is not None:
            require_numerics(schedule, dtype, allow_worse)
        key = program_key(runner)
        if key is not None:
            require_streaming(schedule, *key)               # refused before any message: OptccError("runner")
        return note

    def rank_part(self, schedule, rank, runner, dtype=None, allow_worse=False):
        return schedule

    def numerics(self, schedule, dtype, allow_worse=False):
        from gpu_runner.proof import require_numerics
        return require_numerics(schedule, dtype, allow_worse)


class GeneratedAdmission:
    """A generated schedule: its generator's obligations re-proved (once per process), numerics by
    the summation-tree lemma; each rank builds its own part, checks it against the proved terms
    and checks its own streaming program (verifier.streaming_local)."""

    def before_launch(self, schedule, certificate, dtype, allow_worse):
        from gpu_runner.proof import accept_generator
        _no_certificate(certificate)
        note = accept_generator(schedule)
        if dtype is not None:
            note += "; " + self.numerics(schedule, dtype, allow_worse)
        return note

    def runner_note(self, schedule, runner):
        window, _ = streaming_key(runner)
        return f"streaming runner (window {window}; each rank checks its own program: verifier.streaming_local's " \
               f"order argument)"

    def attest(self, schedule, path, runner, dtype, allow_worse, certificate):
        from gpu_runner.proof import write_generated_attestation_per_rank
        write_generated_attestation_per_rank(schedule, path, dtype, allow_worse, [streaming_key(runner)])

    def attested(self, schedule, attestation, dtype, allow_worse):
        from gpu_runner.proof import accept_generated_attestation
        return accept_generated_attestation(schedule, attestation)   # numerics: on the part (rank_part)

    def here(self, schedule, certificate, dtype, allow_worse, runner):
        from gpu_runner.proof import accept_generator_here
        key = streaming_key(runner)
        _no_certificate(certificate)
        return accept_generator_here(schedule, dtype, allow_worse, [key])

    def rank_part(self, schedule, rank, runner, dtype=None, allow_worse=False):
        from gpu_runner.proof import generated_rank_schedule, require_numerics
        streaming_key(runner)
        part = generated_rank_schedule(schedule, rank)
        if dtype is not None:
            require_numerics(part, dtype, allow_worse)      # attested: a lookup
        return part

    def numerics(self, schedule, dtype, allow_worse=False):
        from gpu_runner.proof import generated_numerics
        return generated_numerics(schedule, dtype, allow_worse)


ADMISSIONS: dict[str, Admission] = {"flows": FlowListAdmission(), "generated": GeneratedAdmission()}


def admission_of(schedule: object) -> Admission:
    """The row of `schedule`'s form; OptccError("schedule") for anything that is not a schedule."""
    form = getattr(type(schedule), "form", None)
    if not isinstance(form, str) or form not in ADMISSIONS:
        raise OptccError("schedule", f"expected an optcc schedule (a flow list or a generated schedule), "
                                     f"got {type(schedule).__name__}")
    return ADMISSIONS[form]
