"""Lifting a one-GPU-per-server schedule to g GPUs per server (derived): the copy of an instance
flow for local index l and the NVLink permutation rounds that reduce-scatter before and
all-gather after the instances, each the servers families' LIFT evaluated as INT (the cluster
shape it covers: servers.shape).

Local index l of every server forms instance l: the q GPUs {s·g + l} run the instance on 1/g
of the data over their own NICs; instance piece π becomes global piece l·P + π. Used by
optcc_servers (OptCC), baselines.r2ccl (R2CCL for g > 1), optcc_rails and lp_models.to_schedule.
"""
from __future__ import annotations

from fractions import Fraction

from typing import TYPE_CHECKING

from optcc.schedule import Flow

if TYPE_CHECKING:
    from optcc.schedule import Schedule
    from optcc.timing import IntegerTimes

def lifted_flow(f: Flow, l: int, g: int, P: int, start: Fraction) -> Flow:
    """Instance flow f as run by instance l (local index l of each server) at `start`: ranks and
    piece from the lift's proved formulas (families.servers.LIFT, evaluated as INT)."""
    from optcc.algorithms.families import INT
    from optcc.algorithms.servers import families as FS
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
    from optcc.algorithms.servers import families as FS
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
