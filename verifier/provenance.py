"""Concrete symbolic run of one piece that remembers which flow produced every value.

Used only to explain a failure: the values are plain coefficient dicts over real rank ids,
and each carries the flow (or local op) that wrote it and the values it was made from.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from verifier.events import LAND, READ
from verifier.linear import add_scaled

if TYPE_CHECKING:
    from optcc.schedule import Schedule


@dataclass
class Value:
    coefs: dict[int, int]
    writer: tuple[str, int] | None = None         # ("flow", index) or ("local_op", index); None = the input
    time: int = 0                        # grid time the value was written
    parents: list[Value] = field(default_factory=list)
    overwritten: dict[int, int] | None = None     # a copy's target value before it was overwritten


def run_piece(schedule: Schedule, events: list[tuple[int, int, int]]) -> dict[int, Value]:
    """Final Value of every rank that touches the piece (ranks not listed keep their input)."""
    flows, ops = schedule.flows, schedule.local_ops
    values: dict[int, Value] = {}
    carried: dict[int, Value] = {}

    def get(rank: int) -> Value:
        v = values.get(rank)
        if v is None:
            v = values[rank] = Value({rank: 1})
        return v

    for t, phase, i in events:
        if phase == READ:
            carried[i] = get(flows[i].src)
        elif phase == LAND:
            f = flows[i]
            src = carried.pop(i)
            if f.op == "add":
                old = get(f.dst)
                values[f.dst] = Value(add_scaled(old.coefs, f.coef, src.coefs), ("flow", i), t, [old, src])
            else:
                old = get(f.dst)
                values[f.dst] = Value(dict(src.coefs), ("flow", i), t, [src], old.coefs)
        else:
            op = ops[i]
            old = get(op.rank)
            values[op.rank] = Value({r: op.coef * c for r, c in old.coefs.items()}, ("local_op", i), t, [old])
    return values


def first_wrong_write(final: Value, plain: bool, missing: Iterable[int] = ()) -> tuple[str, int] | None:
    """The earliest write in the value's history (its provenance DAG) that went wrong.

    Only for `plain` schedules (every add has coefficient +1, no local ops), where every
    correct intermediate value is a partial sum with coefficients in {0, 1}. "Went wrong" is
    either producing a coefficient outside {0, 1} (an input counted twice) or a copy that
    overwrote a value holding an input in `missing` with one lacking it (an input discarded).
    Returns the writer tuple or None (e.g. the fault is a flow that is absent).
    """
    if not plain:
        return None
    missing = set(missing)
    best: Value | None = None
    seen: set[int] = set()
    stack = [final]
    while stack:
        v = stack.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        bad = v.writer is not None and (
            any(c not in (0, 1) for c in v.coefs.values())
            or (v.overwritten is not None and any(r in v.overwritten and r not in v.coefs for r in missing)))
        if bad:
            if best is None or (v.time, v.writer) < (best.time, best.writer):
                best = v
        stack.extend(v.parents)
    return None if best is None else best.writer
