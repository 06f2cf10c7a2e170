"""Property "causality": the computed values do not hinge on how same-instant landings are ordered.

Both runners (optcc.lowering.step / executor, and the streaming program of optcc.lowering.streaming)
realize the schedule's stated-time semantics exactly: a send carries the value its source
holds at the flow's start (it reads the tensor at posting, or a snapshot taken then when the
piece changes while the flow is in flight); a receive lands in a private scratch slot and is
applied at the flow's end; at one instant landings come first, in posting order
(optcc.schedule.posting_order: start, src, dst, piece, index), then local ops, then reads.
Every property walks the schedule in exactly that order (verifier.events.piece_events), so the
sum property alone is about what the runners compute.

This property adds one demand: several landings at one instant on one (rank, piece) must
commute — all additions (exact addition commutes), or all copies of one and the same value
(symbolically equal, computed in the runners' order) — unless what they produce never reaches
a final value (dead traffic: a taint propagated from such landings through later reads,
additions and copies, an overwrite dropping the old taint). At every same-instant group the
taint is the union over the group (and the old taint unless all members are copies), which
over-approximates the influence under ANY order of the group, so a proof here means: every
order of same-instant landings gives the runners' final values. A schedule whose correctness
rests on the tie-break (e.g. a copy and an add landing together) is refused, conservatively;
the first such group in time is reported, naming its flows, rank and piece.
"""
from __future__ import annotations

from collections import defaultdict

from verifier.events import LAND, LOCAL, READ, piece_events
from verifier.linear import add_scaled


def check_causality(schedule, grid, events=None):
    """Return (ok, counterexample or None); `events`: verifier.events.piece_events if already made."""
    flows = schedule.flows
    ends = grid.ends
    groups: dict[tuple, list[int]] = defaultdict(list)
    for i, f in enumerate(flows):
        groups[(f.dst, f.piece, ends[i])].append(i)
    collisions = {k: v for k, v in groups.items() if len(v) > 1 and any(flows[i].op != "add" for i in v)}
    if not collisions:
        return True, None
    pieces = {k[1] for k in collisions}
    events = events if events is not None else piece_events(schedule, grid)
    carried = _carried_values(schedule, events, pieces)
    suspects = {k: v for k, v in collisions.items()
                if not (all(flows[i].op == "copy" for i in v) and len({carried[i] for i in v}) == 1)}
    if not suspects:
        return True, None
    live = _reaching_final(schedule, events, {i for v in suspects.values() for i in v})
    bad = sorted((k[2], k) for k, v in suspects.items() if live.intersection(v))
    if not bad:
        return True, None
    key = bad[0][1]
    return False, _collision(schedule, grid, key, suspects[key])


def _carried_values(schedule, events, pieces) -> dict[int, tuple]:
    """Exact value (sorted coefficient items) each flow of `pieces` carries, in the runners' order."""
    flows, ops = schedule.flows, schedule.local_ops
    out: dict[int, tuple] = {}
    for piece in pieces:
        values: dict[int, dict] = {}
        live: dict[int, dict] = {}
        for _, phase, i in events[piece]:
            if phase == READ:
                f = flows[i]
                v = values.get(f.src, {f.src: 1})
                live[i] = v
                out[i] = tuple(sorted(v.items()))
            elif phase == LAND:
                f = flows[i]
                v = live.pop(i)
                old = values.get(f.dst, {f.dst: 1})
                values[f.dst] = add_scaled(old, f.coef, v) if f.op == "add" else dict(v)
            else:
                op = ops[i]
                old = values.get(op.rank, {op.rank: 1})
                values[op.rank] = {r: op.coef * c for r, c in old.items()}
    return out


def _reaching_final(schedule, events, suspects: set[int]) -> set[int]:
    """The suspect flows whose carried value may reach some rank's final value of its piece,
    under any order of same-instant landings (module docstring)."""
    flows = schedule.flows
    pieces = {flows[i].piece for i in suspects}
    live: set[int] = set()
    empty = frozenset()
    for piece in pieces:
        taint: dict[int, frozenset] = {}
        carried: dict[int, frozenset] = {}
        ev = events[piece]
        k = 0
        while k < len(ev):
            t, phase, i = ev[k]
            if phase == READ:
                c = taint.get(flows[i].src, empty)
                carried[i] = c | {i} if i in suspects else c
                k += 1
                continue
            if phase == LOCAL:                     # a scaling keeps the taint
                k += 1
                continue
            landing: dict[int, list[int]] = defaultdict(list)   # dst -> flows landing at t
            while k < len(ev) and ev[k][0] == t and ev[k][1] == LAND:
                landing[flows[ev[k][2]].dst].append(ev[k][2])
                k += 1
            for dst, members in landing.items():
                new = frozenset().union(*(carried.pop(j) for j in members))
                if any(flows[j].op == "add" for j in members):
                    new |= taint.get(dst, empty)
                taint[dst] = new
        for c in taint.values():
            live |= c
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
                       f"{fl[0]['end']} and do not commute (not all additions, not copies of one value), and the result "
                       f"reaches a final value: the final values hinge on the tie-break (the runners "
                       f"apply them in posting order: start, src, dst, piece, index)"}
