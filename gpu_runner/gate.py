"""The checks every run path makes with its peers before a schedule's first message.

The proof itself is gpu_runner.proof's (require_proof, accept_generator_here, the attestation);
what a rank cannot decide alone is here, so that `python -m gpu_runner` (the workers of `optcc
run`, `bench`, `testbed` and torchrun) and the DDP hook decide alike:
- `agree_on_schedule`: every rank of the group holds the same schedule (its sha256, all-gathered);
  ranks handed different files, each proved, would pair messages of two schedules;
- `admit_numerics`: the rounding-error decision for the dtype about to run, for a flow list
  (verifier.numerics on the instance) or a generated schedule (the summation-tree lemma on
  prove-all's sum invariant), refused unless explicitly allowed, as `optcc run` refuses it.
"""
from __future__ import annotations

from optcc.errors import OptccError

def dtype_name(dtype) -> str:
    """The runner's name of a torch dtype (OptccError "dtype" for one no runner supports)."""
    from gpu_runner.worker import DTYPES
    name = str(dtype).removeprefix("torch.")
    if name not in DTYPES:
        raise OptccError("dtype", f"optcc runs {', '.join(DTYPES)}; got {name}")
    return name


def admit_numerics(schedule, dtype: str, allow_worse: bool = False) -> str:
    """The numerics report for `dtype`, or OptccError("schedule") where it is worse than the ring's
    and `allow_worse` is not given: the decision `optcc run` makes."""
    from gpu_runner.admission import admission_of
    return admission_of(schedule).numerics(schedule, dtype, allow_worse)


def disagreement(digests: list[str]) -> str | None:
    """None when every rank's digest is the same; else which ranks hold which schedule."""
    by: dict[str, list[int]] = {}
    for rank, d in enumerate(digests):
        by.setdefault(d, []).append(rank)
    if len(by) == 1:
        return None
    parts = [f"ranks {', '.join(map(str, ranks))} hold sha256 {d[:16]}…" for d, ranks in by.items()]
    return "the ranks hold different schedules: " + "; ".join(parts)


def agree_on_schedule(digest: str, group=None) -> None:
    """All-gather every rank's schedule sha256 over `group`; OptccError("schedule") naming the
    ranks on every rank where any differs (so all of them stop, none waits for a peer)."""
    import torch.distributed as dist
    got: list = [None] * dist.get_world_size(group)
    dist.all_gather_object(got, digest, group=group)
    why = disagreement([str(d) for d in got])
    if why is not None:
        raise OptccError("schedule", why + "; refusing to run")
