"""OptCC for g GPUs per server and any set of slow GPUs: several straggler servers, servers whose
GPUs have different ℓ (a partial failure, lost NICs without PXN), any mix.

Construction (derived; docs/failures.md "Construction"):
- Rails. Local index l of every server forms rail l: the q = p/g GPUs {s·g + l}. Rail l runs
  the g = 1 OptCC of its own q-node cluster (slowdowns ℓ_{s·g+l}, s = 0..q−1): optcc_single
  for ≤ 1 slow node, optcc_multi for several, the segmented swap of optcc_servers for q = 2,
  optcc.algorithms.all_slow.build's time scaling when every node of the rail is slow; a rail of
  q ≤ RING_MAX_Q nodes with ≥ 2 slow ones takes NCCL's ring instead where its
  max ℓ·2(q−1)/q is smaller, and any rail of q ≤ RING_MAX_Q nodes the direct AllReduce with LP
  shard sizes (optcc.algorithms.direct.build) where that is strictly faster still (derived). Since
  direct's first chunk touches every shard at once (a longer NVLink lead), the whole plan is
  computed with and without direct rails and the faster kept (`_best_plan`; ties: without).
  Rails use disjoint NIC ports.
- Shares. Rail l carries the fraction w_l = (1/T_l)/Σ_m(1/T_m) of the data, T_l its slot time
  on the whole data, so every rail's NIC part ends at T_NIC = 1/Σ_l(1/T_l). This is how the
  server balances its NIC traffic over its NICs: the NVLink reduce-scatter hands each GPU the
  server's partial sums of its rail's share, so a NIC at ℓ carries data in proportion to what
  its rail can move. For one slow server with every ℓ ≤ 2 the exclusive single-straggler
  optimum 1/T_ex(q, ℓ) = (q−2)/(2(q−1)) + 1/(ℓ(q−1)) is affine in 1/ℓ
  (bounds.closed_form.exclusive_single_straggler_optimum), so Σ_l 1/T_ex(q, ℓ_l) =
  g/T_ex(q, ℓ_eff) with ℓ_eff = g/Σ_l(1/ℓ_l): the rails reach the pooled server (all g NICs
  at the harmonic mean ℓ_eff, what lp_models.fluid solves) up to the rails' O(1/k) fill. A GPU
  at ℓ > 2 is cut-bound in its rail (T_l = ℓ), which pooling would avoid: then the rails stay
  above the pooled LP (docs/failures.md gives the numbers).
- NVLink. Per server, each (rail l, piece π) needs a reduce-scatter (the g−1 other GPUs "add"
  their value into GPU l) before the rail first touches π there, and an all-gather (GPU l
  "copy" to the g−1 others) after its last write. Flows are list-scheduled on NVLink ports
  (one flow per port direction): reduce-scatters from time 0 in first-touch order, the NICs
  start at the smallest lead D that meets every first touch, all-gathers in release order.
  While a server has both kinds active every NVLink flow runs at rate 1/(2(g−1)): each GPU's
  reduce-scatter stream (g−1 flows in) and all-gather stream (g−1 flows out) then never
  overload a port whatever their timing, at the price of each stream running at half a port;
  before the first all-gather and after the last reduce-scatter the flows run at 1/(g−1). A fast GPU's rail carries more, so its
  streams need 2(g−1)·w_l/s_nv each (2(g−1)/(g·s_nv) at equal shares, the LP's NVLink row):
  `nvlink_limited` reports when that exceeds the NIC part, i.e. NVLink, not the NICs, limits
  the pooling. With unequal shares a second rule is also planned (`_rates`, derived): rates
  ∝ w_l, r_l = w_l/(1 + (g−2)·w_max) with both kinds, w_l/max((g−1)·w_max, 1 − w_min) with one,
  so every stream takes the LP's pooling row (1 + (g−2)·w_max)/s_nv; its lead is bisected
  (optcc.algorithms.rails.layout's `_smallest_lead`) counting the one-kind rate of early reduce-scatters. The faster plan is
  kept (ties: the equal rule, so equal-share schedules are unchanged).
- Borrowing. Where a GPU at ℓ > 2 has a faster GPU on its server, the borrowing sub-rails of
  optcc.algorithms.rails.borrow (rail l's traffic at that server also on the other NICs) are
  built instead when strictly faster (`_borrow_time`; ties: the rails).
Slot time: computed exactly from the rail schedules and the NVLink plan without building the
g·q-GPU schedule (`slot_time`); `build` returns the schedule, whose timing equals it (tested).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, cast
import math
from fractions import Fraction

from optcc.algorithms.limits import check_segments
from optcc.algorithms.stated import states_slot_time
from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.schedule import Flow, LocalOp, Schedule
from optcc.timing import IntegerTimes

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from typing_extensions import TypeIs

    from optcc.algorithms.rails.layout import ArrayRail, Ints

    Rail = Schedule | ArrayRail                      # a rail's g = 1 schedule, built or held as arrays
    Dicts = list[dict[int, int]]                     # per node: piece -> time on the rail's grid
    # a rail's (first touch, last write, scale): per-node dicts (_touches) or q × P matrices (ArrayRail)
    RailTouches = tuple[Dicts, Dicts, int] | tuple[Ints, Ints, int]
    RailEntry = tuple[Rail, IntegerTimes | None, Fraction]     # (schedule, its grid where built, slot time)
    Rails = tuple[list[RailEntry], list[RailTouches]]         # _rails: per rail l
    RailBase = tuple[Rail, Fraction | None, IntegerTimes | None]   # _rail_base

NAME = "optcc_rails"
RING_MAX_Q = 8          # rails this small also try the ring (rail_schedule)
LEAD_STEPS = 16         # halvings of the NVLink lead's bisection (derived: the plan's grid holds 2^LEAD_STEPS)
BORROW_MAX_COLUMNS = 128  # borrowing sub-rails tried up to q·(number of sub-rails) LP columns (cost rule: ~9 s at 112, p = 64, g = 4)


def accepts(cluster: Cluster) -> tuple[bool, str]:
    """Every cluster with g > 1 (any slow set, any ℓ)."""
    if cluster.g < 2:
        return False, "optcc_rails is for g > 1 GPUs per server"
    return True, "g > 1: one OptCC rail per local GPU index, shares balanced over the server's NICs"


def rail_cluster(cluster: Cluster, l: int) -> Cluster:
    """The q-node, g = 1 cluster of rail l (the slowdowns of GPUs s·g + l), with the cluster's
    bandwidth and latencies: under pipelined latency (Li + L > 0) a several-straggler rail takes
    optcc_multi's latency-robust pattern (hop spread 3), as a g = 1 cluster does."""
    g = cluster.g
    slow = {s: cluster.slowdown[s * g + l] for s in range(cluster.servers) if cluster.slowdown[s * g + l] != 1}
    return Cluster.build(cluster.servers, 1, slow or None, bandwidth=cluster.bandwidth, overhead=cluster.overhead,
                         issue_delay=cluster.issue_delay, latency=cluster.latency)


