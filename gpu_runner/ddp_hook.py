"""DDP communication hook that all-reduces each gradient bucket with a proved optcc Schedule.

Usage, like torch.distributed.algorithms.ddp_comm_hooks.default_hooks.allreduce_hook:

    state = OptccHookState(schedule)              # proves it (or checks `certificate`)
    model.register_comm_hook(state, optcc_hook)

The hook divides the bucket by the world size (DDP averages gradients, as the default hook
does) and hands the bucket to the state's communication thread, which runs the schedule in
place (streaming runner by default, `runner="step"` for the step runner) and completes the
returned Future; the hook itself returns at once, so communication overlaps the rest of the
backward pass. Buckets run one after another in the order DDP hands them over (the same on
every rank, so messages pair up). On CUDA the thread runs on a side stream that first waits for
the bucket's gradients (an event recorded by the hook). `asynchronous=False` runs the schedule
inside the hook and returns a completed Future. Plans and scratch are cached per bucket size.
"""
from __future__ import annotations

import queue
import threading

import torch
import torch.distributed as dist

from gpu_runner.executor import Executor
from gpu_runner.proof import require_proof
from optcc.errors import OptccError


class OptccHookState:
    """The schedule, the process group, the cached executor and the communication thread."""

    def __init__(self, schedule, process_group=None, certificate: str | None = None, watchdog=None,
                 runner: str = "streaming", asynchronous: bool = True):
        if runner not in ("streaming", "step"):
            raise OptccError("runner", f"expected 'streaming' or 'step', got {runner!r}")
        self.proof = require_proof(schedule, certificate)
        self.schedule = schedule
        self.process_group = process_group
        self.watchdog = watchdog
        self.runner = runner
        self.asynchronous = asynchronous
        self._program = None
        if runner == "streaming":
            from gpu_runner.streaming import StreamingRefused, require_streaming
            try:
                self._program = require_streaming(schedule)
            except StreamingRefused as e:
                raise OptccError("runner", str(e)) from None
        self._executor = None
        self._jobs: queue.Queue | None = None
        self._stream = None

    def executor(self):
        if self._executor is None:
            group = self.process_group
            world = dist.get_world_size(group)
            if world != self.schedule.cluster.p:
                raise OptccError("schedule", f"the schedule is for p = {self.schedule.cluster.p} ranks, "
                                             f"the process group has {world}")
            from gpu_runner.hosts import placement   # stragglers named by host
            rank, ranks, _ = placement(self.schedule, group)
            if ranks is None and group is not None and group is not dist.group.WORLD:
                ranks = [dist.get_global_rank(group, r) for r in range(world)]
            if self.runner == "step":
                self._executor = Executor(self.schedule, rank, group=group, group_ranks=ranks,
                                          watchdog=self.watchdog)
            else:
                from gpu_runner.streaming import StreamingExecutor
                self._executor = StreamingExecutor(self.schedule, rank, group=group, group_ranks=ranks,
                                                   watchdog=self.watchdog, program=self._program)
        return self._executor

    def submit(self, tensor: torch.Tensor) -> torch.futures.Future:
        """All-reduce `tensor` in place off this thread; the Future completes with it."""
        executor = self.executor()
        fut: torch.futures.Future = torch.futures.Future()
        if not self.asynchronous:
            executor.run(tensor)
            fut.set_result(tensor)
            return fut
        ready = None
        if tensor.is_cuda:
            ready = torch.cuda.Event()
            ready.record()                  # the bucket's gradients, on the training stream
            if self._stream is None:
                self._stream = torch.cuda.Stream(device=tensor.device)
        if self._jobs is None:
            self._jobs = queue.Queue()
            threading.Thread(target=self._loop, name="optcc-ddp-comm", daemon=True).start()
        self._jobs.put((tensor, fut, ready))
        return fut

    def _loop(self) -> None:
        while True:
            tensor, fut, ready = self._jobs.get()
            try:
                if ready is not None:
                    with torch.cuda.device(tensor.device), torch.cuda.stream(self._stream):
                        self._stream.wait_event(ready)
                        self._executor.run(tensor)
                    self._stream.synchronize()
                else:
                    self._executor.run(tensor)
            except Exception as e:  # noqa: BLE001 - DDP re-raises it from fut.wait()
                fut.set_exception(e)
                continue
            fut.set_result(tensor)


def optcc_hook(state: OptccHookState, bucket) -> torch.futures.Future:
    """All-reduce (average) one DDP gradient bucket with the state's schedule; returns at once."""
    tensor = bucket.buffer()
    tensor.div_(state.schedule.cluster.p)
    return state.submit(tensor)
