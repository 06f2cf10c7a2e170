"""Property "streaming_order" of prove-all (ring, optcc): the deadlock-freedom part (D) of the
order argument in verifier.streaming_local, machine-checked.

A worker of a generated schedule checks only its own program (conditions L1-L5 of
verifier.streaming_local). D for the whole program follows if every edge of the progress graph
(verifier.streaming_check.progress_edges: its five kinds) strictly increases one key, the event
key (κ, e) with κ = (time, class, K), K = (start, src, dst, piece), e = 0 for an op's start and
1 for a post's completion, compared lexicographically. Proved here in Z3, over unbounded
integers, one obligation per step:
  - the lexicographic order on event keys is irreflexive and transitive (a strict order);
  - dependency: an op waits only for an event of an earlier op (L2), the ops strictly sorted by κ;
  - post: a post's completion after its own start;
  - peer order: consecutive posts with one peer, K strictly increasing (L3), each a post at its
    flow's start (L1: time = K's start, class 3);
  - the two cross edges: a flow's send and receive have the same κ at both ends (L1; both ends
    enumerate the flow with the same terms, property `local`), a completion after the other's start.
Controls (each must be refuted, with a counterexample): the dependency step without the sort,
the peer step with a post away from its flow's start, the cross step with ends that disagree on K.
The edge obligations are built from verifier.streaming_check's EdgeKind table, the one
progress_edges forms every edge from (which event waits for which, and how the two ops relate),
so a change to the checker's edges changes these statements. Argued, not machine-checked: a
strictly sorted list has every earlier element below every later one (transitivity, proved,
applied along the list); a relation that strictly increases a strict order on a finite set has
no cycle; check_streaming builds its graph from progress_edges, and the κ of
tests/verifier/test_streaming_order.py is L1-L5's.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import z3

from verifier.parametric.obligations import Obligation
from verifier.streaming_check import EDGE_KIND

if TYPE_CHECKING:
    from verifier.parametric.arith import Z3Term
    from verifier.streaming_check import EdgeKind

PROPERTY = "streaming_order"
SEND_CLASS = 3                 # κ's class of a post (verifier.streaming_local)


def lex_less(a: Sequence[Z3Term], b: Sequence[Z3Term]) -> Z3Term:
    """a < b lexicographically (tuples of z3 Int terms of equal length)."""
    if not a:
        return z3.BoolVal(False)
    return z3.Or(a[0] < b[0], z3.And(a[0] == b[0], lex_less(a[1:], b[1:])))


def _kappa(name: str) -> tuple[Z3Term, ...]:
    t, c, k0, k1, k2, k3 = z3.Ints(" ".join(f"{name}_{x}" for x in ("time", "class", "Kstart", "Ksrc", "Kdst",
                                                                      "Kpiece")))
    return (t, c, k0, k1, k2, k3)


def _event(kappa: tuple[Z3Term, ...], e: Z3Term) -> tuple[Z3Term, ...]:
    return (*kappa, e)


def _bit(e: Z3Term) -> Z3Term:
    return z3.Or(e == 0, e == 1)


def _ob(name: str, assumptions: Iterable[Z3Term], goal: Z3Term) -> Obligation:
    return Obligation(PROPERTY, name, list(assumptions), goal)


def obligations(controls: bool = False) -> list[Obligation]:
    """The steps above (controls=False), or the false controls (controls=True)."""
    a, b, c = _kappa("a"), _kappa("b"), _kappa("c")
    ea, eb, ec = z3.Ints("e_a e_b e_c")
    A, B, C = _event(a, ea), _event(b, eb), _event(c, ec)
    post_a = [a[1] == SEND_CLASS, a[0] == a[2]]           # a post at its flow's start (L1)
    post_b = [b[1] == SEND_CLASS, b[0] == b[2]]
    if controls:
        return [
            _ob("control: a dependency on an earlier op without the κ sort", [_bit(ea)],
                lex_less(A, _event(b, 0))),
            _ob("control: consecutive posts in K order, the first away from its flow's start",
                [post_b[0], a[1] == SEND_CLASS, lex_less(a[2:], b[2:])], lex_less(_event(a, 1), _event(b, 1))),
            _ob("control: a send and its receive whose ends disagree on K",
                [a[0] == b[0], a[1] == b[1], *post_a], lex_less(_event(b, 0), _event(a, 1))),
        ]
    return [
        _ob("lex order on event keys is irreflexive", [], z3.Not(lex_less(A, A))),
        _ob("lex order on event keys is transitive", [lex_less(A, B), lex_less(B, C)], lex_less(A, C)),
    ] + [edge_obligation(kind) for kind in EDGE_KIND.values()]


_E = {"S": 0, "C": 1}


def edge_obligation(kind: EdgeKind) -> Obligation:
    """The waited-for event's key is below the waiting event's, for one EdgeKind of the checker
    (verifier.streaming_check), stated from its fields: op b waits (event `kind.waits`) for op a
    (event `kind.on`, or any event for a dependency), related by `kind.relation` under L1-L3."""
    a, b = _kappa("a"), _kappa("b")
    ea = z3.Int("e_a")
    post_a = [a[1] == SEND_CLASS, a[0] == a[2]]           # a post at its flow's start (L1)
    post_b = [b[1] == SEND_CLASS, b[0] == b[2]]
    relation = {
        "earlier op": [lex_less(a, b)],                                   # L2: ops strictly sorted by κ
        "itself": [*post_a, *[x == y for x, y in zip(a, b)]],
        "previous post with the peer": [*post_a, *post_b, lex_less(a[2:], b[2:])],    # L3
        "the flow's other end": [*post_a, *post_b, *[x == y for x, y in zip(a, b)]],  # L1, property local
    }.get(kind.relation)
    if relation is None:
        return _ob(f"{kind.name}: relation {kind.relation!r} has no statement", [], z3.BoolVal(False))
    if kind.on is None:
        assume, waited = [_bit(ea)], _event(a, ea)
    else:
        assume, waited = [], _event(a, _E[kind.on])
    return _ob(f"{kind.name}: event {kind.on or 'any'} of {kind.relation} before this op's {kind.waits}",
               assume + relation, lex_less(waited, _event(b, _E[kind.waits])))
