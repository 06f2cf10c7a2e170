"""All-p obligations for the ring AllReduce families (optcc.algorithms.ring.families).

Quantified range: p ≥ 2, k ≥ 1, real ℓ ≥ 1, straggler rank 0 ≤ s < p (ℓ = 1: no straggler).
Sum invariant, piece (σ, c), chain position j (2p−2 flows: reduce-scatter hops j = 0..p−2 from
node c+j, then all-gather hops u = j−(p−1) from node c−1+u): with d = (v − c) mod p and
e = (v − c + 1) mod p, node v holds
    j ≤ p−1:  inputs c..c+d   if d ≤ j, else its own input v
    j ≥ p−1:  the full sum    if e ≤ j−(p−1), else inputs c..c+d.
Finish (derived: ring docstring, ℓ·T0): the last box ends at slot k·2(p−1), i.e. time
k·2(p−1)·ℓ/(kp) = 2(p−1)ℓ/p; Theorem 1 (paper) bounds it below by max(ℓ, 2ℓ(p−1)/(ℓ(p−1)+1)).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import z3

from optcc.algorithms.families import Params
from optcc.algorithms.ring import families as R
from verifier.parametric import values as V
from verifier.parametric.arith import Z3Arith
from verifier.parametric import generic as G
from verifier.parametric.generic import Chain, Gap, GeneratorModel, Segment, fresh_index
from verifier.parametric.obligations import Obligation

if TYPE_CHECKING:
    from optcc.algorithms.families import Arith, Family, Term
    from verifier.parametric.arith import Z3Term

FOR_ALL = "all p ≥ 2, k ≥ 1, real ℓ ≥ 1, straggler rank 0 ≤ s < p"


def params() -> tuple[Params, list[Z3Term]]:
    p, k, s = z3.Ints("p k s")
    ell = z3.Real("ell")
    return Params(p, k, ell, s), [p >= 2, k >= 1, ell >= 1, s >= 0, s < p]


def generator_model(families: tuple[Family, ...] = R.FAMILIES) -> GeneratorModel:
    P, assume = params()
    rs, ag = (f.name for f in families)
    # A value's reduce-scatter write and its all-gather write are p − 1 slots apart at least
    # (derived: read off the flows on p = 3–10, k = 1–4, seven ℓ; proved for every p, k, ℓ and
    # attained at every p, so p slots is refuted).
    gap = Gap("p − 1", lambda P: P.p - 1)
    return GeneratorModel("ring", P, assume, tuple(families), lambda P: P.p,
                          lambda A, P, key: z3.And(key[0] >= 0, key[0] < P.k, key[1] >= 0, key[1] < P.p),
                          gaps={(rs, ag, "two writes at once"): gap, (ag, rs, "two writes at once"): gap})


def _value(A: Arith, P: Params, key: tuple[Term, Term], v: Term, j: Term) -> V.Val:
    sigma, c = key
    p = P.p
    d = A.mod(v - c, p, -1, 0)
    e = A.mod(v - c + 1, p, -1, 1)
    partial = V.Val(c, d + 1, 0)
    rs = V.ite(d <= j, partial, V.unit(v))
    ag = V.ite(e <= j - (p - 1), V.full(p, 0), partial)
    return V.ite(j <= p - 1, rs, ag)


def chain(families: tuple[Family, ...] = R.FAMILIES) -> Chain:
    rs, ag = families
    sigma, c = z3.Ints("sigma_piece c_piece")

    def pos(fam: Family, A: Arith, P: Params, idx: tuple[Term, ...]) -> Term:
        return idx[1] if fam is rs else P.p - 1 + idx[1]
    return Chain(
        "ring piece (σ, c)", (sigma, c),
        lambda A, P, key: z3.And(key[0] >= 0, key[0] < P.k, key[1] >= 0, key[1] < P.p),
        lambda P: P.p, lambda P: 2 * P.p - 2,
        [Segment(rs, lambda P, key: 0, lambda P, key: P.p - 2,
                 lambda A, P, key, j: (key[0], j, A.mod(key[1] + j, P.p, 0, 1))),
         Segment(ag, lambda P, key: P.p - 1, lambda P, key: 2 * P.p - 3,
                 lambda A, P, key, j: (key[0], j - (P.p - 1), A.mod(key[1] - 1 + j - (P.p - 1), P.p, -1, 1)))],
        pos, _value, lambda P, v: V.unit(v), lambda P: V.full(P.p, 0))


def closed_form(p: Term, ell: Term) -> Term:
    """Derived (ring docstring): the ring's finish time, ℓ·T0 = 2(p−1)ℓ/p (units n/B)."""
    return 2 * (p - 1) * ell / p


def lower_bound(p: Term, ell: Term) -> tuple[Term, Term]:
    """Theorem 1 (paper), as bounds.closed_form.single_straggler_terms (tested equal on a grid)."""
    return ell, 2 * ell * (p - 1) / (ell * (p - 1) + 1)


