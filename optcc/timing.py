"""Timing of a Schedule on its Cluster: the slot model and the as-soon-as-possible event model.

Both are exact (Fractions) and in units of n/B (see optcc.cluster).

Slot model: every flow runs at its stated start for its duration,
  NIC:    size · max(ℓ_src, ℓ_dst) / rate        (the slower end sets the speed: paper's model)
  NVLink: size · (B / B_nvlink) / rate
and capacity is checked per port (rank, link, send|recv) under one of two models:
  exclusive (default, the paper's rule): the rates of the flows on a port sum to ≤ 1 at every
    instant — with rate 1, one flow per NIC direction, even when the other end is a straggler;
  shared: the bandwidth the flows take from a port, rate · (slower end's bandwidth) / (port's
    bandwidth), sums to ≤ 1 (what the lower bounds assume).
A schedule states its model in meta["capacity"]; the default is "exclusive".

Event model: each flow starts as soon as the flows it depends on (the writes to the value it
reads that landed by its slot start) have landed, plus the issue delay Li, and its ports are free
(the flows before it on its ports, in slot order, have ended); it holds both ports for the
overhead o plus its duration and lands the latency L later (o, Li, L from the Cluster, in units
of n/B at message size n; optcc.latency). With o = Li = L = 0 it is never slower than the slot
model; with Li = L = 0 it is the old α-per-flow model (o = α), but for one rule (derived):
NVLink batches. Flows on NVLink that start together between the same two GPUs and end together
(the flat ring's g − 1 channel hops a step, the hierarchical ring's q pieces) are one transfer
the slot model splits into shares (rate r each, Σ r ≤ 1); the event model sends them one after
another in piece order, each for r·(o + duration) at the port's full rate, so the first lands
early and the next hop can start (a work-conserving NVLink: the flat ring then pays one latency
Li + L in all, not one a step; the batch's total port time is at most the old o + duration).

Port disciplines (derived; `discipline`): "exclusive" is the above, each port serving one flow
at a time in slot order (what the project's streaming runner does: it posts a port's messages in
the schedule's order). "step": step-synchronous ranks, the schedule's slot boundaries as each
rank's barriers (as NCCL's step loop ends a step when its sends and receives are done): a flow
also waits until every flow its two ranks sent or received that the schedule ends by its start
(slot end ≤ its slot start, the rule the ports and the data follow) has landed. A flow the
schedule runs beside it (started earlier, ending later: a straggler's hop of ℓ slots) is not
waited for: that would be another schedule, one that serialises what this one overlaps.
"shared": receivers share their NIC max-min among concurrent senders (how SimAI's NIC serves
queue pairs): a flow starts at max(data ready + Li, its send port free in slot order), each
sender sends one flow at a time at most at its own rate, and the flows arriving at a receiver
split its bandwidth max-min (optcc.event_shared, exact, for small schedules).

NVLink streams (derived; `nvlink`): a flow on NVLink below rate 1 outside a batch (the rails'
streams, one GPU to g − 1 others at once) runs at its stated rate for its whole duration
("stated", the default: the schedule as written), or shares its server's NVLink ports max-min
with the streams running at once ("max-min", optcc.event_maxmin: a work-conserving NVLink, as
SimGrid's network model; exclusive discipline only). Neither bounds the other (docs/latency.md).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar
from collections.abc import Mapping, Sequence
import heapq
import math
from collections import defaultdict
from dataclasses import dataclass
from fractions import Fraction
from operator import add, attrgetter

from optcc.errors import OptccError
from optcc.schedule import Flow, Schedule

if TYPE_CHECKING:
    from optcc.cluster import Cluster

CAPACITY_MODELS = ("exclusive", "shared")
# Port disciplines of the event model (module docstring): the one the runners implement first.
DISCIPLINES = ("exclusive", "step", "shared")
# How NVLink flows below rate 1 (not batched) are timed: at their stated rate for their whole
# duration, or shared max-min among the server's flows at once (optcc.event_maxmin).
NVLINK_SHARING = ("stated", "max-min")
_K = TypeVar("_K")


def durations(schedule: Schedule) -> list[Fraction]:
    """Duration of every flow of the schedule (same order as schedule.flows)."""
    c = schedule.cluster
    # Classes of equal values, so the per-flow work is integer dictionary look-ups.
    size_ids: dict[tuple[int, int], int] = {}       # by (numerator, denominator): a Fraction's own hash takes a modular inverse
    piece_class = [size_ids.setdefault((x.numerator, x.denominator), len(size_ids)) for x in schedule.pieces]
    sizes = [Fraction(a, b) for a, b in size_ids]
    slow_ids: dict[Fraction, int] = {}
    rank_class = [slow_ids.setdefault(x, len(slow_ids)) for x in c.slowdown]
    slows = list(slow_ids)
    # the slower end's class of every pair of classes, compared once (not once per flow)
    slower = [[a if slows[a] >= slows[b] else b for b in range(len(slows))] for a in range(len(slows))]
    cache: dict[tuple[int, int, bool, int], Fraction] = {}
    # rates by value (some generators give every flow its own rate object): id -> value class
    rate_of_id: dict[int, int] = {}
    rate_ids: dict[tuple[int, int], int] = {}
    out: list[Fraction] = []
    append = out.append
    for f in schedule.flows:
        rate = rate_of_id.get(id(f.rate))
        if rate is None:
            rate = rate_of_id[id(f.rate)] = rate_ids.setdefault((f.rate.numerator, f.rate.denominator), len(rate_ids))
        key = (piece_class[f.piece], slower[rank_class[f.src]][rank_class[f.dst]], f.link == "nic", rate)
        d = cache.get(key)
        if d is None:   # the formulas live in Cluster (one home for the model)
            size = sizes[key[0]]
            d = c.nic_time(f.src, f.dst, size, f.rate) if f.link == "nic" else c.nvlink_time(size, f.rate)
            cache[key] = d
        append(d)
    return out


def capacity_model(schedule: Schedule) -> str:
    model: str = schedule.meta.get("capacity", "exclusive")
    if model not in CAPACITY_MODELS:
        raise OptccError("meta.capacity", f"expected one of {CAPACITY_MODELS}, got {model!r}")
    return model


def port_usage(schedule: Schedule, flow: Flow, rank: int, model: str) -> Fraction:
    """Fraction of `rank`'s port (on the flow's link) that the flow occupies."""
    if model == "exclusive" or flow.link == "nvlink":
        return flow.rate
    slow = schedule.cluster.slowdown
    # port bandwidth B/ℓ_rank; flow speed rate · B / max(ℓ)
    return flow.rate * slow[rank] / max(slow[flow.src], slow[flow.dst])


@dataclass
class CapacityViolation:
    port: tuple[int, str, str]  # (rank, link, "send" | "recv")
    time: Fraction       # the instant the port is over capacity
    load: Fraction       # total usage at that instant (> 1)
    flows: list[int]     # indices of the flows on the port at that instant

    def describe(self, schedule: Schedule) -> str:
        rank, link, direction = self.port
        listed = "; ".join(_describe_flow(schedule, i) for i in self.flows[:4])
        return (f"{link} {direction} port of rank {rank} carries {_fmt(self.load)} of its capacity at "
                f"t = {_fmt(self.time)} n/B: {listed}")


def _describe_flow(schedule: Schedule, i: int) -> str:
    f = schedule.flows[i]
    return f"flows[{i}] {f.src}->{f.dst} piece {f.piece} {f.op} start {_fmt(f.start)}"


def _fmt(x: Fraction) -> str:
    return str(x) if x.denominator == 1 else f"{x} (≈{float(x):.6g})"


class IntegerTimes:
    """All starts and ends of a schedule on one integer grid (time = value / scale), for speed.
    `starts`: the flows' starts already on a grid, (values, its scale) with flows[i].start =
    values[i] / scale (a generated rank's part is made from such integers): the grid is then a
    multiple of that scale, and no start is converted from its Fraction again."""

    def __init__(self, schedule: Schedule, durs: list[Fraction] | None = None,
                 starts: tuple[Sequence[int], int] | None = None) -> None:
        durs = durs if durs is not None else durations(schedule)
        start_of = attrgetter("start")
        flows = schedule.flows
        # flows share Fraction objects (one per distinct start; durations() one per value class):
        # each object is converted once, the per-flow work is look-ups by id at C speed
        dur_ids = list(map(id, durs))
        distinct = dict(zip(dur_ids, durs))
        dens = {d.denominator for d in distinct.values()} | {op.time.denominator for op in schedule.local_ops}
        if starts is None:
            start_ids = list(map(id, map(start_of, flows)))
            start_objs = dict(zip(start_ids, map(start_of, flows)))
            dens |= {x.denominator for x in start_objs.values()}
        else:
            assert len(starts[0]) == len(flows), "one start per flow"
            dens.add(starts[1])
        scale = 1
        for den in dens:
            scale = scale * den // math.gcd(scale, den)
        self.scale = scale
        if starts is None:
            start_int = {i: x.numerator * (scale // x.denominator) for i, x in start_objs.items()}
            self.starts = list(map(start_int.__getitem__, start_ids))
        else:
            times = scale // starts[1]
            self.starts = list(starts[0]) if times == 1 else [t * times for t in starts[0]]
        dur_int = {i: d.numerator * (scale // d.denominator) for i, d in distinct.items()}
        self.durs = list(map(dur_int.__getitem__, dur_ids))
        self.ends = list(map(add, self.starts, self.durs))
        self.op_times = [op.time.numerator * (scale // op.time.denominator) for op in schedule.local_ops]

    def to_fraction(self, value: int) -> Fraction:
        return Fraction(value, self.scale)


def check_capacity(schedule: Schedule, model: str | None = None, grid: IntegerTimes | None = None) -> CapacityViolation | None:
    """Return the first CapacityViolation (earliest in time), or None if every port is within capacity."""
    model = model or capacity_model(schedule)
    grid = grid or IntegerTimes(schedule)
    flows = schedule.flows
    if not flows:
        return None
    if all(f.rate == 1 for f in flows) and (model == "exclusive" or not schedule.cluster.stragglers):
        return _check_exclusive_unit_rates(schedule, grid)
    by_port: defaultdict[tuple[int, str, str], list[int]] = defaultdict(list)
    for i, f in enumerate(flows):
        by_port[(f.src, f.link, "send")].append(i)
        by_port[(f.dst, f.link, "recv")].append(i)
    first = None
    for port, idx in by_port.items():
        rank = port[0]
        events = []
        for i in idx:
            u = port_usage(schedule, flows[i], rank, model)
            events.append((grid.starts[i], 1, u, i))
            events.append((grid.ends[i], 0, u, i))   # ends sort before starts at equal times
        events.sort(key=lambda e: (e[0], e[1]))
        load = Fraction(0)
        active: dict[int, Fraction] = {}
        for t, kind, u, i in events:
            if kind == 0:
                load -= u
                del active[i]
            else:
                load += u
                active[i] = u
                if load > 1:
                    if first is None or t < first.time * grid.scale:
                        first = CapacityViolation(port, grid.to_fraction(t), load, sorted(active))
                    break
    return first


def _check_exclusive_unit_rates(schedule: Schedule, grid: IntegerTimes) -> CapacityViolation | None:
    """Fast path for one-flow-per-port schedules: sort each port's flows by start, compare neighbours."""
    import numpy as np                 # here, so that importing the timing model stays light
    flows = schedule.flows
    n = len(flows)
    src = np.fromiter((f.src for f in flows), dtype=np.int64, count=n)
    dst = np.fromiter((f.dst for f in flows), dtype=np.int64, count=n)
    nv = np.fromiter((f.link == "nvlink" for f in flows), dtype=np.int64, count=n)
    big = max(grid.ends) >= 2**62
    dtype = object if big else np.int64
    starts = np.array(grid.starts, dtype=dtype)
    ends = np.array(grid.ends, dtype=dtype)
    port = np.concatenate([src * 4 + nv * 2, dst * 4 + nv * 2 + 1])
    st = np.concatenate([starts, starts])
    en = np.concatenate([ends, ends])
    idx = np.concatenate([np.arange(n), np.arange(n)])
    order = np.lexsort((en, st, port))
    port, st, en, idx = port[order], st[order], en[order], idx[order]
    same = port[1:] == port[:-1]
    bad = same & (st[1:] < en[:-1])
    if not bad.any():
        return None
    cand = np.nonzero(bad)[0]
    j = cand[np.argmin(st[1:][cand])]
    key = int(port[j])
    rank, nvlink, recv = key // 4, (key // 2) % 2, key % 2
    return CapacityViolation((rank, "nvlink" if nvlink else "nic", "recv" if recv else "send"),
                             grid.to_fraction(int(st[j + 1])), Fraction(2), sorted([int(idx[j]), int(idx[j + 1])]))


def slot_time(schedule: Schedule, grid: IntegerTimes | None = None) -> Fraction:
    """Makespan of the schedule as stated: the latest flow end or local-op time."""
    grid = grid or IntegerTimes(schedule)
    return grid.to_fraction(max(grid.ends + grid.op_times, default=0))


@dataclass(frozen=True)
class EventGrid:
    """The event model's integers (time = value / scale): o, Li, L and every flow's port time, a
    batched flow's r·(o + duration) − o (module docstring)."""
    scale: int
    alpha: int
    issue: int
    wire: int
    durs: list[int]


def event_grid(schedule: Schedule, grid: IntegerTimes, batched: Mapping[int, int], alpha_units: Fraction,
               issue_units: Fraction, latency_units: Fraction) -> EventGrid:
    """`grid` refined so that o, Li, L and the batched flows' r·(o + duration) are integers on it."""
    flows = schedule.flows
    mult = math.lcm(alpha_units.denominator, issue_units.denominator, latency_units.denominator) \
        * math.lcm(1, *{flows[i].rate.denominator for i in batched})      # r·(o + d) on the grid
    alpha = alpha_units.numerator * (mult // alpha_units.denominator) * grid.scale
    durs = [d * mult for d in grid.durs]
    for i in batched:                                # a batched flow: r·(o + duration) (docstring)
        r = flows[i].rate
        durs[i] = (durs[i] + alpha) // r.denominator * r.numerator - alpha
    return EventGrid(grid.scale * mult, alpha, issue_units.numerator * (mult // issue_units.denominator) * grid.scale,
                     latency_units.numerator * (mult // latency_units.denominator) * grid.scale, durs)


def event_time(schedule: Schedule, alpha_units: Fraction = Fraction(0), grid: IntegerTimes | None = None,
               issue_units: Fraction = Fraction(0), latency_units: Fraction = Fraction(0),
               discipline: str = "exclusive", nvlink: str = "stated") -> Fraction:
    """As-soon-as-possible makespan keeping the slot schedule's dependencies and port order.

    LogGP-style (docs/latency.md): a flow starts at max(data ready + Li, send port free,
    receive port free), holds both ports for o + duration and lands L later. `alpha_units` is
    the overhead o, `issue_units` Li, `latency_units` L, all in units of n/B (seconds·B/n).
    With Li = L = 0 this is the α-per-flow model exactly. `discipline`: one of DISCIPLINES
    (module docstring; "shared" is optcc.event_shared.shared_event_time). `nvlink`: one of
    NVLINK_SHARING (module docstring; "max-min" is optcc.event_maxmin.maxmin_event_time).
    """
    if discipline not in DISCIPLINES:
        raise OptccError("discipline", f"expected one of {DISCIPLINES}, got {discipline!r}")
    if nvlink not in NVLINK_SHARING:
        raise OptccError("nvlink", f"expected one of {NVLINK_SHARING}, got {nvlink!r}")
    if nvlink != "stated" and discipline != "exclusive":
        raise OptccError("nvlink", f"NVLink shared max-min is timed under the exclusive discipline only, "
                                   f"got discipline {discipline!r}")
    if discipline == "shared":
        from optcc.event_shared import shared_event_time
        shared_grid = grid or IntegerTimes(schedule)
        return shared_event_time(schedule, shared_grid, nvlink_batches(schedule, shared_grid), alpha_units,
                                 issue_units, latency_units)
    step = discipline == "step"
    grid = grid or IntegerTimes(schedule)
    flows = schedule.flows
    batched = nvlink_batches(schedule, grid)         # flow -> the flow before it in its batch (or -1)
    eg = event_grid(schedule, grid, batched, alpha_units, issue_units, latency_units)
    if nvlink == "max-min":
        from optcc.event_maxmin import maxmin_event_time
        return maxmin_event_time(schedule, grid, batched, eg)
    scale, alpha, issue, wire, durs = eg.scale, eg.alpha, eg.issue, eg.wire, eg.durs
    starts, slot_end = grid.starts, grid.ends
    # Local ops at their time act after landings and before reads: order key (time, 0 | 1, index).
    # Flows of one start see none of each other but their batch: by piece, its order (docstring).
    order = sorted([(starts[i], 1, f.piece, i) for i, f in enumerate(flows)]
                   + [(t, 0, 0, j) for j, t in enumerate(grid.op_times)])
    pending_writes: defaultdict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)   # (rank, piece) -> heap of (slot_end, event_end)
    landed_write: defaultdict[tuple[int, int], int] = defaultdict(int)
    pending_port: defaultdict[tuple[int, str, int], list[tuple[int, int]]] = defaultdict(list)     # port -> heap of (slot_end, event_end)
    port_free: defaultdict[tuple[int, str, int], int] = defaultdict(int)
    finish = 0
    ends: dict[int, int] = {}
    push, pop = heapq.heappush, heapq.heappop

    def landed(heaps: Mapping[_K, list[tuple[int, int]]], landed_max: dict[_K, int], key: _K, t: int) -> int:
        best = landed_max[key]
        h = heaps.get(key)
        if h and h[0][0] <= t:
            while h and h[0][0] <= t:
                e = pop(h)[1]
                if e > best:
                    best = e
            landed_max[key] = best
        return best

    pending_rank: defaultdict[int, list[tuple[int, int]]] = defaultdict(list)    # step: rank -> heap of (slot_end, landing)
    rank_landed: defaultdict[int, int] = defaultdict(int)
    for t, kind, _, i in order:
        if kind == 0:
            op = schedule.local_ops[i]
            key = (op.rank, op.piece)
            ready = landed(pending_writes, landed_write, key, t)
            push(pending_writes[key], (t, ready))
            finish = max(finish, ready)
            continue
        f = flows[i]
        ready = landed(pending_writes, landed_write, (f.src, f.piece), t) + issue
        sp, rp = (f.src, f.link, 0), (f.dst, f.link, 1)
        a = landed(pending_port, port_free, sp, t)
        b = landed(pending_port, port_free, rp, t)
        if a > ready:
            ready = a
        if b > ready:
            ready = b
        if step:
            ready = max(ready, landed(pending_rank, rank_landed, f.src, t), landed(pending_rank, rank_landed, f.dst, t))
        before = batched.get(i, -1)
        if before >= 0 and ends[before] > ready:     # one after another in its batch
            ready = ends[before]
        end = ready + alpha + durs[i]          # both ports free again
        if i in batched:
            ends[i] = end
        lands = end + wire
        e = slot_end[i]
        if step:
            push(pending_rank[f.src], (e, lands))
            push(pending_rank[f.dst], (e, lands))
        push(pending_writes[(f.dst, f.piece)], (e, lands))
        push(pending_port[sp], (e, end))
        push(pending_port[rp], (e, end))
        if lands > finish:
            finish = lands
    return Fraction(finish, scale)


def nvlink_batches(schedule: Schedule, grid: IntegerTimes) -> dict[int, int]:
    """The event model's NVLink batches (module docstring): NVLink flows with equal slot start,
    slot end, src and dst, two or more, in piece order (then listing order). Each batched flow ->
    the flow before it in its batch (-1 for the first)."""
    groups: dict[tuple[int, int, int, int], list[int]] = {}
    for i, f in enumerate(schedule.flows):
        if f.link == "nvlink":
            groups.setdefault((grid.starts[i], grid.ends[i], f.src, f.dst), []).append(i)
    out: dict[int, int] = {}
    for members in groups.values():
        if len(members) > 1:
            members.sort(key=lambda i: schedule.flows[i].piece)
            for before, i in zip([-1] + members[:-1], members):
                out[i] = before
    return out


def units_to_seconds(cluster: Cluster, units: Fraction, n_bytes: int) -> float:
    """Convert a time in units of n/B into seconds for an n-byte AllReduce."""
    return float(units * n_bytes / cluster.bandwidth)
