"""The event model's "shared" port discipline (optcc.timing): receivers share their bandwidth
max-min among concurrent senders (how SimAI's NIC serves queue pairs), exact in Fractions.

Per flow, as in the exclusive discipline: it reads the writes to its (src, piece) whose slot end
is ≤ its slot start (landed, plus Li), waits for the flows on its *send* port with slot end ≤ its
slot start (a sender posts one flow at a time, in slot order) and, in an NVLink batch, for the
flow before it. Then it holds its send port for o, and moves its bytes (its piece's size, units
of n) at a rate that changes over time: at most its sender's rate (1/ℓ_src on a NIC, s_nv on
NVLink: a batch goes one flow at a time at the port's full rate) and, among the flows arriving at
its receiver's port at that instant, the max-min share of the port (1/ℓ_dst or s_nv). It lands L
after its last byte. A local op is a write at its time whose value is ready when its reads land.
The receiver holds no order: flows that the exclusive rule would queue in slot order run at once.

A fluid simulation, event by event (starts, ends of o, last bytes, landings): O(events × active
flows), for small schedules (the paper checks use it up to event_checks.SHARED_FLOW_CAP flows).
"""
from __future__ import annotations

import heapq
from typing import TYPE_CHECKING
from fractions import Fraction

from optcc.schedule import Schedule

if TYPE_CHECKING:
    from optcc.timing import IntegerTimes


def water_fill(capacity: Fraction, caps: list[Fraction]) -> list[Fraction]:
    """Max-min shares of `capacity` among flows each capped at caps[i] (exact)."""
    out = [Fraction(0)] * len(caps)
    left, n = capacity, len(caps)
    for k, i in enumerate(sorted(range(n), key=lambda i: caps[i])):
        share = left / (n - k)
        out[i] = min(caps[i], share)
        left -= out[i]
    return out


def shared_event_time(schedule: Schedule, grid: IntegerTimes, batch: dict[int, int], o: Fraction = Fraction(0),
                      li: Fraction = Fraction(0), lat: Fraction = Fraction(0)) -> Fraction:
    """Makespan (units of n/B) under the shared discipline (module docstring). `grid` and `batch`
    are optcc.timing's IntegerTimes and nvlink_batches of the schedule (event_time passes them)."""
    c = schedule.cluster
    flows, ops = schedule.flows, schedule.local_ops
    n = len(flows)
    start = [Fraction(x, grid.scale) for x in grid.starts]
    end = [Fraction(x, grid.scale) for x in grid.ends]
    # nodes 0..n-1 flows, n.. local ops; writes per (rank, piece) as (slot end, node)
    writes: dict[tuple[int, int], list[tuple[Fraction, int]]] = {}
    for i, f in enumerate(flows):
        writes.setdefault((f.dst, f.piece), []).append((end[i], i))
    for j, op in enumerate(ops):
        writes.setdefault((op.rank, op.piece), []).append((op.time, n + j))
    sends: dict[tuple[int, str], list[int]] = {}
    for i, f in enumerate(flows):
        sends.setdefault((f.src, f.link), []).append(i)
    data_deps: list[list[int]] = []           # per node: the writes it reads
    wait_deps: list[list[int]] = []           # per flow: flows whose end frees its start (send port, batch)
    for i, f in enumerate(flows):
        data_deps.append([w for e, w in writes.get((f.src, f.piece), []) if e <= start[i]])
        wait = [j for j in sends[(f.src, f.link)] if end[j] <= start[i]]
        if batch.get(i, -1) >= 0:
            wait.append(batch[i])
        wait_deps.append(wait)
    for op in ops:
        data_deps.append([w for e, w in writes.get((op.rank, op.piece), []) if e <= op.time and w < n])
    users: list[list[int]] = [[] for _ in range(n + len(ops))]
    missing = [0] * (n + len(ops))
    for v in range(n + len(ops)):
        deps = data_deps[v] + (wait_deps[v] if v < n else [])
        missing[v] = len(deps)
        for u in deps:
            users[u].append(v)
    landed = [Fraction(0)] * (n + len(ops))          # set before any reader is released
    ended = [Fraction(0)] * n
    events: list[tuple[Fraction, int, int]] = []     # (time, kind 0 start / 1 land, node)

    def release(v: int) -> None:
        ready = max([landed[u] for u in data_deps[v]], default=Fraction(0))
        if v >= n:                                   # a local op: its value is ready when its reads land
            heapq.heappush(events, (ready, 1, v))
            return
        free = max([ended[u] for u in wait_deps[v]], default=Fraction(0))
        heapq.heappush(events, (max(ready + li, free), 0, v))

    def resolve_one(v: int) -> None:
        missing[v] -= 1
        if missing[v] == 0:
            release(v)

    for v in range(n + len(ops)):
        if missing[v] == 0:
            release(v)
    speed = c.nvlink_speedup
    left: dict[int, Fraction] = {}                   # moving flows: bytes left (units of n)
    posting: list[tuple[Fraction, int]] = []          # flows in their o: (end of o, flow)
    t, finish = Fraction(0), Fraction(0)

    def rates() -> dict[int, Fraction]:
        by_port: dict[tuple[int, str], list[int]] = {}
        for i in left:
            by_port.setdefault((flows[i].dst, flows[i].link), []).append(i)
        out: dict[int, Fraction] = {}
        for (dst, link), ids in by_port.items():
            cap = speed if link == "nvlink" else 1 / c.slowdown[dst]
            caps = [speed if link == "nvlink" else 1 / c.slowdown[flows[i].src] for i in ids]
            out.update(zip(ids, water_fill(cap, caps)))
        return out

    while events or left or posting:
        r = rates()
        cands = ([events[0][0]] if events else []) + ([posting[0][0]] if posting else [])
        t_next = min(cands + [t + left[i] / r[i] for i in left])
        for i in left:
            left[i] -= r[i] * (t_next - t)
        t = t_next
        for i in [i for i, b in left.items() if b == 0]:
            del left[i]
            ended[i] = t
            heapq.heappush(events, (t + lat, 1, i))
            for v in users[i]:                        # its send port (and batch successor) is free
                if v < n and i in wait_deps[v]:
                    resolve_one(v)
        while posting and posting[0][0] == t:         # o done: its bytes start to move
            i = heapq.heappop(posting)[1]
            left[i] = schedule.pieces[flows[i].piece]
        while events and events[0][0] == t:
            _, kind, v = heapq.heappop(events)
            if kind == 0:
                heapq.heappush(posting, (t + o, v))
                continue
            landed[v] = t
            finish = max(finish, t)
            for u in users[v]:                        # the readers of what it wrote
                if v in data_deps[u]:
                    resolve_one(u)
    return finish
