"""DDP communication hook that all-reduces each gradient bucket with a proved optcc Schedule.

Usage, like torch.distributed.algorithms.ddp_comm_hooks.default_hooks.allreduce_hook:

    state = OptccHookState(schedule)              # proves it (or checks `certificate`)
    model.register_comm_hook(state, optcc_hook)

The hook divides the bucket by the world size (DDP averages gradients, as the default hook
does), runs the schedule in place on the bucket's flat buffer, and returns a completed Future.
Plans and scratch are cached per bucket size, so steady-state steps allocate nothing.
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from gpu_runner.executor import Executor
from gpu_runner.proof import require_proof
from optcc.errors import OptccError


class OptccHookState:
    """The schedule, the process group, and the cached executor (plans + scratch per bucket size)."""

    def __init__(self, schedule, process_group=None, certificate: str | None = None, watchdog=None):
        self.proof = require_proof(schedule, certificate)
        self.schedule = schedule
        self.process_group = process_group
        self.watchdog = watchdog
        self._executor = None

    def executor(self) -> Executor:
        if self._executor is None:
            group = self.process_group
            world = dist.get_world_size(group)
            if world != self.schedule.cluster.p:
                raise OptccError("schedule", f"the schedule is for p = {self.schedule.cluster.p} ranks, "
                                             f"the process group has {world}")
            rank = dist.get_rank(group)
            ranks = None
            if group is not None and group is not dist.group.WORLD:
                ranks = [dist.get_global_rank(group, r) for r in range(world)]
            self._executor = Executor(self.schedule, rank, group=group, group_ranks=ranks,
                                      watchdog=self.watchdog)
        return self._executor


def optcc_hook(state: OptccHookState, bucket) -> torch.futures.Future:
    """All-reduce (average) one DDP gradient bucket with the state's schedule."""
    tensor = bucket.buffer()
    tensor.div_(state.schedule.cluster.p)
    state.executor().run(tensor)
    fut: torch.futures.Future = torch.futures.Future()
    fut.set_result(tensor)
    return fut