# Each family's last slot (derived: segment σ's reduce-scatter owns boxes σ·2(p−1) + t, t ≤ p−2,
# its all-gather the p−1 after; a hop at the straggler lasts the whole box), reached by the last
# segment's last hop at the straggler: the bound is tight, so its one-slot-stronger control fails.
def _rs_end(A: Z3Arith, P: Params) -> Term:
    return A.mul(P.k, 2 * P.p - 2) - (P.p - 1)


def _ag_end(A: Z3Arith, P: Params) -> Term:
    return A.mul(P.k, 2 * P.p - 2)


ENDS = {"ring.reduce_scatter": ("k·2(p−1) − (p−1)", _rs_end), "ring.all_gather": ("k·2(p−1)", _ag_end)}


def finish(C: GeneratorModel) -> list[Obligation]:
    P = C.P
    out: list[Obligation] = []
    for fam in C.families:
        A = Z3Arith()
        idx = fresh_index(fam, "1")
        T = fam.terms(A, P, *idx)
        text, end = ENDS[fam.name]
        F = end(A, P)                     # before product_lemmas: its product's lemmas with the rest
        out.append(Obligation("finish", f"{fam.name} ends by slot {text}",
                              C.assume + fam.domain(A, P, *idx) + A.product_lemmas(),
                              T.box + T.offset + T.dur <= F, list(A.side), P, [(fam, idx)]))
    A = Z3Arith()
    ag = C.families[1]
    idx = (P.k - 1, P.p - 2, P.s)
    T = ag.terms(A, P, *idx)
    F = _ag_end(A, P)
    out.append(Obligation("finish", "the straggler's last all-gather hop ends at slot k·2(p−1)",
                          C.assume + A.product_lemmas(),
                          z3.And(*ag.domain(A, P, *idx), T.box + T.offset + T.dur == F),
                          list(A.side), P, [(ag, idx)]))
    p, k = z3.ToReal(P.p), z3.ToReal(P.k)
    step = unit(P)
    out.append(Obligation("finish", "slot k·2(p−1) is time 2(p−1)ℓ/p; slots and pieces positive, pieces add to 1",
                          C.assume, z3.And(k * (2 * p - 2) * step == closed_form(p, P.ell), step > 0,
                                           shard_size(P) > 0, k * p * shard_size(P) == 1), [], P))
    out += G.durations(C, lambda A, P: (R.slot(A, P),), lambda A, P, key: R.shard_size(A, P), R.rate)
    return out


def bound(C: GeneratorModel) -> list[Obligation]:
    P = C.P
    p = z3.ToReal(P.p)
    T = closed_form(p, P.ell)
    cut, volume = lower_bound(p, P.ell)
    return [Obligation("bound", "2(p−1)ℓ/p ≥ max(ℓ, 2ℓ(p−1)/(ℓ(p−1)+1)) (Theorem 1)", C.assume,
                       z3.And(T >= cut, T >= volume), [], P)]


def unit(P: Params) -> Term:
    """One slot in time (n/B): the families' slot (a shard at the slowest rate ℓ), as Z3 terms."""
    return R.slot(Z3Arith(), P)


def shard_size(P: Params) -> Term:
    """The families' shard size, as a Z3 term."""
    return R.shard_size(Z3Arith(), P)


def piece_of(P: Params, key: tuple[Term, ...]) -> Term:
    """The families' piece map (σ, c) ↦ index, as Z3 terms (the lemma states it is a bijection)."""
    return R.piece_index(Z3Arith(), P, key)


def spans(P: Params) -> dict[str, list[tuple[Any, Any]]]:
    """Index ranges (inclusive) the instance check enumerates; `span_lemmas` proves the domains lie inside."""
    rng = [(0, P.k - 1), (0, P.p - 2), (0, P.p - 1)]
    return {"ring.reduce_scatter": rng, "ring.all_gather": rng}


def span_lemmas(C: GeneratorModel) -> list[Obligation]:
    out: list[Obligation] = []
    for fam in C.families:
        A = Z3Arith()
        idx = fresh_index(fam, "1")
        rng = spans(C.P).get(fam.name)
        goal = z3.BoolVal(False) if rng is None else z3.And(
            *[z3.And(i >= lo, i <= hi) for i, (lo, hi) in zip(idx, rng)])
        out.append(Obligation("well_formed", f"{fam.name}: every domain point lies in the enumerated span",
                              C.assume + fam.domain(A, C.P, *idx) + A.product_lemmas(), goal,
                              list(A.side), C.P, [(fam, idx)]))
    return out


def piece_lemma() -> Obligation:
    """Piece (σ, c) ↦ σ·p + c (piece_of) is injective and in range: equal keys are equal pieces."""
    p, k, s1, s2, c1, c2 = z3.Ints("p k s1 s2 c1 c2")
    P = Params(p, k, None, None)
    a, b = piece_of(P, (s1, c1)), piece_of(P, (s2, c2))
    return Obligation("lemmas", "σ·p + c determines (σ, c) and lies in 0..kp−1 when 0 ≤ σ < k, 0 ≤ c < p",
                      [p >= 1, k >= 1, s1 >= 0, s1 < k, s2 >= 0, s2 < k, c1 >= 0, c1 < p, c2 >= 0, c2 < p],
                      z3.And(z3.Implies(a == b, z3.And(s1 == s2, c1 == c2)), a >= 0, a < k * p))
