"""Property "causality": the computed values do not hinge on how same-instant landings are ordered.

Both runners (optcc.lowering.step / executor, and the streaming program of optcc.lowering.streaming)
realize the schedule's stated-time semantics exactly: a send carries the value its source
holds at the flow's start (it reads the tensor at posting, or a snapshot taken then when the
piece changes while the flow is in flight); a receive lands in a private scratch slot and is
applied at the flow's end; at one instant landings come first, in posting order
(optcc.schedule.posting_order: start, src, dst, piece, index), then local ops, then reads.
Every property walks the schedule in exactly that order (verifier.events.piece_events), so the
sum property alone is about what the runners compute.

This property adds one demand: the final values must not depend on the order of landings at one
instant on one (rank, piece). A group that commutes passes: all additions (exact addition
commutes), or all copies of one and the same value (symbolically equal, computed in the runners'
order). So does a group whose result never reaches a final value (dead traffic: a taint propagated
from such landings through later reads, additions and copies, an overwrite dropping the old taint;
at a group the taint is the union over the group, plus the old taint unless all are copies, so it
over-approximates every order). The groups left are decided exactly: each piece is re-run in
exact integers with each group reordered alone (earliest first: the witness names the first
group that matters), then under every combination of orders (at most ORDERS_LIMIT; beyond that
a schedule no single reordering breaks is refused conservatively). A proof
means every order of same-instant landings gives the runners' final values; a refutation names
the group and a witness order, the rank it breaks and that rank's value there.

Why refuse what optcc's own executors compute right: they all apply a group in posting order
(the step plans; the streaming programs, whose write-after-write dependencies the property
"streaming" proves; the MSCCL export, whose dependencies `optcc msccl verify` proves), so the
sum property, which walks that order, is about what they run. But posting order is optcc's
tie-break, not part of what the schedule's times say; a schedule whose values hinge on it is
wrong for any executor that applies simultaneous landings as they arrive (a replay of the
times in a simulator, an executor of one's own) and is refused here.
"""
from __future__ import annotations

import itertools
import math
from collections import defaultdict
from typing import TYPE_CHECKING, Any, Literal

from verifier.events import LAND, LOCAL, READ, piece_events
from verifier.linear import add_scaled

if TYPE_CHECKING:
    from collections.abc import Sequence

    from optcc.schedule import Schedule
    from optcc.timing import IntegerTimes

Event = tuple[int, int, int]            # (time, phase, index): verifier.events.piece_events
Value = tuple[tuple[int, int], ...]     # sorted (rank, coefficient) items of an exact value
Witness = tuple[list[int], list[int], int, Value, Value]


def check_causality(schedule: Schedule, grid: IntegerTimes, events: list[list[Event]] | None = None,
                    ) -> tuple[bool, dict[str, Any] | None]:
    """Return (ok, counterexample or None); `events`: verifier.events.piece_events if already made."""
    flows = schedule.flows
    ends = grid.ends
    groups: dict[tuple[int, int, int], list[int]] = defaultdict(list)
    for i, f in enumerate(flows):
        groups[(f.dst, f.piece, ends[i])].append(i)
    collisions = {k: v for k, v in groups.items() if len(v) > 1 and any(flows[i].op != "add" for i in v)}
    if not collisions:
        return True, None
    pieces = {k[1] for k in collisions}
    events = events if events is not None else piece_events(schedule, grid)
    carried: dict[int, Value] = {}
    for piece in pieces:
        carried.update(_walk(schedule, events[piece])[0])
    suspects = {k: v for k, v in collisions.items()
                if not (all(flows[i].op == "copy" for i in v) and len({carried[i] for i in v}) == 1)}
    if not suspects:
        return True, None
    live = _reaching_final(schedule, events, {i for v in suspects.values() for i in v})
    bad = {k: v for k, v in suspects.items() if live.intersection(v)}
    if not bad:
        return True, None
    for piece in sorted({k[1] for k in bad}):
        mine = sorted((k for k in bad if k[1] == piece), key=lambda k: k[2])
        verdict = _every_order(schedule, events[piece], [bad[k] for k in mine])
        if verdict is not True:
            key = mine[0] if verdict is None else next(k for k in mine if set(bad[k]) == set(verdict[0]))
            return False, _collision(schedule, grid, key, bad[key], verdict)
    return True, None


def _walk(schedule: Schedule, events: list[Event], order: dict[int, int] | None = None,
          ) -> tuple[dict[int, Value], dict[int, Value]]:
    """Exact run of one piece's events: the value (sorted coefficient items) each flow carries,
    and every rank's final value. `order` (flow -> flow) puts another landing in a landing's place."""
    flows, ops = schedule.flows, schedule.local_ops
    out: dict[int, Value] = {}
    values: dict[int, dict[int, int]] = {}
    live: dict[int, dict[int, int]] = {}
    for _, phase, i in events:
        if phase == READ:
            f = flows[i]
            v = values.get(f.src, {f.src: 1})
            live[i] = v
            out[i] = tuple(sorted(v.items()))
        elif phase == LAND:
            f = flows[order.get(i, i) if order else i]
            v = live.pop(order.get(i, i) if order else i)
            old = values.get(f.dst, {f.dst: 1})
            values[f.dst] = add_scaled(old, f.coef, v) if f.op == "add" else dict(v)
        else:
            op = ops[i]
            old = values.get(op.rank, {op.rank: 1})
            values[op.rank] = {r: op.coef * c for r, c in old.items()}
    p = schedule.cluster.p
    return out, {r: tuple(sorted(values.get(r, {r: 1}).items())) for r in range(p)}


