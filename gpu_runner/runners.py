"""The runners, one table, and `make_executor`: the one way a rank gets the executor of a schedule.

torch-free at import (the CLI reads RUNNERS for its --runner choices); torch is imported when an
executor is made.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from optcc.errors import OptccError
from optcc.lowering.streaming import DEFAULT_WINDOW


@dataclass(frozen=True)
class Runner:
    name: str
    streaming: bool          # gpu_runner.streaming (a proved dependency program) or the step runner
    recv_order: bool         # streaming: receives wait for the previous receive on their port
    what: str
    executor: str = "gpu_runner.executor:Executor"   # module:class of a non-streaming runner's executor


_TABLE = (
    Runner("streaming", True, False, "no per-time barrier; receives posted early (default)"),
    Runner("streaming-ordered", True, True, "streaming, receives in the schedule's order per port"),
    Runner("step", False, False, "one batch of posts per start time (gpu_runner.executor)"),
    Runner("graph", False, False, "the step plans as CUDA streams, events and one NCCL P2P group per start "
           "time, captured once in a CUDA graph (CUDA tensors, NCCL; untested on GPUs)",
           "gpu_runner.device_executor:GraphExecutor"),
)
RUNNER = {r.name: r for r in _TABLE}
RUNNERS = tuple(RUNNER)
DEFAULT_RUNNER = "streaming"


def runner_named(name: str) -> Runner:
    if name not in RUNNER:
        raise OptccError("runner", f"expected one of {', '.join(RUNNERS)}, got {name!r}")
    return RUNNER[name]


def program_key(name: str) -> tuple[int, bool] | None:
    """(window, recv_order) of a streaming runner's program, None for the step and graph runners
    (they run the step plans of optcc.lowering.step)."""
    r = runner_named(name)
    return (DEFAULT_WINDOW, r.recv_order) if r.streaming else None


class RankExecutor(Protocol):
    """What every runner's executor is to its users (the worker, the DDP hook, bench): one rank's
    AllReduce of a proved schedule, in place."""

    def prepare(self, tensor: Any) -> Any:
        """Build (or reuse) what running on this tensor needs (plans, scratch, views)."""

    def run(self, tensor: Any) -> Any:
        """AllReduce `tensor` in place; returns it."""

    def close(self, timeout: float | None = None) -> bool:
        """End the executor's own threads, if any; False if they did not end within `timeout`."""

    @property
    def failed(self) -> bool:
        """A run raised: a later close() does not wait for work a dead peer left in flight."""


def make_executor(schedule, rank: int, runner: str = DEFAULT_RUNNER, *, group=None, group_ranks=None,
                  watchdog=None, certificate: str | None = None, unsafe: bool = False, program=None) -> RankExecutor:
    """The executor of `schedule` for schedule rank `rank` under `runner`. Both kinds pass
    gpu_runner.proof.gate; a streaming one runs only its rank's proved program
    (gpu_runner.proof.rank_program_of: built for this rank alone, compared by digest; a
    `program` given is compared by digest the same way)."""
    r = runner_named(runner)
    if r.streaming:
        from gpu_runner.streaming import StreamingExecutor
        return StreamingExecutor(schedule, rank, group=group, group_ranks=group_ranks, watchdog=watchdog,
                                 recv_order=r.recv_order, certificate=certificate, unsafe=unsafe,
                                 program=program)
    import importlib
    module, name = r.executor.split(":")
    cls = getattr(importlib.import_module(module), name)
    return cls(schedule, rank, group=group, group_ranks=group_ranks, watchdog=watchdog,
               certificate=certificate, unsafe=unsafe)