def rail_schedule(inst: Cluster, k: int, direct: bool = True, base: RailBase | None = None) -> Rail:
    """The g = 1 schedule rail `inst` runs (module docstring); `direct=False` leaves the direct
    AllReduce out (`_best_plan` compares the whole cluster with and without it). `base`: this
    rail's `_rail_base(inst, k)` when already computed (then only direct is tried)."""
    from optcc.algorithms.direct import build as direct_ar
    sched, best, _ = _rail_base(inst, k) if base is None else base
    # the direct AllReduce with LP shard sizes (direct.py, derived) reaches the q-node
    # exclusive LP up to a factor 1 + 1/k on the rails above ([1, 2, 2, 1]: 8/3·(1 + 1/k)),
    # on healthy rails (2(q−1)/q exactly) and on one straggler at ℓ ≤ 3/2; strictly faster only
    if direct and best is not None and direct_ar.slot_time(inst, k) < best:
        sched = direct_ar.build(inst, k)
    return sched


def _rail_base(inst: Cluster, k: int) -> RailBase:
    """(the rail's schedule without the direct AllReduce, its slot time where direct may still
    replace it: q ≤ RING_MAX_Q, q ≠ 2, else None; its IntegerTimes where computed, else None)."""
    q = inst.p
    if q == 2:
        from optcc.algorithms.servers.families import two_server_flows
        pieces, flows = two_server_flows(k, max(inst.slowdown))
        return Schedule(inst, pieces, flows), None, None
    from optcc.algorithms import flat                # no healthy node: time-scaled (all_slow)
    from optcc.algorithms.record import build_record
    if q > RING_MAX_Q:                               # held as arrays where the construction has them
        from optcc.algorithms.rails.layout import array_rail
        return array_rail(inst, k) or build_record(flat.choose(inst), inst, k), None, None
    sched = build_record(flat.choose(inst), inst, k)
    grid: IntegerTimes | None                        # (None where the ring replaces it)
    grid = IntegerTimes(sched)
    best = Fraction(max(grid.ends), grid.scale)      # the latest flow end, exact on the grid
    if len(inst.stragglers) >= 2:
        from optcc.algorithms.ring.record import RECORD as RING
        # tiny rails: NCCL's ring takes exactly max ℓ·2(q−1)/q (ring.py, paper), which beats
        # the several-straggler construction's fill on some 4-node rails (e.g. [1, 2, 2, 1]:
        # 3 vs 3.047 at k = 64); keep the faster, ties to OptCC (derived, docs/failures.md)
        ring = max(inst.slowdown) * Fraction(2 * (q - 1), q)
        if ring < best:
            sched, best, grid = build_record(RING, inst, k), ring, None
    return sched, best, grid


