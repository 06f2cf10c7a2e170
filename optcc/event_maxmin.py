"""The event model (optcc.timing.event_time, exclusive discipline) with a work-conserving NVLink:
flows on NVLink below rate 1 that form no batch (the rails' streams, one GPU to g − 1 others at
once) share their server's NVLink ports max-min while they run, instead of each keeping its
stated share for its whole duration. Every other flow keeps the event model's rule.

Exact (integers and Fractions), a discrete-event simulation (derived): a flow starts at
max(data ready + Li, the end of every flow on its ports that the schedule ends by its start, the
flow before it in its batch), as in the event model; a shared flow then waits o, joins its
server's active set with its work (its size at the full NVLink speed: stated duration × rate),
and the active flows of a server get max-min fair rates over the GPUs' NVLink send and receive
ports (capacity 1 each, progressive filling), recomputed whenever a flow joins or ends there. It
lands L after it ends. This is what SimGrid's replay with the NIC flows capped at their rate
gives (benchmarks/simgrid_disciplines.py, tests/optcc/test_simgrid_disciplines.py).

"What the schedule ends by its start" is a prefix of each key's members sorted by slot end (a
port's flows; the writes and local ops of a (rank, piece)), so a node waits on a prefix count per
key, and a key's running maximum over its finished prefix gives the time it needs. Cost: the
event model's order of work plus, per event on a server, a max-min over its active flows
(≤ g(g − 1) of them): for schedules of up to some 10⁵ flows.
"""
from __future__ import annotations

import heapq
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Mapping
from fractions import Fraction
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from optcc.schedule import Schedule
    from optcc.timing import EventGrid, IntegerTimes

Time = Fraction | int
Key = tuple[str, int, str, int] | tuple[str, int, int]     # ("port", rank, link, dir) | ("data", rank, piece)


class _Key:
    """One key's members (node ids) in slot-end order and the running maximum of their values
    over the finished prefix."""

    __slots__ = ("members", "pos", "done", "ptr", "prefmax", "waiting")

    def __init__(self, members: list[int]) -> None:
        self.members = members
        self.pos = {v: j for j, v in enumerate(members)}
        self.done: list[Time | None] = [None] * len(members)
        self.ptr = 0
        self.prefmax: list[Time] = []
        self.waiting: list[tuple[int, int]] = []       # heap of (prefix needed, node)

    def finish(self, node: int, value: Time) -> list[int]:
        """Mark `node` finished with `value`; the waiting nodes whose prefix is now complete."""
        self.done[self.pos[node]] = value
        while self.ptr < len(self.members) and self.done[self.ptr] is not None:
            v = self.done[self.ptr]
            assert v is not None
            self.prefmax.append(v if not self.prefmax or v > self.prefmax[-1] else self.prefmax[-1])
            self.ptr += 1
        woken = []
        while self.waiting and self.waiting[0][0] <= self.ptr:
            woken.append(heapq.heappop(self.waiting)[1])
        return woken

    def value(self, need: int) -> Time:
        return self.prefmax[need - 1] if need else 0


def _maxmin(flows: list[int], ends: Mapping[int, tuple[int, int]]) -> dict[int, Fraction]:
    """Max-min fair rates of `flows` over ports of capacity 1 (progressive filling): each flow
    uses the two ports `ends[flow]`."""
    on: defaultdict[int, list[int]] = defaultdict(list)
    for f in flows:
        for port in ends[f]:
            on[port].append(f)
    cap = {port: Fraction(1) for port in on}
    rate: dict[int, Fraction] = {}
    while len(rate) < len(flows):
        level, port = min(((cap[q] / sum(1 for f in fs if f not in rate), q)
                           for q, fs in on.items() if any(f not in rate for f in fs)), key=lambda x: x[0])
        for f in on[port]:
            if f in rate:
                continue
            rate[f] = level
            for q in ends[f]:
                cap[q] -= level
    return rate


class _Server:
    """A server's shared NVLink flows at work: remaining work and rates, as of `clock`."""

    __slots__ = ("active", "rate", "clock", "version")

    def __init__(self) -> None:
        self.active: dict[int, Fraction] = {}          # flow -> work left
        self.rate: dict[int, Fraction] = {}
        self.clock: Time = 0
        self.version = 0

    def advance(self, t: Time) -> None:
        dt = t - self.clock
        if dt:
            for f in self.active:
                self.active[f] -= self.rate[f] * dt
        self.clock = t


