"""Obligation builders shared by every construction: well-formedness, port exclusivity,
causality and the sum property's chain invariant, all over symbolic parameters.

A construction (verifier.parametric.ring, ...) supplies its families, its parameter
assumptions and, per piece kind, a `Chain`: the flows that move the piece, in order, with the
value every node holds after the first j of them (the inductive invariant).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import z3

from verifier.parametric import values as V
from verifier.parametric.arith import Z3Arith
from verifier.parametric.obligations import Obligation

if TYPE_CHECKING:
    from optcc.algorithms.families import Family, Term, Terms
    from verifier.parametric.arith import Z3Term


def fresh_index(fam: Family, tag: str) -> tuple[Z3Term, ...]:
    return tuple(z3.Int(f"{name}_{tag}") for name in fam.index)


def _box_end(T: Terms) -> Term:
    return T.box + T.box_len


@dataclass(frozen=True)
class Gap:
    """The least slots between two flows that never meet back to back (derived per construction,
    proved by the obligation that states it): `text` names it, `slots(P)` is its term."""
    text: str
    slots: Callable[..., Term]

    @staticmethod
    def const(n: int) -> Gap:
        return Gap(str(n), lambda P: n)

    def apart(self) -> str:
        """The obligation name's suffix: ", 1 slot apart", ", p − 1 slots apart"."""
        return f", {self.text} slot{'' if self.text == '1' else 's'} apart"


def _plus(x: Term, gap: Term) -> Term:
    """x + gap, no term added for a gap of 0 (a statement without a gap stays as it was)."""
    return x if isinstance(gap, int) and gap == 0 else x + gap


def disjoint(T1: Terms, T2: Terms, gap: Term = 0) -> Z3Term:
    """Slot boxes that cannot overlap in time: other phase, or integer intervals `gap` slots apart."""
    return z3.Or(T1.phase != T2.phase, _plus(_box_end(T1), gap) <= T2.box, _plus(_box_end(T2), gap) <= T1.box)


def before(T1: Terms, T2: Terms, gap: Term = 0) -> Z3Term:
    """Flow 1 lands before flow 2 starts, `gap` slots before in one phase (via
    verifier.parametric.lemmas.box_lemma)."""
    return z3.Or(T1.phase < T2.phase, z3.And(T1.phase == T2.phase, _plus(_box_end(T1), gap) <= T2.box))


def _across_phases(phase_relation: Z3Term) -> bool:
    """The two flows' phases alone decide the relation (constant phases: a prologue flow and a
    pipeline one). Such a pair gets no obligation of its own: its goal would be True as built.
    What orders it is proved once per family: well_formed's box ≥ 0, each family's finish bound
    in its phase and the phase origins (back to back)."""
    if isinstance(phase_relation, bool):
        return phase_relation
    return bool(z3.is_true(z3.simplify(phase_relation)))


def _eq_key(k1: Sequence[Term], k2: Sequence[Term]) -> Z3Term:
    if len(k1) != len(k2):
        return z3.BoolVal(False)
    return z3.simplify(z3.And(*[a == b for a, b in zip(k1, k2)]))


def _distinct(f1: Family, i1: Sequence[Term], f2: Family, i2: Sequence[Term]) -> Z3Term:
    if f1 is not f2:
        return z3.BoolVal(True)
    return z3.Or(*[a != b for a, b in zip(i1, i2)])


@dataclass
class GeneratorModel:
    """A proved generator's symbolic model: its parameters, their range and its flow families
    (verifier.parametric.ring / optcc / multi build one; `construction` elsewhere is a built
    Algorithm record of optcc.algorithms.registry)."""
    name: str
    P: Any                        # z3 Params (or the model's own NamedTuple: MultiParams, ServerParams)
    assume: list[Z3Term]          # parameter assumptions (the quantified range)
    families: tuple[Family, ...]
    nodes: Callable[..., Term]    # P -> number of nodes (flows' src/dst are nodes 0..nodes−1)
    piece_ok: Callable[..., Term]  # (A, P, key) -> condition: key is a piece of the schedule
    shared: frozenset[tuple[str, str]] = frozenset()   # family-name pairs that may share a box, one after the other
    # (family, family, relation) -> (text, P -> slots): a pair that never meets back to back is
    # stated with its least gap, so that the statement is tight (its control, one slot more, fails)
    gaps: Mapping[tuple[str, str, str], Gap] = field(default_factory=dict)


def well_formed(C: GeneratorModel) -> list[Obligation]:
    out: list[Obligation] = []
    for fam in C.families:
        A = Z3Arith()
        idx = fresh_index(fam, "1")
        T = fam.terms(A, C.P, *idx)
        n = C.nodes(C.P)
        goal = z3.And(T.src >= 0, T.src < n, T.dst >= 0, T.dst < n, T.src != T.dst,
                      C.piece_ok(A, C.P, T.piece), T.box >= 0, T.box_len >= 1, T.offset >= 0,
                      T.dur > 0, T.offset + T.dur <= T.box_len, T.phase >= 0)
        out.append(Obligation("well_formed", f"{fam.name}: nodes, piece, box in range",
                              C.assume + fam.domain(A, C.P, *idx) + A.product_lemmas(), goal,
                              list(A.side), C.P, [(fam, idx)]))
    return out


