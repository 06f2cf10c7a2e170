"""optcc_server_allreduce's flows as EventArrays: the q-node instance is a small Python schedule
(q = p/g), its g lifted copies and the O(g²·q·P) NVLink flows are emitted as numpy arrays, never
as Flow objects. The plan (lead, batch and stream starts) is the construction's own code
(servers.build._plan); tested flow for flow against the built schedules (tests/optcc/test_event_arrays.py).
`_rail_columns` also serves optcc_rails' array form (rails.arrays).
"""
from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from optcc.algorithms.servers import families as FS
from optcc.algorithms.families.arrays import NP
from optcc.errors import OptccError
from optcc.event_arrays import ArrayBuilder, EventArrays, from_schedule
from optcc.timing import IntegerTimes

if TYPE_CHECKING:
    from optcc.algorithms.rails.layout import ArrayRail
    from optcc.cluster import Cluster
    from optcc.schedule import Schedule

CHUNK = 1 << 16        # batches per numpy block (bounds the temporaries)


def _instance_columns(inst: Schedule) -> tuple[Any, ...]:
    """(src, dst, piece, start on the IntegerTimes grid, its scale, (rate classes, rates)) of a
    small g = 1 schedule's flows (NIC flows: what the instances and rails are)."""
    flows = inst.flows
    assert all(f.link == "nic" for f in flows), "instance flows: NIC"
    grid = IntegerTimes(inst)
    n = len(flows)

    def col(name: str) -> npt.NDArray[np.int64]:
        return np.fromiter((getattr(f, name) for f in flows), dtype=np.int64, count=n)

    rates = sorted({f.rate for f in flows}) or [Fraction(1)]
    index = {r: i for i, r in enumerate(rates)}
    rate_cls = np.fromiter((index[f.rate] for f in flows), dtype=np.int64, count=n)
    return col("src"), col("dst"), col("piece"), np.asarray(grid.starts, dtype=np.int64), grid.scale, \
        (rate_cls, rates)


def _rail_columns(sched: Schedule | ArrayRail) -> tuple[Any, ...]:
    """`_instance_columns` and the local ops (time, rank, piece) of an optcc_rails rail: a built
    schedule, or a rails_layout.ArrayRail read from its arrays (no schedule built)."""
    from optcc.algorithms.rails.layout import ArrayRail
    if not isinstance(sched, ArrayRail):
        return _instance_columns(sched) + ([(op.time, op.rank, op.piece) for op in sched.local_ops],)
    a = sched.arrays
    ops = [(Fraction(t, a.scale), rank, pi) for t, rank, pi in a.ops]
    return a.src, a.dst, a.piece, a.start, a.scale, Fraction(1), ops


def server_event_arrays(cluster: Cluster, segments: int) -> EventArrays:
    """optcc_server_allreduce(cluster, segments) as EventArrays (the same flows)."""
    from optcc.algorithms.limits import check_segments
    from optcc.algorithms.servers import build as S
    from optcc.algorithms.servers.shape import straggler_server
    k = check_segments(segments)
    straggler_server(cluster)
    g, q = cluster.g, cluster.servers
    if g == 1 or q == 1:
        return from_schedule(S.optcc_server_allreduce(cluster, k))
    return lifted_event_arrays(cluster, S._plan(cluster, k))


def lifted_event_arrays(cluster: Cluster, plan: dict[str, Any]) -> EventArrays:
    """optcc_servers.lift_instance(cluster, plan, …) as EventArrays (the same flows); `plan` from
    optcc_servers._plan, whichever q-node instance it lifts (OptCC's, or the LP schedule's)."""
    g = cluster.g
    P, M, rnd_i = plan["P"], plan["M"], plan["rnd_i"]
    b = ArrayBuilder(cluster, [sz for _ in range(g) for sz in plan["sizes"]])
    src, dst, piece, st, _, rate = _instance_columns(plan["inst"])
    del plan["inst"]
    times, at = np.unique(st, return_inverse=True)        # the lift's time map once per distinct start
    units = np.array([plan["global_time"](int(t)) for t in times], dtype=np.int64)[at]
    lift = FS.LIFT                                       # the lift's proved maps, on arrays (server_lift.lifted_flow)
    for l in range(g):
        b.add(lift.rank(NP, g, src, l), lift.rank(NP, g, dst, l), lift.piece(NP, P, l, piece), units, Fraction(1, M),
              rate=rate)
    _batches(b, plan["batches"], g, P, np.asarray(rnd_i, dtype=np.int64), Fraction(1, M))
    return b.finish()


def _batches(b: ArrayBuilder, batches: list[tuple[int, int, int, str]], g: int, P: int, rnd: npt.NDArray[np.int64],
             unit: Fraction) -> None:
    """optcc_servers._batch for every (server, start, piece, op), on arrays: the rounds, their
    starts and flows are families.servers.LIFT's."""
    lo, hi = FS.LIFT.rounds(NP, g)
    t = np.arange(lo, hi + 1, dtype=np.int64)[None, :, None]
    j = np.arange(g, dtype=np.int64)[None, None, :]
    for op in ("add", "copy"):
        rows = [(s, st, pi) for s, st, pi, o in batches if o == op]
        if not rows:
            continue
        cols = np.array(rows, dtype=np.int64)           # starts < 2^62 on the grid (the builder checks)
        del rows
        for c in range(0, len(cols), CHUNK):
            s, st, pi = (cols[c:c + CHUNK, x][:, None, None] for x in range(3))
            shape = (s.shape[0], t.shape[1], g)
            src_j, dst_j, inst = FS.LIFT.round_flow(NP, g, t, j, op)     # the proved round, on arrays
            start = FS.LIFT.round_start(NP, st, t, rnd[pi])
            if start.dtype.kind != "i":
                raise OptccError("servers", "a round start is off the integer grid")
            b.add(np.broadcast_to(FS.LIFT.rank(NP, g, s, src_j), shape).ravel(),
                  np.broadcast_to(FS.LIFT.rank(NP, g, s, dst_j), shape).ravel(),
                  np.broadcast_to(FS.LIFT.piece(NP, P, inst, pi), shape).ravel(), np.broadcast_to(start, shape).ravel(),
                  unit, nv=1)
