"""Property "deterministic": every rank ends with bitwise the same value of every piece.

torch.distributed.all_reduce promises results bitwise identical on all ranks. Over floats
that holds when every rank's final value of a piece comes from the same *summation tree*:
the same inputs combined by the same operations in the same order. We execute each piece
symbolically in the order the runners apply operations, the one order of every property
(verifier.events.piece_events: at one instant landings in posting order, then local ops,
then reads). The trees are hash-consed:

  leaf x_r                       rank r's input
  add(a, b)                      a + b      (coef 1; IEEE-754 addition is commutative, so
                                             the children are unordered: a+b ≡ b+a bitwise)
  axpy(a, c, b)                  a + c·b    (torch add_(b, alpha=c); ordered)
  scale(c, a)                    c·a        (a local op)

A copy moves the tree unchanged. The property holds iff, for every piece, all p ranks' final
trees are the same node. Associativity is NOT assumed: (x0+x1)+x2 and x0+(x1+x2) round
differently, so they are different trees. The check is linear in the number of events
(pieces equal up to renaming ranks share one run, as in the sum property).

Assumption (stated, not proved): one operation on equal operands gives equal bits on every
rank, i.e. all ranks run the same kernels on the same dtype (what NCCL and gloo assume too).

Public entry point: check_determinism(schedule, grid=None) -> (ok, counterexample | None).
It needs no Z3 and works for any Schedule (the MSCCL importer reuses it).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from verifier.events import label_ranks, piece_events, piece_signature
from verifier.linear import execute_signature

if TYPE_CHECKING:
    from collections.abc import Sequence

    from optcc.schedule import Schedule
    from optcc.timing import IntegerTimes

Node = tuple[Any, ...]           # (kind, ...): (LEAF, rank), (ADD, a, b), (AXPY, a, coef, b), (SCALE, coef, a)

LEAF, ADD, AXPY, SCALE = "x", "+", "axpy", "scale"


class TreeTable:
    """Interned summation trees: node id -> (kind, coef, child ids / rank)."""

    def __init__(self) -> None:
        self.ids: dict[Node, int] = {}
        self.nodes: list[Node] = []

    def node(self, key: Node) -> int:
        i = self.ids.get(key)
        if i is None:
            i = self.ids[key] = len(self.nodes)
            self.nodes.append(key)
        return i

    def leaf(self, rank: int) -> int:
        return self.node((LEAF, rank))

    unit = leaf                       # the interface verifier.linear.execute_signature runs on


    def add(self, old: int, coef: int, src: int) -> int:
        if coef == 1:
            a, b = (old, src) if old <= src else (src, old)
            return self.node((ADD, a, b))
        return self.node((AXPY, old, coef, src))

    def scale(self, a: int, coef: int) -> int:
        return self.node((SCALE, coef, a))

    def render(self, i: int, names: Sequence[int] | None = None, limit: int = 400) -> str:
        """The tree as an expression, e.g. '((x0 + x1) + x2)', cut at `limit` characters."""
        out: list[str] = []
        stack: list[int | str] = [i]
        size = 0
        while stack and size <= limit:
            item = stack.pop()
            if isinstance(item, str):
                out.append(item)
                size += len(item)
                continue
            n = self.nodes[item]
            if n[0] == LEAF:
                text = f"x{n[1] if names is None else names[n[1]]}"
                out.append(text)
                size += len(text)
            elif n[0] == ADD:                       # display: composite operand first, leaves by rank
                left, right = sorted(n[1:], key=lambda c: (self.nodes[c][0] == LEAF, self._name(c, names)))
                stack.extend([")", right, " + ", left, "("])
            elif n[0] == AXPY:
                stack.extend([")", n[3], f" + {n[2]}·", n[1], "("])
            else:
                stack.extend([")", n[2], f"{n[1]}·("])
        text = "".join(out)
        return text if not stack else text[:limit] + " …"


    def _name(self, i: int, names: Sequence[int] | None) -> int:
        n = self.nodes[i]
        return (n[1] if names is None else names[n[1]]) if n[0] == LEAF else i


def execute_trees(signature: tuple[tuple[int, ...], ...], table: TreeTable) -> dict[int, int]:
    """Run a piece signature (verifier.events.piece_signature); final tree id per rank label."""
    return execute_signature(signature, table)


def runner_events(schedule: Schedule, grid: IntegerTimes) -> list[list[tuple[int, int, int]]]:
    """Per piece, events (time, phase, index) in the runners' order: verifier.events.piece_events."""
    return piece_events(schedule, grid)


def check_determinism(schedule: Schedule, grid: IntegerTimes | None = None) -> tuple[bool, dict[str, Any] | None]:
    """Return (ok, counterexample or None); see the module docstring."""
    if grid is None:
        from optcc.timing import IntegerTimes
        grid = IntegerTimes(schedule)
    events = runner_events(schedule, grid)
    p = schedule.cluster.p
    table = TreeTable()
    seen: dict[tuple[tuple[int, ...], ...], bool] = {}
    for piece, ev in enumerate(events):
        sig = piece_signature(schedule, ev)
        ok = seen.get(sig)
        if ok is None:
            finals = execute_trees(sig, table)
            ok = seen[sig] = len(finals) == p and len(set(finals.values())) == 1
        if not ok:
            return False, _counterexample(schedule, piece, ev, p)
    return True, None


def _counterexample(schedule: Schedule, piece: int, events: list[tuple[int, int, int]], p: int) -> dict[str, Any]:
    table = TreeTable()
    names = label_ranks(schedule, events)
    finals = execute_trees(piece_signature(schedule, events), table)
    by_rank = {names[label]: tree for label, tree in finals.items()}
    for r in range(p):
        if r not in by_rank:                           # never touched: keeps its input x_r
            names.append(r)
            by_rank[r] = table.leaf(len(names) - 1)
    groups: dict[int, list[int]] = {}
    for r in range(p):
        groups.setdefault(by_rank[r], []).append(r)
    (ta, ra), (tb, rb) = list(groups.items())[:2]
    a, b = ra[0], rb[0]
    ea, eb = table.render(ta, names), table.render(tb, names)
    return {"property": "deterministic", "piece": piece, "ranks": [a, b],
            "trees": {str(a): ea, str(b): eb}, "distinct_trees": len(groups),
            "message": f"piece {piece}: rank {a} computes {ea} but rank {b} computes {eb}; different "
                       f"summation trees round differently, so the ranks may end with different bits"}