def _pair_obligations(C: GeneratorModel, prop: str, relation: Callable[[Terms, Terms], Z3Term], what: str,
                      need_distinct: bool) -> list[Obligation]:
    out: list[Obligation] = []
    fams = C.families
    for a, b in itertools.combinations_with_replacement(range(len(fams)), 2):
        for order in ((a, b),) if a == b else ((a, b), (b, a)):
            f1, f2 = fams[order[0]], fams[order[1]]
            if prop == "ports" and order != (a, b):
                continue                      # symmetric relations: one order suffices
            A = Z3Arith()
            i1, i2 = fresh_index(f1, "1"), fresh_index(f2, "2")
            T1, T2 = f1.terms(A, C.P, *i1), f2.terms(A, C.P, *i2)
            rel = relation(T1, T2)
            if z3.is_false(z3.simplify(rel)) or _across_phases(T1.phase != T2.phase):
                continue
            assume = C.assume + f1.domain(A, C.P, *i1) + f2.domain(A, C.P, *i2)
            premise = [rel, _distinct(f1, i1, f2, i2)] if need_distinct else [rel]
            name = f"{f1.name} vs {f2.name}: {what}"
            gap = C.gaps.get((f1.name, f2.name, what))
            goal = disjoint(T1, T2, 0 if gap is None else gap.slots(C.P))
            if gap is not None:
                name += gap.apart()
            if (f1.name, f2.name) in C.shared or (f2.name, f1.name) in C.shared:
                goal = z3.Or(goal, z3.And(T1.phase == T2.phase, T1.box == T2.box, z3.Or(
                    T1.offset + T1.dur <= T2.offset, T2.offset + T2.dur <= T1.offset)))
            out.append(Obligation(prop, name,
                                  assume + A.product_lemmas(), goal, list(A.side), C.P,
                                  [(f1, i1), (f2, i2)], premise))
    return out


def ports(C: GeneratorModel) -> list[Obligation]:
    """No two flows on one NIC direction (same sender, or same receiver) overlap."""
    return (_pair_obligations(C, "ports", lambda T1, T2: T1.src == T2.src, "one send port", True)
            + _pair_obligations(C, "ports", lambda T1, T2: T1.dst == T2.dst, "one receive port", True))


def causality(C: GeneratorModel) -> list[Obligation]:
    """No read of a value overlaps a write to it; no two writes to one value overlap."""
    def write_read(T1: Terms, T2: Terms) -> Z3Term:
        return z3.And(T1.dst == T2.src, _eq_key(T1.piece, T2.piece))

    def write_write(T1: Terms, T2: Terms) -> Z3Term:
        return z3.And(T1.dst == T2.dst, _eq_key(T1.piece, T2.piece))
    return (_pair_obligations(C, "causality", write_read, "read during a write", False)
            + _pair_obligations(C, "causality", write_write, "two writes at once", True))


def durations(C: GeneratorModel, units: Callable[..., Sequence[Term]], size_of: Callable[..., Term],
              rate: Callable[..., Term]) -> list[Obligation]:
    """Every family's duration in slots, times its phase's slot length (n/B), is its transfer time
    on the cluster: its piece's size times rate(src, dst). This ties the slot-unit statements of
    ports, causality and finish to the real clock the ranks run on (`units`, `size_of`, `rate`
    are the construction's own glue, the functions the enumeration evaluates)."""
    out: list[Obligation] = []
    for fam in C.families:
        A = Z3Arith()
        idx = fresh_index(fam, "1")
        T = fam.terms(A, C.P, *idx)
        unit = units(A, C.P)
        slot = unit[T.phase] if isinstance(T.phase, int) else z3.Sum(
            *[z3.If(T.phase == i, u, 0) for i, u in enumerate(unit)])
        goal = T.dur * slot == size_of(A, C.P, T.piece) * rate(A, C.P, T.src, T.dst)
        out.append(Obligation("duration", f"{fam.name}: its slots are its piece's transfer time",
                              C.assume + fam.domain(A, C.P, *idx) + A.product_definitions(), goal,
                              list(A.side), C.P, [(fam, idx)]))
    return out


@dataclass
class Segment:
    """Chain positions lo(P, key)..hi(P, key) (possibly empty) are flows of `fam` with indices
    idx(A, P, key, j)."""
    fam: Family
    lo: Callable[..., Term]
    hi: Callable[..., Term]
    idx: Callable[..., tuple[Term, ...]]


