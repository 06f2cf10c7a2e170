"""OptCC for g GPUs per server and one straggler server: NVLink reduce-scatter, g inter-server
single-straggler OptCC instances (q = 2: k segments swapped in turn), NVLink all-gather,
pipelined so NVLink work hides under NIC work.

Paper (PAPER.md "Several GPUs per server", Figures 13-19, Theorem 3): g GPUs per server, a
failure slows all g GPUs of one server by ℓ; NVLink inside servers, NICs between them;
intra-server reduction and broadcast; OptCC's four stages between servers; NVLink and NIC work
interleaved so the NICs keep working.

Ours (derived; the argument is in docs/optcc_servers.md "Construction and slot time"):
- Local index l of every server forms instance l (optcc.algorithms.servers.lift): the q GPUs
  {s·g + l} run optcc_single over the servers on 1/g of the data; instance time t runs at
  D + t/g. q = 2: the instance is k segments swapped one after another (`_two_server_instance`).
- At server s, an NVLink reduce-scatter batch of instance piece π (g−1 permutation rounds) ends
  by the instance's first touch of π; an all-gather batch follows π's last write. RS batches run
  back to back from 0 in first-touch order, the lead D is the smallest that meets every
  deadline, AG batches run in release order as soon as NVLink is free.
- q = 1: NVLink reduce-scatter then all-gather of g pieces (k is ignored).

Slot time (`optcc_server_slot_time`), c = (g−1)·δ/(g·s_nv) for the instance shard δ,
W = 2(g−1)/(g·s_nv): T_1/g + 3c (q ≥ 3, when s_nv ≥ g − 1 and W ≤ T_1/g; it raises otherwise),
max(ℓ/g + W/k, W) (q = 2), W (q = 1).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

from optcc.algorithms.stated import states_slot_time
from optcc.algorithms.limits import check_segments
from optcc.algorithms.single.build import _shard_size, optcc_slot_time
from optcc.algorithms.servers.shape import instance_cluster as _instance_cluster
from optcc.algorithms.servers.lift import lifted_flow, nvlink_round, touch_times
from optcc.algorithms.servers.shape import straggler_server
from optcc.algorithms.families import INT
from optcc.algorithms.servers import families as FS
from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.schedule import Flow, Schedule
from optcc.timing import IntegerTimes

def optcc_server_slot_time(cluster: Cluster, segments: int) -> Fraction:
    """Closed-form slot time (n/B) of `optcc_server_allreduce` (derived, docs/optcc_servers.md
    "Construction and slot time").

    Raises OptccError (field "nvlink_bandwidth") for q ≥ 3 outside the stated NVLink conditions;
    q = 1 and q = 2 hold for every NVLink speed."""
    k = check_segments(segments)
    g, q = cluster.g, cluster.servers
    s_nv = cluster.nvlink_speedup
    if q == 1:
        straggler_server(cluster)
        return Fraction(2 * (g - 1), g) / s_nv
    inst, ell = _instance_cluster(cluster)
    if q == 2:                               # no validity condition (docs/optcc_servers.md)
        nvlink_work = 2 * Fraction(g - 1, g) / s_nv
        return max(ell / g + nvlink_work / k, nvlink_work)
    t1 = optcc_slot_time(inst, k)
    delta = _shard_size(q - 1, k, ell)                 # the instance's shard (optcc_single)
    c = (g - 1) * delta / (g * s_nv)
    if s_nv < g - 1 or 2 * (g - 1) / s_nv > t1:
        raise OptccError("nvlink_bandwidth", f"no closed form when NVLink is slower than g−1 = {g - 1} NICs or "
                                             f"its total work 2(g−1)/(g·s_nv) exceeds the NIC part T_1/g "
                                             f"(s_nv = {s_nv}); time the generated schedule instead")
    return t1 / g + 3 * c


@states_slot_time("optcc_server_slot_time")
def optcc_server_allreduce(cluster: Cluster, segments: int = 1) -> Schedule:
    """The schedule of the module docstring: exclusive port model, explicit starts."""
    k = check_segments(segments)
    g, q = cluster.g, cluster.servers
    s_star, ell = straggler_server(cluster)
    meta = {"algorithm": "optcc", "segments": k, "capacity": "exclusive", "g": g,
            "straggler_server": s_star,
            "construction": "NVLink RS + g single-straggler OptCC instances + NVLink AG, "
                            "see optcc_servers (derived)"}
    if g == 1:
        raise OptccError("g", "optcc_server_allreduce is for g > 1; use optcc_single for g = 1")
    if q == 1:
        return _one_server(cluster, meta)
    return lift_instance(cluster, _plan(cluster, k), meta)


def lift_instance(cluster: Cluster, plan: dict[str, Any], meta: dict[str, Any], lead: bool = True) -> Schedule:
    """The g lifted copies of plan's q-node instance on the NICs and the NVLink RS/AG batches
    (the module docstring's lift; `plan` from `_plan`). Also lifts other q-node instances
    (lp_models.to_schedule.lp_server_schedule): meta says the schedule's capacity model."""
    g = cluster.g
    inst, grid, P, M = plan["inst"], plan["grid"], plan["P"], plan["M"]
    fractions: dict[int, Fraction] = {}

    def at(v: int) -> Fraction:               # one Fraction object per distinct time
        x = fractions.get(v)
        if x is None:
            x = fractions[v] = Fraction(v, M)
        return x

    flows: list[Flow] = []
    app = flows.append
    if inst is not None:
        starts: dict[int, Fraction] = {}
        for f, st in zip(inst.flows, grid.starts):   # g copies of the instance on the NICs
            start = starts.get(st)
            if start is None:
                start = starts[st] = at(plan["global_time"](st))
            for l in range(g):
                app(lifted_flow(f, l, g, P, start))
    rounds: dict[tuple[int, int, str], list[tuple[int, int, int]]] = {}
    for s, st, pi, op in plan["batches"]:
        _batch(app, s, g, P, pi, st, plan["rnd_i"][pi], op, M, at, rounds)
    pieces = [sz for l in range(g) for sz in plan["sizes"]]
    if lead:
        meta["lead"] = str(Fraction(plan["D"], M))
    return Schedule(cluster, pieces, flows, meta=meta)


class _Raw(int):
    """An instance time on the global grid before the lift's division by g (t·M/scale): LIFT's
    `t / g` on it is exact integer division, so the lift's formulas run on ints."""
    __slots__ = ()

    def __truediv__(self, other: int) -> int:
        q, r = divmod(int(self), other)
        if r:
            raise OptccError("servers", f"instance time {int(self)}/{other} is off the global grid")
        return q


def _plan(cluster: Cluster, k: int, inst: Schedule | None = None) -> dict[str, Any]:
    """Everything of optcc_server_allreduce but the flows, on one integer grid: the instance
    (`inst`, a q-node g = 1 schedule, where given; else the construction's own, from its proved
    families; none for q = 1) and its grid, the first touch and last write of every (server,
    piece) read off the instance's flows (prove-all proves the closed forms server_flows uses
    equal them), the grid M of global times (value = int / M), the lead D, `global_time`
    (instance grid time -> global grid time), the round length of every piece, and the NVLink
    batches (server, start on M, instance piece, "add" | "copy") in the order the schedule lists
    them. Sizes, lengths, lead, placement and clock are families.servers' formulas
    (batch_lengths, place_batches, LIFT), the ones prove-all proves, evaluated on ints;
    optcc.algorithms.servers.arrays emits the same flows as arrays."""
    g = cluster.g
    if inst is None:
        got = FS._instance(cluster, k, FS.TWO_SERVER_FAMILIES)
        inst = None if got is None else got[0]
    inst_sizes = inst.pieces if inst is not None else [Fraction(1)]
    sizes, rnd, batch = FS.batch_lengths(INT, FS.LIFT, inst_sizes, g, cluster.nvlink_speedup)
    grid = IntegerTimes(inst) if inst is not None else None
    scale = grid.scale if grid is not None else 1
    M = math.lcm(scale * g, *(Fraction(x).denominator for x in rnd + batch))
    raw = M // scale                                   # instance grid unit, on the global grid before /g

    def on_grid(x: Fraction | int) -> int:
        v = Fraction(x) * M
        if v.denominator != 1:
            raise OptccError("servers", f"length {x} is off the grid 1/{M}")
        return v.numerator

    ft_i: list[dict[int, int]] = [{0: 0}]              # q = 1: one piece, touched at time 0
    lw_i: list[dict[int, int]] = [{0: 0}]
    if inst is not None and grid is not None:
        ft_i, lw_i = touch_times(inst, grid)
    ft = [{pi: _Raw(v * raw) for pi, v in d.items()} for d in ft_i]
    lw = [{pi: _Raw(v * raw) for pi, v in d.items()} for d in lw_i]
    batch_i = [on_grid(x) for x in batch]
    D, batches = FS.place_batches(INT, FS.LIFT, ft, lw, batch_i, g)

    def global_time(st: int) -> int:                   # instance grid time -> global grid time
        return int(FS.LIFT.time(INT, D, _Raw(st * raw), g))

    return {"inst": inst, "grid": grid, "P": len(inst_sizes), "M": M, "D": D, "global_time": global_time,
            "rnd_i": [on_grid(x) for x in rnd], "sizes": sizes, "batches": batches}


def _batch(app: Callable[[Flow], None], s: int, g: int, P: int, pi: int, start: int, rnd: int, op: str, M: int,
           at: Callable[[int], Fraction], rounds: dict[tuple[int, int, str], list[tuple[int, int, int]]]) -> None:
    """The NVLink batch of piece π on server s for every instance: rounds FS.LIFT.rounds, round t
    at FS.LIFT.round_start (start and rnd ints on the grid 1/M; `at` makes a grid value its
    shared Fraction), its flows server_lift.nvlink_round's (cached in `rounds` across batches)."""
    lo, hi = FS.LIFT.rounds(INT, g)
    for t in range(lo, hi + 1):
        raw_st = FS.LIFT.round_start(INT, start, t, rnd)
        if type(raw_st) is not int:
            raise OptccError("servers", f"round {t}'s start {raw_st} is off the grid 1/{M}")
        st = at(raw_st)
        perm = rounds.get((s, t, op))
        if perm is None:
            perm = rounds[(s, t, op)] = nvlink_round(s, g, t, op)
        for src, dst, inst in perm:
            app(Flow(src, dst, FS.LIFT.piece(INT, P, inst, pi), op, st, "nvlink"))


def _one_server(cluster: Cluster, meta: dict[str, Any]) -> Schedule:
    """q = 1: NVLink reduce-scatter then all-gather of g pieces: the placement of one piece
    touched at time 0 (no instance, no lead in meta)."""
    return lift_instance(cluster, _plan(cluster, 1), meta, lead=False)