ORDERS_LIMIT = 5040          # derived: 7! orders of one piece's ties re-run exactly, at most


def _every_order(schedule: Schedule, events: list[Event], groups: list[list[int]]) -> Witness | Literal[True] | None:
    """True if every order of the tie groups gives the runners' final values (posting order);
    else a witness (the first reordered group's flows as applied, the same in posting order, a
    rank whose final value differs, that value, the runners' value); None when there are more
    than ORDERS_LIMIT orders and no single group's reordering changes a final value."""
    runners = _walk(schedule, events)[1]
    total = 1
    for g in groups:
        total *= math.factorial(len(g))

    position = {i: n for n, (_, phase, i) in enumerate(events) if phase == LAND}
    groups = [sorted(g, key=position.__getitem__) for g in groups]          # posting order

    def differs(perms: Sequence[Sequence[int]]) -> Witness | None:
        order = {a: b for g, perm in zip(groups, perms) for a, b in zip(g, perm) if a != b}
        if not order:
            return None
        finals = _walk(schedule, events, order)[1]
        rank = next((r for r in sorted(finals) if finals[r] != runners[r]), None)
        if rank is None:
            return None
        changed = next(n for n, g in enumerate(groups) if list(perms[n]) != g)
        return list(perms[changed]), groups[changed], rank, finals[rank], runners[rank]

    for n, g in enumerate(groups):              # one group reordered, the earliest first
        for perm in itertools.permutations(g):
            found = differs([perm if m == n else tuple(h) for m, h in enumerate(groups)])
            if found:
                return found
    if total > ORDERS_LIMIT or len(groups) == 1:
        return True if len(groups) == 1 else None
    for perms in itertools.product(*(itertools.permutations(g) for g in groups)):
        found = differs(perms)
        if found:
            return found
    return True


def _reaching_final(schedule: Schedule, events: list[list[Event]], suspects: set[int]) -> set[int]:
    """The suspect flows whose carried value may reach some rank's final value of its piece,
    under any order of same-instant landings (module docstring)."""
    flows = schedule.flows
    pieces = {flows[i].piece for i in suspects}
    live: set[int] = set()
    empty: frozenset[int] = frozenset()
    for piece in pieces:
        taint: dict[int, frozenset[int]] = {}
        carried: dict[int, frozenset[int]] = {}
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


def _flow(schedule: Schedule, grid: IntegerTimes, i: int) -> dict[str, Any]:
    f = schedule.flows[i]
    start, end = grid.to_fraction(grid.starts[i]), grid.to_fraction(grid.ends[i])
    return {"flow": i, "src": f.src, "dst": f.dst, "piece": f.piece, "op": f.op, "start": str(start),
            "end": str(end), "text": f"flows[{i}] {f.src}->{f.dst} piece {f.piece} {f.op} [{start}, {end})"}


def _text(value: Value) -> str:
    return " + ".join(f"x{r}" if c == 1 else f"{c}·x{r}" for r, c in value) or "0"


def _collision(schedule: Schedule, grid: IntegerTimes, key: tuple[int, int, int], members: list[int],
               witness: Witness | None) -> dict[str, Any]:
    rank, piece, _ = key
    fl = [_flow(schedule, grid, i) for i in members]
    head = (f"{'; '.join(f['text'] for f in fl)} all land on rank {rank}'s piece {piece} at {fl[0]['end']} "
            f"and do not commute (not all additions, not copies of one value)")
    why = ("causality demands the same final values under every order of landings the schedule's times "
           "call simultaneous, so that a proved schedule's values rest on its times and not on optcc's "
           "tie-break")
    out = {"property": "causality", "kind": "same-instant landings that do not commute", "rank": rank,
           "piece": piece, "flows": fl}
    if witness is None:
        out["message"] = (f"{head}; more than {ORDERS_LIMIT} orders of this piece's ties, none of which "
                          f"reorders one group alone to change a final value, and the taint analysis cannot "
                          f"exclude a combination: refused conservatively ({why})")
        return out
    applied, posting, victim, value, runners = witness
    out["witness"] = {"applied": applied, "posting": posting, "rank": victim, "value": _text(value),
                      "runners_value": _text(runners)}
    out["message"] = (f"{head}. optcc's executors apply them in posting order (flows "
                      f"{', '.join(map(str, posting))}), where rank {victim} ends piece {piece} with "
                      f"{_text(runners)}; applied as flows {', '.join(map(str, applied))}, rank {victim} ends "
                      f"it with {_text(value)}: {why}")
    return out
