"""Put each process on its schedule rank when the cluster names hosts (optcc.hosts).

Every process contributes (host name, LOCAL_RANK, LOCAL_WORLD_SIZE) to one all_gather_object;
each then computes the same placement, so either every rank runs or every rank raises the same
error (no rank waits for a peer that gave up). OPTCC_HOSTNAME overrides socket.gethostname(),
so that tests (and containers with meaningless host names) can say which host a process is on.
gpu_runner.launch checks the same placement before it starts local ranks (check_placement).
"""
from __future__ import annotations

import os
import socket

from optcc.hosts import place_processes

HOSTNAME_ENV = "OPTCC_HOSTNAME"


def host_name() -> str:
    return os.environ.get(HOSTNAME_ENV) or socket.gethostname()


def _env_int(name: str):
    value = os.environ.get(name)
    return int(value) if value not in (None, "") else None


def placement(schedule, group=None):
    """(schedule rank of this process, schedule rank -> global rank or None, facts for the result)."""
    import torch.distributed as dist
    rank = dist.get_rank(group)
    if not schedule.cluster.hosts:
        return rank, None, {}
    world = dist.get_world_size(group)
    mine = (host_name(), _env_int("LOCAL_RANK"), _env_int("LOCAL_WORLD_SIZE"))
    everyone = [None] * world
    dist.all_gather_object(everyone, mine, group=group)
    order = place_processes(schedule.cluster, [e[0] for e in everyone], [e[1] for e in everyone],
                            [e[2] for e in everyone])
    to_global = (lambda r: r) if group is None or group is dist.group.WORLD else \
        (lambda r: dist.get_global_rank(group, r))
    schedule_rank_of = [0] * world
    for s, r in enumerate(order):
        schedule_rank_of[r] = s
    facts = {"hosts": [e[0] for e in everyone], "schedule_rank_of_process": schedule_rank_of}
    return schedule_rank_of[rank], [to_global(r) for r in order], facts
