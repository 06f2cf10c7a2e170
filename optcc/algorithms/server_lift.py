"""Lifting a one-GPU-per-server schedule to g GPUs per server (derived): the straggler server,
the q-node instance cluster, the copy of an instance flow for local index l, and the NVLink
permutation rounds that reduce-scatter before and all-gather after the instances.

Local index l of every server forms instance l: the q GPUs {s·g + l} run the instance on 1/g
of the data over their own NICs; instance piece π becomes global piece l·P + π. Used by
optcc_servers (OptCC), baselines_r2ccl (R2CCL for g > 1) and lp_models.to_schedule (the LP
schedules for g > 1, any number of straggler servers: `server_slowdowns`, `node_cluster`).
"""
from __future__ import annotations

from fractions import Fraction

from typing import TYPE_CHECKING

from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.schedule import Flow

if TYPE_CHECKING:
    from optcc.schedule import Schedule
    from optcc.timing import IntegerTimes

ONE = Fraction(1)


def straggler_server(cluster: Cluster) -> tuple[int, Fraction]:
    """(server index, ℓ) of the one straggler server; (0, 1) when no GPU is slow.

    Raises OptccError unless every slow GPU is on one server and all g GPUs there share one ℓ.
    """
    g = cluster.g
    slow = cluster.stragglers
    if not slow:
        return 0, ONE
    servers = sorted({r // g for r in slow})
    if len(servers) > 1:
        raise OptccError("stragglers", f"the multi-GPU OptCC handles one straggler server; slow GPUs sit on "
                                       f"servers {servers}")
    s = servers[0]
    ells = {cluster.slowdown[s * g + i] for i in range(g)}
    if len(ells) != 1:
        raise OptccError("stragglers", f"server {s} mixes slowdowns {sorted(map(str, ells))}; a straggler "
                                       f"server has all its {g} GPUs at the same ℓ (a lost NIC slows the "
                                       f"whole server through PXN)")
    return s, ells.pop()


def instance_cluster(cluster: Cluster) -> tuple[Cluster, Fraction]:
    """The q-node cluster the instances run on (one node per server, the straggler server's ℓ)."""
    s, ell = straggler_server(cluster)
    q = cluster.servers
    return Cluster.build(q, 1, {s: ell} if ell != 1 else None), ell


def server_slowdowns(cluster: Cluster) -> list[Fraction]:
    """ℓ of every server (its GPUs' common ℓ), any number of straggler servers.

    Raises OptccError ("stragglers") where a server's GPUs mix slowdowns: instance l runs on
    local index l of every server, so one ℓ per server is what makes the q-node instance exact."""
    g = cluster.g
    out = []
    for s in range(cluster.servers):
        ells = set(cluster.slowdown[s * g:(s + 1) * g])
        if len(ells) != 1:
            raise OptccError("stragglers", f"server {s} mixes slowdowns {sorted(map(str, ells))}; the server "
                                           f"lift needs all {g} GPUs of a server at one ℓ")
        out.append(ells.pop())
    return out


def node_cluster(cluster: Cluster) -> Cluster:
    """The q-node, one-GPU-per-node cluster of the instances: node s at server s's ℓ."""
    ells = server_slowdowns(cluster)
    return Cluster.build(cluster.servers, 1, {s: e for s, e in enumerate(ells) if e != 1} or None)


def lifted_flow(f: Flow, l: int, g: int, P: int, start: Fraction) -> Flow:
    """Instance flow f as run by instance l (local index l of each server) at `start`: ranks and
    piece from the lift's proved formulas (families.servers.LIFT, evaluated as INT)."""
    from optcc.algorithms.families import INT
    from optcc.algorithms.families import servers as FS
    lift = FS.LIFT
    return Flow(lift.rank(INT, g, f.src, l), lift.rank(INT, g, f.dst, l), lift.piece(INT, P, l, f.piece), f.op,
                start, f.link, f.rate, f.coef)


def nvlink_round(server: int, g: int, t: int, op: str) -> list[tuple[int, int, int]]:
    """(src, dst, instance) of round t = 1..g−1 of an NVLink reduce-scatter ("add") or
    all-gather ("copy") on one server: GPU j sends to GPU (j+t) mod g that GPU's instance's
    pieces (add) or its own instance j's (copy). Each round is a permutation, so one flow per
    NVLink port direction. The lift's proved round formula (families.servers.LIFT.round_flow),
    evaluated as INT: what prove-all --algo servers proves is what runs."""
    from optcc.algorithms.families import INT
    from optcc.algorithms.families import servers as FS
    lift = FS.LIFT
    out = []
    for j in range(g):
        src, dst, inst = lift.round_flow(INT, g, t, j, op)
        out.append((lift.rank(INT, g, server, src), lift.rank(INT, g, server, dst), inst))
    return out


def touch_times(inst: Schedule, grid: IntegerTimes) -> tuple[list[dict[int, int]], list[dict[int, int]]]:
    """First touch (start of its first flow, either end) and last write (end of the last flow
    into it) of every (node, piece) of a q-node instance, as integers on its grid, keyed in order
    of first appearance: what the NVLink brackets around an instance (optcc_servers, optcc_rails)
    are placed by."""
    q = inst.cluster.p
    ft: list[dict[int, int]] = [dict() for _ in range(q)]
    lw: list[dict[int, int]] = [dict() for _ in range(q)]
    for f, start, end in zip(inst.flows, grid.starts, grid.ends):
        piece = f.piece
        for node in (f.src, f.dst):
            cur = ft[node].get(piece)
            if cur is None or start < cur:
                ft[node][piece] = start
        cur = lw[f.dst].get(piece)
        if cur is None or end > cur:
            lw[f.dst][piece] = end
    return ft, lw
