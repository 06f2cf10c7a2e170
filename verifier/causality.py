"""Property "causality": reads and writes of one (rank, piece) never race.

Precisely, with every flow occupying [start, start + duration) (durations from
optcc.timing.durations, on the exact integer grid of optcc.timing.IntegerTimes):
1. A flow that reads (src, piece) at time t depends on every write to (src, piece) that
   started before t; each must have landed by t:  no write w with w.start < t < w.end.
   (Otherwise the reader sends a value the schedule meant to be updated, or on hardware a
   buffer that is being received into.) Writes that start at t or later are not
   dependencies. Such a racing read is a violation when what it carries can reach a final
   value: we propagate a taint from the racing read through later reads, additions and
   copies (an overwrite drops the old taint) and flag it if any rank's final value of the
   piece is tainted. A racing read whose value is overwritten everywhere is dead traffic,
   not an error (the reference simulation agrees: the result does not depend on it).
2. The same for a local op on (rank, piece) at time t.
3. No two flows write one (rank, piece) during overlapping intervals unless both are
   additions (additions commute; an overwrite racing anything makes the result depend on
   which lands first).
The first violation in time is reported, naming the flows and their times.
"""
from __future__ import annotations

from collections import defaultdict

from verifier.events import LAND, READ


def check_causality(schedule, grid):
    """Return (ok, counterexample or None)."""
    flows = schedule.flows
    starts, ends = grid.starts, grid.ends
    writes = defaultdict(list)
    for i, f in enumerate(flows):
        writes[(f.dst, f.piece)].append(i)
    worst = None            # (time, sort tiebreak, counterexample)

    def consider(t, tie, cx):
        nonlocal worst
        if worst is None or (t, tie) < worst[:2]:
            worst = (t, tie, cx)

    racing: dict[int, int] = {}                                 # 1. reads: reader -> write
    for i, f in enumerate(flows):
        ws = writes.get((f.src, f.piece))
        if not ws:
            continue
        t = starts[i]
        for w in ws:
            if starts[w] < t < ends[w]:
                racing.setdefault(i, w)
    if racing:
        live = _reaching_final(schedule, grid, set(racing))
        for i, w in racing.items():
            if i in live:
                consider(starts[i], (0, i, w), _read_race(schedule, grid, i, w))
    for j, op in enumerate(schedule.local_ops):                 # 2. local ops
        t = grid.op_times[j]
        for w in writes.get((op.rank, op.piece), ()):
            if starts[w] < t < ends[w]:
                consider(t, (1, j, w), _local_race(schedule, grid, j, w))
    for key, ws in writes.items():                              # 3. write/write
        if len(ws) < 2:
            continue
        ws = sorted(ws, key=lambda w: (starts[w], ends[w]))
        for a_pos, a in enumerate(ws):
            for b in ws[a_pos + 1:]:
                if starts[b] >= ends[a]:
                    break
                if flows[a].op == "add" and flows[b].op == "add":
                    continue
                consider(starts[b], (2, a, b), _write_race(schedule, grid, key, a, b))
    if worst is None:
        return True, None
    return False, worst[2]


def _reaching_final(schedule, grid, suspects: set[int]) -> set[int]:
    """The suspect flows whose carried value reaches some rank's final value of its piece."""
    flows = schedule.flows
    pieces = {flows[i].piece for i in suspects}
    events = defaultdict(list)
    for i, f in enumerate(flows):
        if f.piece in pieces:
            events[f.piece].append((grid.starts[i], READ, i))
            events[f.piece].append((grid.ends[i], LAND, i))
    for j, op in enumerate(schedule.local_ops):       # local ops keep taint; order only matters for ties
        if op.piece in pieces:
            events[op.piece].append((grid.op_times[j], 1, -1 - j))
    live: set[int] = set()
    empty = frozenset()
    for piece, ev in events.items():
        ev.sort()
        taint: dict[int, frozenset] = {}
        carried: dict[int, frozenset] = {}
        for _, phase, i in ev:
            if phase == READ:
                t = taint.get(flows[i].src, empty)
                carried[i] = t | {i} if i in suspects else t
            elif phase == LAND:
                f = flows[i]
                c = carried.pop(i)
                taint[f.dst] = (taint.get(f.dst, empty) | c) if f.op == "add" else c
        for t in taint.values():
            live |= t
    return live & suspects


def _flow(schedule, grid, i) -> dict:
    f = schedule.flows[i]
    start, end = grid.to_fraction(grid.starts[i]), grid.to_fraction(grid.ends[i])
    return {"flow": i, "src": f.src, "dst": f.dst, "piece": f.piece, "op": f.op, "start": str(start),
            "end": str(end), "text": f"flows[{i}] {f.src}->{f.dst} piece {f.piece} {f.op} [{start}, {end})"}


def _read_race(schedule, grid, i, w) -> dict:
    r, wf = _flow(schedule, grid, i), _flow(schedule, grid, w)
    f = schedule.flows[i]
    return {"property": "causality", "kind": "read before dependency landed", "rank": f.src,
            "piece": f.piece, "reader": r, "dependency": wf,
            "message": f"{r['text']} reads rank {f.src}'s piece {f.piece} at {r['start']}, but "
                       f"{wf['text']} writing it started earlier and lands only at {wf['end']}"}


def _local_race(schedule, grid, j, w) -> dict:
    op = schedule.local_ops[j]
    wf = _flow(schedule, grid, w)
    return {"property": "causality", "kind": "local op before dependency landed", "rank": op.rank,
            "piece": op.piece, "local_op": {"index": j, "time": str(op.time), "coef": op.coef},
            "dependency": wf,
            "message": f"local_ops[{j}] scales rank {op.rank}'s piece {op.piece} at {op.time}, but "
                       f"{wf['text']} writing it lands only at {wf['end']}"}


def _write_race(schedule, grid, key, a, b) -> dict:
    fa, fb = _flow(schedule, grid, a), _flow(schedule, grid, b)
    rank, piece = key
    return {"property": "causality", "kind": "overlapping writes", "rank": rank, "piece": piece,
            "flows": [fa, fb],
            "message": f"{fa['text']} and {fb['text']} both write rank {rank}'s piece {piece} at "
                       f"overlapping times and not both are additions"}