class _Plan:
    """Rails, shares, lead D and NVLink flows of one cluster (everything but the NIC copies);
    `materialize=False` computes the times only (slot_time), "records" lists the NVLink streams
    instead of their flows. The streams are laid out by optcc.algorithms.rails.layout."""

    def __init__(self, cluster: Cluster, k: int, materialize: bool | Literal["records"] = True, rates: str = "equal",
                 rails: Rails | None = None) -> None:
        g = cluster.g
        self.cluster, self.k, self.rates = cluster, k, rates
        self.rails, touches = rails or _rails(cluster, k)
        inv = [1 / t for _, _, t in self.rails]
        self.shares = [x / sum(inv) for x in inv]                    # w_l
        self.nic_time = cast(Fraction, 1 / sum(inv))                 # T_NIC = w_l·T_l for every l
        # (cast: sum() of Fractions is typed Fraction | Literal[0], and int / int is typed float)
        self.offsets: list[int] = []
        off = 0
        for sched, _, _ in self.rails:
            self.offsets.append(off)
            off += len(sched.pieces)
        s_nv = cluster.nvlink_speedup
        half, full = _rates(self.shares, g, rates)       # per rail: both kinds / one kind active
        # Rails with the same schedule, touches, share and rates (the same `_rails` entry) are
        # laid out identically: each rail's NVLink streams (free[l] below) advance only by its
        # own pieces, in its own (first touch, piece) order, and every quantity read across
        # rails (the lead D, the first all-gather, the last reduce-scatter, the end) is a max or
        # min over rails. So the plan lays out one representative per class of equal rails; the
        # flows (materialize) repeat it for every rail of the class.
        classes: dict[tuple[int, int, Fraction, Fraction, Fraction], int] = {}
        rep = [classes.setdefault((id(self.rails[l]), id(touches[l]), self.shares[l], half[l], full[l]), l)
               for l in range(g)]
        reps = sorted(set(rep))
        self.rep, self.half_rates, self.full_rates = rep, half, full
        # per rail, None where not a representative: piece -> size class, and the durations (Fractions
        # per size class, then integers on the grid per size class, then per piece)
        size_cls: list[Any]
        durf: list[Any]
        durh: list[Any]
        # a task's duration at rail l's rate r (g−1 flows of w_l·|π| at once): w_l·|π|/(s_nv·r),
        # computed once per distinct piece size
        size_cls, durf, durh = [None] * g, [None] * g, [None] * g
        for l in reps:
            w, pieces = self.shares[l], self.rails[l][0].pieces
            index: dict[Fraction, int] = {}
            size_cls[l] = [index.setdefault(x, len(index)) for x in pieces]
            durf[l] = [w * x / (s_nv * full[l]) for x in index]
            durh[l] = [w * x / (s_nv * half[l]) for x in index]
        # Every time below is exact on one integer grid (value = int / M): sums, differences and
        # comparisons of integers instead of Fractions. M holds 2^LEAD_STEPS so that the lead's
        # bisection (rails.layout._smallest_lead) halves exactly on the grid.
        M = self.nic_time.denominator
        for l in reps:
            for d in durf[l] + durh[l]:
                M = math.lcm(M, d.denominator)
        for l in reps:
            M = math.lcm(M, touches[l][2] * self.shares[l].denominator)
        M <<= LEAD_STEPS
        self.grid = M
        grid_int: Callable[[Fraction], int] = lambda x: x.numerator * (M // x.denominator)    # noqa: E731
        for l in reps:
            durf[l] = [grid_int(d) for d in durf[l]]
            durh[l] = [grid_int(d) for d in durh[l]]
        # a touch on rail l's own grid (time v/scale, scaled by its share w_l) on M: v·mult
        mults = {l: self.shares[l].numerator * (M // (touches[l][2] * self.shares[l].denominator)) for l in reps}
        nic = grid_int(self.nic_time)
        self.nvlink: list[Flow] = []
        self.records: tuple[Any, ...] | None = None      # materialize="records"; rails.arrays drops them
        # NVLink-limited: the busiest GPU's stream (its rail's share w_l takes w_l/(s_nv·rate) =
        # 2(g−1)·w_l/s_nv per stream kind) needs longer than the NIC part, so NVLink, not the
        # NICs, sets the time.
        self.nvlink_work = max(w / (s_nv * h) for w, h in zip(self.shares, half))
        self.nvlink_limited = self.nvlink_work > self.nic_time
        # the passes on numpy arrays (rails.layout); imported here so that `optcc schedule` of
        # other algorithms loads no numpy
        import numpy as np

        from optcc.algorithms.rails import layout as rails_layout
        def ints(xs: list[int]) -> Ints:
            return np.asarray(xs, dtype=rails_layout.int_dtype(xs))
        mats = [_touch_matrices(touches[l], len(size_cls[l])) for l in reps]
        cls = [np.asarray(size_cls[l], dtype=np.int64) for l in reps]
        df = [ints(durf[l])[c] for l, c in zip(reps, cls)]
        dh = [ints(durh[l])[c] for l, c in zip(reps, cls)]
        D, end, laid = rails_layout.layout(mats, [mults[l] for l in reps], df, dh, nic, rates != "equal",
                                           LEAD_STEPS, starts=materialize is not False)
        self.lead, self.end = Fraction(D, M), Fraction(end, M)
        if materialize is False:
            return
        laid_as = {l: i for i, l in enumerate(reps)}       # a representative rail -> its entry in `laid`
        if materialize == "records":
            # columns server, rail, piece, start on M, half rate (1) or full (0), "add" (1) or
            # "copy" (0), each the g − 1 flows of one task, for the representative rails only
            # (every rail of its class has the same records; optcc.algorithms.rails.arrays)
            self.records = rails_layout.records(D, laid, [(l, laid_as[l]) for l in reps])
            return
        # every rail, each laid out as its class's representative: g − 1 flows per task,
        # reduce-scatter "add" into GPU l, all-gather "copy" from it
        at: dict[int, Fraction] = {}
        for s, l, pi, st, both, add in zip(*(c.tolist() for c in rails_layout.records(D, laid, [(l, laid_as[m]) for l, m in enumerate(rep)]))):
            t = at.get(st)
            if t is None:
                t = at[st] = Fraction(st, M)
            rate = half[l] if both else full[l]
            if add:
                self.nvlink += [Flow(s * g + j, s * g + l, self.offsets[l] + pi, "add", t, "nvlink", rate)
                                for j in range(g) if j != l]
            else:
                self.nvlink += [Flow(s * g + l, s * g + j, self.offsets[l] + pi, "copy", t, "nvlink", rate)
                                for j in range(g) if j != l]


def _rails(cluster: Cluster, k: int, direct: bool = True,
           bases: dict[tuple[Fraction, ...], list[Any]] | None = None) -> Rails:
    """Per rail l: (its g = 1 schedule, its IntegerTimes, slot time) and its per-node touches.
    `bases`: a dict shared by the calls of one (cluster, k) (`_best_plan` computes the rails
    without and with direct): each rail's schedule without direct, with its ends and touches,
    is computed once and reused where direct does not replace it (the same values)."""
    bases = {} if bases is None else bases
    cache: dict[tuple[Fraction, ...], tuple[RailEntry, RailTouches]] = {}
    rails: list[RailEntry] = []
    touches: list[RailTouches] = []
    # bases[slowdown]: [its _rail_base, its cache entry where direct does not replace it (else None)]
    for l in range(cluster.g):
        inst = rail_cluster(cluster, l)
        if inst.slowdown not in cache:
            if inst.slowdown not in bases:
                bases[inst.slowdown] = [_rail_base(inst, k), None]
            base = bases[inst.slowdown]
            sched = rail_schedule(inst, k, direct, base[0])
            if sched is base[0][0] and base[1] is not None:
                cache[inst.slowdown] = base[1]
            elif _is_array_rail(sched):
                slot, rail_touches = sched.slot_and_touches(cluster.servers)
                cache[inst.slowdown] = (sched, None, slot), rail_touches
                base[1] = cache[inst.slowdown]
            else:
                grid = base[0][2] if sched is base[0][0] and base[0][2] is not None else IntegerTimes(sched)
                cache[inst.slowdown] = ((sched, grid, Fraction(max(grid.ends), grid.scale)),
                                        _touches(sched, grid))
                if sched is base[0][0]:
                    base[1] = cache[inst.slowdown]
        rails.append(cache[inst.slowdown][0])
        touches.append(cache[inst.slowdown][1])
    return rails, touches


def _rates(shares: Sequence[Fraction], g: int, rates: str) -> tuple[list[Fraction], list[Fraction]]:
    """Per-rail NVLink flow rates (half: while a server may have both kinds active; full: one
    kind only). A port of GPU l carries at once at most its own stream's g − 1 flows and one flow
    of each other GPU's stream of the other kind: with per-rail rate r_l for both kinds that is
    (g−1)·r_l + Σ_{m≠l} r_m = R + (g−2)·r_l ≤ 1 (R = Σ r_m), and with one kind only
    max((g−1)·r_l, R − r_l) ≤ 1 (derived, docs/failures.md "NVLink rates").
    "equal": r_l = 1/(2(g−1)) and 1/(g−1), the same for every rail (R + (g−2)r = 1, (g−1)r = 1).
    "proportional": r_l ∝ w_l, r_l = w_l/(1 + (g−2)·w_max) and w_l/max((g−1)·w_max, 1 − w_min),
    so every stream takes the same (1 + (g−2)·w_max)/s_nv, the LP's pooling row
    (bounds.closed_form.pooling_nvlink_time), instead of 2(g−1)·w_max/s_nv; equal shares give
    the "equal" rates exactly."""
    if rates == "equal":
        return [Fraction(1, 2 * (g - 1))] * g, [Fraction(1, g - 1)] * g
    wmax, wmin = max(shares), min(shares)
    ch, cf = 1 / (1 + (g - 2) * wmax), 1 / max((g - 1) * wmax, 1 - wmin)
    return [ch * w for w in shares], [cf * w for w in shares]


def _is_array_rail(sched: Rail) -> TypeIs[ArrayRail]:
    """A rails_layout.ArrayRail: a rail is that or a built Schedule (no numpy import to tell)."""
    return not isinstance(sched, Schedule)


def rail_algorithm(sched: Rail) -> str | None:
    """The algorithm a rail runs (its meta's), without building an ArrayRail's schedule."""
    return sched.algorithm if _is_array_rail(sched) else cast("str | None", sched.meta.get("algorithm"))


def _uses_direct(rails: Rails) -> bool:
    return any(rail_algorithm(sched) == "direct" for sched, _, _ in rails[0])


def _best_plan(cluster: Cluster, k: int, materialize: bool | Literal["records"]) -> _Plan:
    """The plan with the smallest slot time over the rails without and with the direct
    AllReduce (direct front-loads every shard of its first chunk, so its NVLink lead can cost
    more than its rails save) and the two NVLink rate rules; ties keep the earlier (no direct,
    "equal"), so schedules where direct does not win are unchanged. With equal shares the two
    rate rules are the same rule, so only "equal" is computed."""
    best: _Plan | None
    bases: dict[tuple[Fraction, ...], list[Any]]
    best, bases = None, {}
    for use_direct in (False, True):
        rails = _rails(cluster, k, use_direct, bases)
        if use_direct and not _uses_direct(rails):
            break                                   # no rail takes direct: the same plan again
        plan = _Plan(cluster, k, materialize=False, rails=rails)
        # the second rate plan is a second NVLink pass: above p = 64 only tried when the equal
        # plan's lead + tail exceed 2% of the NIC part (where it can matter; a cost rule, not a bound)
        worth = cluster.p <= 64 or 50 * (plan.end - plan.nic_time) > plan.nic_time
        if len(set(plan.shares)) > 1 and worth:
            other = _Plan(cluster, k, materialize=False, rates="proportional", rails=rails)
            if other.end < plan.end:
                plan = other
        if best is None or plan.end < best.end:
            best, best_rails = plan, rails
    assert best is not None                         # the first pass (no direct) always sets it
    if materialize:
        best = _Plan(cluster, k, materialize=materialize, rates=best.rates, rails=best_rails)
    return best


def _borrow_time(cluster: Cluster, k: int) -> Fraction | None:
    """Slot time of the borrowing sub-rails (optcc.algorithms.rails.borrow) where a GPU at ℓ > 2
    has a faster GPU on its server (its rail is cut-bound there; at ℓ ≤ 2 the rails already reach
    the pooled LP, docs/failures.md) and the share LP has ≤ BORROW_MAX_COLUMNS columns; else None."""
    from optcc.algorithms.rails import borrow as rails_borrow
    g, ell = cluster.g, cluster.slowdown
    if not any(ell[i] > 2 and min(ell[i // g * g:(i // g + 1) * g]) < ell[i] for i in range(cluster.p)):
        return None
    if cluster.servers * len(rails_borrow.subrails(cluster)) > BORROW_MAX_COLUMNS:
        return None
    return rails_borrow.slot_time(cluster, k)


def slot_time(cluster: Cluster, k: int) -> Fraction:
    """Exact slot time (n/B) of `build(cluster, k)`, without building its g·q-GPU schedule.
    The borrowing sub-rails replace the rails where strictly faster (ties: the rails)."""
    k = check_segments(k)
    _check(cluster)
    if cluster.servers == 1:
        return Fraction(2 * (cluster.g - 1), cluster.g) / cluster.nvlink_speedup
    end = _best_plan(cluster, k, materialize=False).end
    borrow = _borrow_time(cluster, k)
    return borrow if borrow is not None and borrow < end else end


def _touches(sched: Schedule, grid: IntegerTimes) -> tuple[Dicts, Dicts, int]:
    """(first touch, last write, scale) of a rail (server_lift.touch_times), in the rail's own time
    as integers on the schedule's grid (time = value / scale)."""
    from optcc.algorithms.servers.lift import touch_times
    ft, lw = touch_times(sched, grid)
    return ft, lw, grid.scale


def _touch_matrices(touches: RailTouches, P: int) -> tuple[Ints, Ints]:
    """A rail's touches as q × P matrices (rails_layout.touch_matrices), from either form."""
    if not isinstance(touches[0], list):             # tested on the tuple: mypy narrows both forms with it
        return touches[0], touches[1]
    from optcc.algorithms.rails.layout import dict_matrices
    return dict_matrices(touches[0], touches[1], P)


def nvlink_limited(cluster: Cluster, k: int) -> bool:
    """True when NVLink work (a share above 1/g loads a fast GPU's NVLink more) ends after the
    NICs: pooling over NVLink, not the NICs, then sets the time."""
    _check(cluster)
    if cluster.servers == 1:
        return True
    k = check_segments(k)
    plan = _best_plan(cluster, k, materialize=False)
    borrow = _borrow_time(cluster, k)
    if borrow is not None and borrow < plan.end:
        from optcc.algorithms.rails import borrow as rails_borrow
        return rails_borrow._Plan(cluster, k, materialize=False).nvlink_limited
    return plan.nvlink_limited


@states_slot_time("slot_time")
def build(cluster: Cluster, k: int) -> Schedule:
    """The schedule of the module docstring (exclusive port model, explicit starts)."""
    k = check_segments(k)
    _check(cluster)
    g = cluster.g
    meta = {"algorithm": "optcc", "segments": k, "capacity": "exclusive", "g": g,
            "construction": "NVLink RS + one g = 1 OptCC rail per local GPU index, data shares "
                            "balanced over the server's NICs + NVLink AG, see optcc_rails (derived)"}
    if cluster.servers == 1:
        from optcc.algorithms.servers.build import _one_server
        return _one_server(cluster, meta)
    borrow = _borrow_time(cluster, k)
    if borrow is not None and borrow < _best_plan(cluster, k, materialize=False).end:
        from optcc.algorithms.rails import borrow as rails_borrow
        return rails_borrow.build(cluster, k)
    plan = _best_plan(cluster, k, materialize=True)
    pieces: list[Fraction] = []
    flows: list[Flow] = []
    local_ops: list[LocalOp] = []
    D = plan.lead
    for l, (sched, _, _) in enumerate(plan.rails):
        w, off = plan.shares[l], plan.offsets[l]
        pieces += [w * x for x in sched.pieces]
        for f in sched.flows:
            flows.append(Flow(f.src * g + l, f.dst * g + l, off + f.piece, f.op, D + f.start * w,
                              f.link, f.rate, f.coef))
        for op in sched.local_ops:
            local_ops.append(LocalOp(op.rank * g + l, off + op.piece, D + op.time * w, op.coef))
    flows += plan.nvlink
    meta["shares"] = [str(w) for w in plan.shares]
    meta["lead"] = str(D)
    if plan.rates != "equal":
        meta["nvlink_rates"] = plan.rates
    meta["nvlink_limited"] = plan.nvlink_limited
    return Schedule(cluster, pieces, flows, local_ops, meta=meta)


def _check(cluster: Cluster) -> None:
    ok, why = accepts(cluster)
    if not ok:
        raise OptccError("g", why)
