"""Property "causality": exactly what the runner relies on to compute the schedule's values.

The runner (gpu_runner.plan / executor) realizes the schedule's stated-time semantics
(optcc.schedule) exactly: a send carries the value its source holds at the flow's start (it
reads the tensor at posting, or a snapshot taken then when the piece changes while the flow
is in flight); a receive lands in a private scratch slot and is applied at the flow's end;
at one instant landings come first, then local ops, then reads. So a read racing an in-flight
write, a local op during one, or two writes in flight at once are all executed as the
schedule states, and the sum property (computed in that semantics) covers them.

The one place where the runner and the verifier may differ is the ORDER of landings on one
(rank, piece) at the same instant: the sum property applies them by flow index, the runner in
posting order (start, src, dst, piece, index). The rule: such same-instant landings must
commute — all additions (exact addition commutes), or all copies of one and the same value
(symbolically equal) — unless the value they produce never reaches a final value (it is
overwritten everywhere: dead traffic; found by propagating a taint from the landings through
later reads, additions and copies, an overwrite dropping the old taint). Then both orders give
the same exact values and the sum proof holds for what the runner computes.
(Earlier rules also refused reads racing in-flight writes and any overlapping copy; the runner
executes those correctly — tests/test_trust_causality.py runs both kinds on gloo — so they were
false alarms. The first violation in time is reported, naming the flows.)
"""
from __future__ import annotations

from collections import defaultdict

from verifier.events import LAND, READ
from verifier.linear import add_scaled


def check_causality(schedule, grid):
    """Return (ok, counterexample or None)."""
    flows = schedule.flows
    ends = grid.ends
    groups: dict[tuple, list[int]] = defaultdict(list)
    for i, f in enumerate(flows):
        groups[(f.dst, f.piece, ends[i])].append(i)
    collisions = {k: v for k, v in groups.items() if len(v) > 1 and any(flows[i].op != "add" for i in v)}
    if not collisions:
        return True, None
    carried = _carried_values(schedule, grid, {k[1] for k in collisions})
    suspects = {k: v for k, v in collisions.items()
                if not (all(flows[i].op == "copy" for i in v) and len({carried[i] for i in v}) == 1)}
    if not suspects:
        return True, None
    live = _reaching_final(schedule, grid, {i for v in suspects.values() for i in v})
    bad = sorted((k[2], k) for k, v in suspects.items() if live.intersection(v))
    if not bad:
        return True, None
    key = bad[0][1]
    return False, _collision(schedule, grid, key, suspects[key])


def _carried_values(schedule, grid, pieces) -> dict[int, tuple]:
    """Exact value (sorted coefficient items) each flow of `pieces` carries, in stated-time order."""
    flows, ops = schedule.flows, schedule.local_ops
    events = []
    for i, f in enumerate(flows):
        if f.piece in pieces:
            events.append((grid.starts[i], READ, i))
            events.append((grid.ends[i], LAND, i))
    for j, op in enumerate(ops):
        if op.piece in pieces:
            events.append((grid.op_times[j], 1, j))
    events.sort()
    values: dict[tuple, dict] = {}
    out: dict[int, tuple] = {}
    live: dict[int, dict] = {}
    for _, phase, i in events:
        if phase == READ:
            f = flows[i]
            v = values.get((f.src, f.piece), {f.src: 1})
            live[i] = v
            out[i] = tuple(sorted(v.items()))
        elif phase == LAND:
            f = flows[i]
            v = live.pop(i)
            old = values.get((f.dst, f.piece), {f.dst: 1})
            values[(f.dst, f.piece)] = add_scaled(old, f.coef, v) if f.op == "add" else dict(v)
        else:
            op = ops[i]
            old = values.get((op.rank, op.piece), {op.rank: 1})
            values[(op.rank, op.piece)] = {r: op.coef * c for r, c in old.items()}
    return out


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


def _collision(schedule, grid, key, members) -> dict:
    rank, piece, _ = key
    fl = [_flow(schedule, grid, i) for i in members]
    return {"property": "causality", "kind": "same-instant landings that do not commute", "rank": rank,
            "piece": piece, "flows": fl,
            "message": f"{'; '.join(f['text'] for f in fl)} all land on rank {rank}'s piece {piece} at "
                       f"{fl[0]['end']} and do not commute (not all additions, not copies of one value): "
                       f"the runner applies them in posting order (start, src, dst, piece, index), the "
                       f"proof in flow order, and the result reaches a final value"}
