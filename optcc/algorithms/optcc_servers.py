"""OptCC for g GPUs per server and one straggler server: NVLink reduce-scatter, g inter-server
single-straggler OptCC instances (q = 2: k segments swapped in turn), NVLink all-gather,
pipelined so NVLink work hides under NIC work.

Paper (PAPER.md "Several GPUs per server", Figures 13-19, Theorem 3): g GPUs per server, a
failure slows all g GPUs of one server by ℓ; NVLink inside servers, NICs between them;
intra-server reduction and broadcast; OptCC's four stages between servers; NVLink and NIC work
interleaved so the NICs keep working.

Ours (derived; the argument is in docs/optcc_servers.md "Construction and slot time"):
- Local index l of every server forms instance l (optcc.algorithms.server_lift): the q GPUs
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

from typing import Any, cast
from collections.abc import Callable
import math
from fractions import Fraction

from optcc.algorithms.stated import states_slot_time
from optcc.algorithms import check_segments
from optcc.algorithms.optcc_single import _shard_size, optcc_allreduce, optcc_slot_time
from optcc.algorithms.server_lift import instance_cluster as _instance_cluster
from optcc.algorithms.server_lift import lifted_flow, nvlink_round, straggler_server
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


def lift_instance(cluster: Cluster, plan: dict[str, Any], meta: dict[str, Any]) -> Schedule:
    """The g lifted copies of plan's q-node instance on the NICs and the NVLink RS/AG batches
    (the module docstring's lift; `plan` from `_plan`). Also lifts other q-node instances
    (lp_models.to_schedule.lp_server_schedule): meta says the schedule's capacity model."""
    g = cluster.g
    inst, grid, P, M = plan["inst"], plan["grid"], plan["P"], plan["M"]
    D, to_global, rnd_i = plan["D"], plan["to_global"], plan["rnd_i"]
    fractions: dict[int, Fraction] = {}

    def at(v: int) -> Fraction:               # one Fraction object per distinct time
        x = fractions.get(v)
        if x is None:
            x = fractions[v] = Fraction(v, M)
        return x

    flows: list[Flow] = []
    app = flows.append
    for f, st in zip(inst.flows, grid.starts):   # g copies of the instance on the NICs
        start = at(D + st * to_global)
        for l in range(g):
            app(lifted_flow(f, l, g, P, start))
    rounds: dict[tuple[int, int, str], list[tuple[int, int, int]]] = {}
    for s, st, pi, op in plan["batches"]:
        _batch(app, s, g, P, pi, st, rnd_i[pi], op, at, rounds)
    D = Fraction(D, M)
    pieces = [sz for l in range(g) for sz in plan["sizes"]]
    meta["lead"] = str(D)
    return Schedule(cluster, pieces, flows, meta=meta)


def _plan(cluster: Cluster, k: int, inst: Schedule | None = None) -> dict[str, Any]:
    """Everything of optcc_server_allreduce (q ≥ 2) but the flows: the instance (`inst`, a
    q-node g = 1 schedule, where given; else OptCC's) and its grid,
    the grid M of global times (value = int / M), the lead D and the instance-to-global factor
    (instance time st on its grid runs at (D + st·to_global)/M), the round length of every piece,
    and the NVLink batches (server, start on M, instance piece, "add" | "copy") in the order
    the schedule lists them (optcc.algorithms.arrays_servers emits the same flows as arrays)."""
    g, q = cluster.g, cluster.servers
    s_nv = cluster.nvlink_speedup
    if inst is None:
        inst_cluster, _ = _instance_cluster(cluster)
        inst = _two_server_instance(inst_cluster, k) if q == 2 else optcc_allreduce(inst_cluster, k)
    P = len(inst.pieces)
    gf = Fraction(g)
    sizes = [x / gf for x in inst.pieces]
    batch = [Fraction(g - 1) * sz / s_nv for sz in sizes]   # length of one RS/AG batch of piece π
    rnd = [sz / s_nv for sz in sizes]                      # one round of it
    # Every time below is exact on one integer grid (value = int / M): the instance's grid S
    # (optcc.timing.IntegerTimes) divided by g, and the batch and round lengths.
    grid = IntegerTimes(inst)
    M = grid.scale * g
    for x in set(batch) | set(rnd):
        M = math.lcm(M, x.denominator)
    to_global = M // (grid.scale * g)                     # instance time t: t/g = int · to_global / M
    batch_i = [x.numerator * (M // x.denominator) for x in batch]
    rnd_i = [x.numerator * (M // x.denominator) for x in rnd]
    # First touch and last write of every (server, instance piece), in instance time.
    ft: list[dict[int, int]] = [dict() for _ in range(q)]
    lw: list[dict[int, int]] = [dict() for _ in range(q)]
    for f, st, end in zip(inst.flows, grid.starts, grid.ends):
        for node in (f.src, f.dst):
            cur = ft[node].get(f.piece)
            if cur is None or st < cur:
                ft[node][f.piece] = st
        cur = lw[f.dst].get(f.piece)
        if cur is None or end > cur:
            lw[f.dst][f.piece] = end
    # RS batches: back to back from time 0 in deadline order; the instance starts at the
    # smallest D that lets every batch end by its first touch D + ft/g.
    rs_abs: list[list[tuple[int, int]]] = []
    D = 0
    for s in range(q):
        t = 0
        seq = []
        for pi in sorted(ft[s], key=lambda pi: ft[s][pi]):
            seq.append((t, pi))
            t += batch_i[pi]
            need = t - ft[s][pi] * to_global
            if need > D:
                D = need
        rs_abs.append(seq)
    batches = []
    for s in range(q):
        t_free = 0
        for st, pi in rs_abs[s]:
            batches.append((s, st, pi, "add"))
            t_free = st + batch_i[pi]
        # AG batches: in release order, each as soon as it is released and NVLink is free.
        for rel, pi in sorted((D + lw[s][pi] * to_global, pi) for pi in lw[s]):
            t = max(rel, t_free)
            batches.append((s, t, pi, "copy"))
            t_free = t + batch_i[pi]
    return {"inst": inst, "grid": grid, "P": P, "M": M, "D": D, "to_global": to_global, "rnd_i": rnd_i,
            "sizes": sizes, "batches": batches}


def _two_server_instance(inst_cluster: Cluster, k: int) -> Schedule:
    """q = 2: the two servers swap k segments of 1/k one after another ("add" both ways at
    i·ℓ/k), so NVLink can reduce-scatter segment i+1 and all-gather segment i−1 while the NICs
    carry segment i (derived; optcc_single's one-piece exchange would leave nothing to overlap)."""
    ell = max(inst_cluster.slowdown)
    seg = Fraction(1, k)
    flows = []
    for i in range(k):
        t = i * ell * seg
        flows += [Flow(0, 1, i, "add", t), Flow(1, 0, i, "add", t)]
    return Schedule(inst_cluster, [seg] * k, flows)


def _batch(app: Callable[[Flow], None], s: int, g: int, P: int, pi: int, start: Fraction | int, rnd: Fraction | int,
           op: str, at: Callable[[int], Fraction] | None = None,
           rounds: dict[tuple[int, int, str], list[tuple[int, int, int]]] | None = None) -> None:
    """g−1 permutation rounds on server s for piece π of every instance (server_lift.nvlink_round).
    `at`: start and round length are integers on a grid and `at` makes each start a Fraction;
    `rounds`: a dict caching nvlink_round's permutations across batches."""
    for t in range(1, g):
        at_grid = start + (t - 1) * rnd
        st = at(cast(int, at_grid)) if at is not None else cast(Fraction, at_grid)   # ints on a grid with `at`
        perm: list[tuple[int, int, int]] | None
        if rounds is None:
            perm = nvlink_round(s, g, t, op)
        else:
            perm = rounds.get((s, t, op))
            if perm is None:
                perm = rounds[(s, t, op)] = nvlink_round(s, g, t, op)
        for src, dst, inst in perm:
            app(Flow(src, dst, inst * P + pi, op, st, "nvlink"))


def _one_server(cluster: Cluster, meta: dict[str, Any]) -> Schedule:
    g = cluster.g
    piece = Fraction(1, g)
    rnd = piece / cluster.nvlink_speedup
    flows: list[Flow] = []
    _batch(flows.append, 0, g, 1, 0, Fraction(0), rnd, "add")
    _batch(flows.append, 0, g, 1, 0, (g - 1) * rnd, rnd, "copy")
    return Schedule(cluster, [piece] * g, flows, meta=meta)
