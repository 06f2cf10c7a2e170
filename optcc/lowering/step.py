"""The step runner's per-rank plans of a Schedule for a tensor of N elements (pure Python, no torch).

- Piece k covers elements [floor(N·c_k), floor(N·c_{k+1})) of the flattened tensor, where
  c_k is the sum of the first k piece sizes (exact Fractions), so any N works; a piece that
  gets no element (N smaller than the piece count) is skipped by every rank alike.
- The rank's events are grouped by instant t and done in the Schedule's order (optcc.schedule):
  sends that end at t are waited, flows that land at t are applied (add: x += coef·scratch,
  copy: x = scratch), local ops at t scale in place, then the flows that start at t are
  posted as ONE batch (sends and receives, in the global order optcc.schedule.posting_order
  (start, src, dst, piece, index) that both ends of every pair compute alike, so pairs match;
  verifier.step_check, the "runnable" property, checks every plan against the schedule).
- Received data lands in a scratch buffer slot reserved from the flow's start to its end. A
  send reads the tensor directly, unless this rank modifies that piece while the flow is in
  flight, in which case it is first copied ("snapshot") into a scratch slot. Slots are given
  by first-fit over the flows' [start, end] intervals, so the scratch is allocated once.
"""
from __future__ import annotations

import math

from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING

from optcc.schedule import Schedule, posting_order
from optcc.timing import durations

if TYPE_CHECKING:
    from collections.abc import Sequence

ALIGN = 16  # scratch slots start on multiples of 16 elements (64 bytes for float32)


@dataclass
class Transfer:
    """One flow as seen by one end. `lo:hi` is the element range; `slot` the scratch offset."""

    flow: int
    send: bool
    peer: int
    lo: int
    hi: int
    op: str
    coef: int
    start: Fraction
    end: Fraction
    slot: int | None = None   # scratch offset (receives always; sends only when snapshotted)

    @property
    def length(self) -> int:
        return self.hi - self.lo


@dataclass
class Step:
    time: Fraction
    sends_done: list[Transfer] = field(default_factory=list)   # Transfers (send) that end now
    landings: list[Transfer] = field(default_factory=list)     # Transfers (recv) that end now
    local_ops: list[tuple[int, int, int]] = field(default_factory=list)    # (lo, hi, coef)
    snapshots: list[Transfer] = field(default_factory=list)    # Transfers (send) copied to scratch now
    posts: list[Transfer] = field(default_factory=list)        # Transfers started now, in global order


@dataclass
class RankPlan:
    rank: int
    world_size: int
    numel: int
    steps: list[Step]
    scratch_numel: int
    transfers: list[Transfer]

    @property
    def n_batches(self) -> int:
        return sum(1 for s in self.steps if s.posts)


def piece_ranges(pieces: Sequence[Fraction | int], numel: int) -> list[tuple[int, int]]:
    """Element range [lo, hi) of every piece for a flattened tensor of `numel` elements: bound j
    is ⌊(size_0 + … + size_{j−1})·numel⌋ (toward 0), the last one numel; computed in integers over
    the sizes' common denominator (10⁵ pieces at p = 4096: no Fraction made per piece)."""
    den = math.lcm(1, *{x.denominator for x in pieces})
    bounds = [0]
    acc = 0
    for size in pieces:
        acc += size.numerator * (den // size.denominator)
        bounds.append(acc * numel // den if acc >= 0 else -(-acc * numel // den))
    bounds[-1] = numel
    return list(zip(bounds, bounds[1:]))


def build_all_plans(schedule: Schedule, numel: int) -> list[RankPlan]:
    """Plans of all ranks (shares the duration and ordering work)."""
    durs = durations(schedule)
    order = posting_order(schedule)
    ranges = piece_ranges(schedule.pieces, numel)
    return [_build(schedule, r, numel, durs, order, ranges) for r in range(schedule.cluster.p)]


def build_plan(schedule: Schedule, rank: int, numel: int) -> RankPlan:
    return _build(schedule, rank, numel, durations(schedule), posting_order(schedule),
                  piece_ranges(schedule.pieces, numel))


def _build(schedule: Schedule, rank: int, numel: int, durs: list[Fraction], order: list[int],
           ranges: list[tuple[int, int]]) -> RankPlan:
    if numel < 0:
        raise ValueError("numel must be ≥ 0")
    p = schedule.cluster.p
    if not 0 <= rank < p:
        raise ValueError(f"rank {rank} out of range for a schedule of {p} ranks")
    flows = schedule.flows
    transfers: list[Transfer] = []
    for i in order:
        f = flows[i]
        if rank != f.src and rank != f.dst:
            continue
        lo, hi = ranges[f.piece]
        if hi == lo:
            continue
        end = f.start + durs[i]
        send = rank == f.src
        transfers.append(Transfer(i, send, f.dst if send else f.src, lo, hi, f.op, f.coef, f.start, end))
    ops: list[tuple[Fraction, int, int, int, int]] = []
    for op in schedule.local_ops:
        lo, hi = ranges[op.piece]
        if op.rank == rank and hi > lo:
            ops.append((op.time, lo, hi, op.coef, op.piece))

    # When is each piece modified on this rank? (landings and local ops)
    modified: dict[int, list[Fraction]] = {}
    for t in transfers:
        if not t.send:
            modified.setdefault(flows[t.flow].piece, []).append(t.end)
    for time, _, _, _, piece in ops:
        modified.setdefault(piece, []).append(time)

    steps: dict[Fraction, Step] = {}

    def step(time: Fraction) -> Step:
        s = steps.get(time)
        if s is None:
            s = steps[time] = Step(time)
        return s

    for t in transfers:            # already in global order
        step(t.start).posts.append(t)
        if t.send:
            piece = flows[t.flow].piece
            if any(t.start < m < t.end for m in modified.get(piece, ())):
                step(t.start).snapshots.append(t)
                t.slot = -1       # to be assigned
            step(t.end).sends_done.append(t)
        else:
            t.slot = -1
            step(t.end).landings.append(t)
    for time, lo, hi, coef, _ in sorted(ops, key=lambda o: o[0]):
        step(time).local_ops.append((lo, hi, coef))

    scratch = _assign_slots([t for t in transfers if t.slot == -1])
    ordered = [steps[k] for k in sorted(steps)]
    return RankPlan(rank, p, numel, ordered, scratch, transfers)


def _assign_slots(users: list[Transfer]) -> int:
    """First-fit scratch offsets for intervals [start, end]; a slot freed at t is reusable at t."""
    events = []
    for n, t in enumerate(users):
        events.append((t.end, 0, n))     # free first at an instant ...
        events.append((t.start, 1, n))   # ... then allocate
    events.sort()
    live: list[tuple[int, int, int]] = []   # (offset, length, user) sorted by offset
    top = 0
    for _, kind, n in events:
        t = users[n]
        size = -(-t.length // ALIGN) * ALIGN
        if kind == 0:
            live = [b for b in live if b[2] != n]
            continue
        offset = 0
        for b_off, b_len, _ in live:
            if b_off - offset >= size:
                break
            offset = max(offset, b_off + b_len)
        t.slot = offset
        live.append((offset, size, n))
        live.sort()
        top = max(top, offset + size)
    return top
