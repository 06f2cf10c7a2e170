"""optcc_rails' schedule as EventArrays (its array form): the rails' flows from each rail's own
schedule or arrays, scaled by its share, and the NVLink lead and tail as grouped streams."""
from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from optcc.algorithms.limits import check_segments
from optcc.algorithms.rails import build as R
from optcc.algorithms.servers.arrays import CHUNK, _rail_columns
from optcc.event_arrays import ArrayBuilder, EventArrays, from_schedule

if TYPE_CHECKING:
    from optcc.cluster import Cluster


def rails_event_arrays(cluster: Cluster, segments: int) -> EventArrays:
    """optcc_rails.build(cluster, segments) as EventArrays (the same flows and local ops)."""
    k = check_segments(segments)
    R._check(cluster)
    g = cluster.g
    if cluster.servers == 1:
        return from_schedule(R.build(cluster, k))
    borrow = R._borrow_time(cluster, k)
    if borrow is not None and borrow < R._best_plan(cluster, k, materialize=False).end:
        return from_schedule(R.build(cluster, k))        # borrowing sub-rails: built (small clusters only)
    plan = R._best_plan(cluster, k, materialize="records")
    D = plan.lead
    pieces: list[Fraction] = []
    for l, (sched, _, _) in enumerate(plan.rails):
        pieces += [plan.shares[l] * x for x in sched.pieces]
    b = ArrayBuilder(cluster, pieces)
    columns: dict[int, tuple[Any, ...]] = {}
    for l, (sched, _, _) in enumerate(plan.rails):        # rail l's flows: start D + t·w_l
        w, off = plan.shares[l], plan.offsets[l]
        if id(sched) not in columns:
            columns[id(sched)] = _rail_columns(sched)
        src, dst, piece, st, scale, rate, ops = columns[id(sched)]
        if src.size:
            b.add(src * g + l, dst * g + l, off + piece, st, w / scale, D, rate=rate)
        for time, rank, pi in ops:
            b.add_op(D + time * w, rank * g + l, off + pi)
    # NVLink streams: (server, rail, piece, start on the plan's grid, half rate?, add?), g−1 flows
    # each; listed for one rail per class of equal rails, the same for every rail of the class
    assert plan.records is not None                    # materialize="records" lists them
    if plan.records[3].dtype == object:                # starts laid out on Python ints
        raise OverflowError("rails arrays: NVLink starts beyond int64 on this grid")
    cols = list(plan.records)
    plan.records = None
    if cols[0].size:
        s, l0, pc, st, both, add = cols
        rates = sorted(set(plan.half_rates) | set(plan.full_rates))
        index = {r: i for i, r in enumerate(rates)}
        others = np.array([[j for j in range(g) if j != l] for l in range(g)], dtype=np.int64)   # [l] -> j ≠ l
        for l in range(g):
            mine = np.flatnonzero(l0 == plan.rep[l])
            rc = np.array([index[plan.full_rates[l]], index[plan.half_rates[l]]], dtype=np.int64)
            off = plan.offsets[l]
            for c in range(0, mine.size, CHUNK):
                sel = mine[c:c + CHUNK]
                js = s[sel, None] * g + others[l]
                ls = np.broadcast_to((s[sel] * g + l)[:, None], js.shape)
                a = np.broadcast_to(add[sel, None] == 1, js.shape)
                shape = js.shape
                b.add(np.where(a, js, ls).ravel(), np.where(a, ls, js).ravel(),
                      np.broadcast_to((off + pc[sel])[:, None], shape).ravel(),
                      np.broadcast_to(st[sel, None], shape).ravel(), Fraction(1, plan.grid), nv=1,
                      rate=(np.broadcast_to(rc[both[sel]][:, None], shape).ravel(), rates))
    return b.finish()