def maxmin_event_time(schedule: Schedule, grid: IntegerTimes, batched: Mapping[int, int], eg: EventGrid) -> Fraction:
    """Makespan (units of n/B) of `schedule` in the event model with its NVLink flows below rate
    1 outside batches shared max-min (module docstring). `grid`, `batched`, `eg`: as
    optcc.timing.event_time computes them."""
    flows, ops = schedule.flows, schedule.local_ops
    n, g = len(flows), schedule.cluster.g
    starts, slot_end = grid.starts, grid.ends
    mult = eg.scale // grid.scale
    op_time = [t * mult for t in grid.op_times]
    start = [t * mult for t in starts]
    end_slot = [t * mult for t in slot_end]
    shared = [f.link == "nvlink" and f.rate < 1 and i not in batched for i, f in enumerate(flows)]
    port_of = {}
    for i, f in enumerate(flows):
        if shared[i]:
            port_of[i] = (2 * f.src, 2 * f.dst + 1)

    # keys: a port's flows; a (rank, piece)'s writes and local ops. Nodes: flows 0..n−1, ops n + j.
    members: defaultdict[Key, list[tuple[Time, int, int, int]]] = defaultdict(list)
    for i, f in enumerate(flows):
        members[("port", f.src, f.link, 0)].append((end_slot[i], 0, i, i))
        members[("port", f.dst, f.link, 1)].append((end_slot[i], 0, i, i))
        members[("data", f.dst, f.piece)].append((end_slot[i], 0, i, i))
    for j, op in enumerate(ops):
        members[("data", op.rank, op.piece)].append((op_time[j], 1, j, n + j))
    keys: dict[Key, _Key] = {}
    sort_of: dict[Key, list[tuple[Time, int, int]]] = {}
    for k, ms in members.items():
        ms.sort()
        keys[k] = _Key([m[3] for m in ms])
        sort_of[k] = [m[:3] for m in ms]

    # what each node waits for: (key, prefix length); a flow also for its batch predecessor
    needs: list[list[tuple[Key, int]]] = []
    for i, f in enumerate(flows):
        mine = []
        for k in (("data", f.src, f.piece), ("port", f.src, f.link, 0), ("port", f.dst, f.link, 1)):
            if k in keys:
                mine.append((k, bisect_right(sort_of[k], (start[i], 2, 0))))
        needs.append(mine)
    for j, op in enumerate(ops):
        k = ("data", op.rank, op.piece)
        needs.append([(k, keys[k].pos[n + j])])
    pending = [0] * (n + len(ops))
    for v, mine in enumerate(needs):
        for k, need in mine:
            if need:
                pending[v] += 1
                heapq.heappush(keys[k].waiting, (need, v))
        if v < n and batched.get(v, -1) >= 0:
            pending[v] += 1
    after_in_batch = {before: i for i, before in batched.items() if before >= 0}

    events: list[tuple[Time, int, int, int, int]] = []    # (time, seq, kind, id, version)
    seq = 0
    START, JOIN, DONE, SERVER = 0, 1, 2, 3
    ends: dict[int, Time] = {}
    servers: defaultdict[int, _Server] = defaultdict(_Server)
    finish: Time = 0

    def push(t: Time, kind: int, ident: int, version: int = 0) -> None:
        nonlocal seq
        heapq.heappush(events, (t, seq, kind, ident, version))
        seq += 1

    def ready(v: int) -> None:
        """Every need of node v is met: a flow is scheduled to start, an op happens now."""
        nonlocal finish
        if v < n:
            t: Time = eg.issue                            # data ready at 0 at the earliest
            for k, need in needs[v]:
                x = keys[k].value(need) + (eg.issue if k[0] == "data" else 0)
                t = x if x > t else t
            before = batched.get(v, -1)
            if before >= 0:
                t = max(t, ends[before])
            push(t, START, v)
        else:
            k, need = needs[v][0]
            t = keys[k].value(need)
            finish = max(finish, t)
            release(k, v, t)

    def release(k: Key, v: int, value: Time) -> None:
        for w in keys[k].finish(v, value):
            pending[w] -= 1
            if pending[w] == 0:
                ready(w)

    def flow_ended(i: int, t: Time) -> None:
        nonlocal finish
        f = flows[i]
        ends[i] = t
        lands = t + eg.wire
        finish = max(finish, lands)
        release(("port", f.src, f.link, 0), i, t)
        release(("port", f.dst, f.link, 1), i, t)
        release(("data", f.dst, f.piece), i, lands)
        nxt = after_in_batch.get(i)
        if nxt is not None:
            pending[nxt] -= 1
            if pending[nxt] == 0:
                ready(nxt)

    def reschedule(s: int, sv: _Server) -> None:
        sv.version += 1
        if not sv.active:
            return
        sv.rate = _maxmin(list(sv.active), port_of)
        t = min(sv.clock + w / sv.rate[f] for f, w in sv.active.items())
        push(t, SERVER, s, sv.version)

    for v in range(n + len(ops)):
        if pending[v] == 0:
            ready(v)
    while events:
        t, _, kind, ident, version = heapq.heappop(events)
        if kind == START:
            if shared[ident]:
                push(t + eg.alpha, JOIN, ident)
            else:
                push(t + eg.alpha + eg.durs[ident], DONE, ident)
        elif kind == DONE:
            flow_ended(ident, t)
        elif kind == JOIN:
            s = flows[ident].src // g
            sv = servers[s]
            sv.advance(t)
            sv.active[ident] = Fraction(eg.durs[ident]) * flows[ident].rate
            reschedule(s, sv)
        else:
            sv = servers[ident]
            if version != sv.version:
                continue
            sv.advance(t)
            gone = [j for j, w in sv.active.items() if w <= 0]
            for j in gone:
                del sv.active[j]
            reschedule(ident, sv)
            for j in sorted(gone):
                flow_ended(j, t)
    assert len(ends) == n, "every flow ran"
    return Fraction(finish) / eg.scale