@dataclass
class Chain:
    """The flows that carry one piece kind, in order, and the invariant Val(node, j)."""
    name: str
    key: tuple[Z3Term, ...]       # z3 variables naming the piece
    key_ok: Callable[..., Term]   # (A, P, key) -> condition
    ring: Callable[..., Term]     # P -> N, the arc ring size of the values
    length: Callable[..., Term]   # P -> m
    segments: list[Segment]
    pos: Callable[..., Term]      # (fam, A, P, idx) -> chain position, or None: never touches it
    value: Callable[..., V.Val]   # (A, P, key, node, j) -> Val after the first j chain flows
    init: Callable[..., V.Val]    # (P, node) -> Val (the node's own input)
    final: Callable[..., V.Val]   # P -> Val (the full sum)
    # (family, family) -> slots: chain flows j1 < j2 of these families never meet back to back;
    # their order is stated with this least gap (tight: its control, one slot more, fails)
    gaps: Mapping[tuple[str, str], Gap] = field(default_factory=dict)


def sum_property(C: GeneratorModel, ch: Chain) -> list[Obligation]:
    P = C.P
    out: list[Obligation] = []
    node = z3.Int("node")
    n, N, m = C.nodes(P), ch.ring(P), ch.length(P)
    base = C.assume + [node >= 0, node < n]

    def ob(name: str, A: Z3Arith, assume: list[Z3Term], goal: Z3Term, flows: list[tuple[Family, tuple[Term, ...]]],
           premise: Sequence[Z3Term] = ()) -> None:
        kd = ch.key_ok(A, P, ch.key)
        out.append(Obligation("sum", f"{ch.name}: {name}", base + [kd] + assume + A.product_lemmas(),
                              goal, list(A.side), P, flows, list(premise)))

    A = Z3Arith()
    ob("init: node holds its input", A, [], V.same(ch.value(A, P, ch.key, node, 0), ch.init(P, node), N), [])
    A = Z3Arith()
    fin = ch.value(A, P, ch.key, node, m)
    ob("final: node holds the full sum", A, [], z3.And(*V.well_formed(fin, N), V.same(fin, ch.final(P), N)), [])
    j = z3.Int("j")
    for sg in ch.segments:
        A = Z3Arith()
        rng = [j >= sg.lo(P, ch.key), j <= sg.hi(P, ch.key)]
        idx = sg.idx(A, P, ch.key, j)
        T = sg.fam.terms(A, P, *idx)
        pos = ch.pos(sg.fam, A, P, idx)
        ob(f"{sg.fam.name} is chain flow j", A, rng,
           z3.And(*sg.fam.domain(A, P, *idx), _eq_key(T.piece, ch.key), pos == j, j >= 0, j < m),
           [(sg.fam, idx)])
        A = Z3Arith()
        idx = sg.idx(A, P, ch.key, j)
        T = sg.fam.terms(A, P, *idx)
        a, b = ch.value(A, P, ch.key, T.src, j), ch.value(A, P, ch.key, T.dst, j)
        new_dst = V.add(A, a, b, N) if sg.fam.op == "add" else a
        here, nxt = ch.value(A, P, ch.key, node, j), ch.value(A, P, ch.key, node, j + 1)
        step = z3.And(*V.well_formed(here, N), *V.well_formed(a, N), *V.well_formed(b, N),
                      V.add_ok(A, a, b, N) if sg.fam.op == "add" else z3.BoolVal(True),
                      z3.If(node == T.dst, V.same(nxt, new_dst, N), V.same(nxt, here, N)))
        ob(f"{sg.fam.name} step keeps the invariant", A, rng, step, [(sg.fam, idx)])
    for fam in C.families:                              # coverage
        A = Z3Arith()
        idx = fresh_index(fam, "1")
        T = fam.terms(A, P, *idx)
        touches = _eq_key(T.piece, ch.key)
        if z3.is_false(touches):
            continue
        pos = ch.pos(fam, A, P, idx)
        mine = [sg for sg in ch.segments if sg.fam is fam]
        goal = z3.Or(*[z3.And(pos >= sg.lo(P, ch.key), pos <= sg.hi(P, ch.key),
                              *[x == y for x, y in zip(idx, sg.idx(A, P, ch.key, pos))]) for sg in mine]) \
            if mine else z3.BoolVal(False)
        ob(f"coverage: every {fam.name} flow on the piece is its chain flow", A,
           fam.domain(A, P, *idx), goal, [(fam, idx)], [touches])
    j1, j2 = z3.Ints("j1 j2")
    for s1, s2 in itertools.product(ch.segments, repeat=2):   # order along the chain
        A = Z3Arith()
        i1, i2 = s1.idx(A, P, ch.key, j1), s2.idx(A, P, ch.key, j2)
        T1, T2 = s1.fam.terms(A, P, *i1), s2.fam.terms(A, P, *i2)
        if _across_phases(T1.phase < T2.phase):
            continue
        gap = ch.gaps.get((s1.fam.name, s2.fam.name))
        ob(f"order: {s1.fam.name} before a later {s2.fam.name}{'' if gap is None else gap.apart()}", A, [],
           before(T1, T2, 0 if gap is None else gap.slots(P)),
           [(s1.fam, i1), (s2.fam, i2)],
           [j1 >= s1.lo(P, ch.key), j1 <= s1.hi(P, ch.key), j2 >= s2.lo(P, ch.key),
            j2 <= s2.hi(P, ch.key), j1 < j2])
    return out
