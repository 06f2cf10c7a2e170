"""The value abstraction of the parametric sum proofs: an arc of ring inputs plus a straggler bit.

Val(lo, len, sb) stands for Σ_{x = lo .. lo+len−1 (mod N)} input_x + sb · input_S over a ring of
N nodes (ring: all p ranks, sb = 0; OptCC: the H healthy ranks, S the straggler). `add` is only
used under `add_ok` (contiguous arcs that do not overlap, at most one straggler term), which
verifier.parametric.lemmas proves is exactly coefficient-wise addition.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import z3

if TYPE_CHECKING:
    from optcc.algorithms.families import Arith, Term
    from verifier.parametric.arith import Z3Term


class Val(NamedTuple):
    lo: Any
    len: Any
    sb: Any


def well_formed(v: Val, N: Term) -> list[Z3Term]:
    return [v.lo >= 0, v.lo < N, v.len >= 0, v.len <= N, v.sb >= 0, v.sb <= 1]


def coef(A: Arith, v: Val, x: Term, N: Term) -> Z3Term:
    """Coefficient of healthy input x (0 ≤ x < N) in v."""
    return z3.If(A.mod(x - v.lo, N, -1, 0) < v.len, 1, 0)


def _joins(A: Arith, a: Val, b: Val, N: Term) -> Z3Term:
    return A.mod(a.lo + a.len, N, 0, 1) == b.lo


def add_ok(A: Arith, a: Val, b: Val, N: Term) -> Z3Term:
    return z3.And(a.len + b.len <= N, a.sb + b.sb <= 1,
                  z3.Or(a.len == 0, b.len == 0, _joins(A, a, b, N), _joins(A, b, a, N)))


def add(A: Arith, a: Val, b: Val, N: Term) -> Val:
    lo = z3.If(a.len == 0, b.lo, z3.If(b.len == 0, a.lo, z3.If(_joins(A, a, b, N), a.lo, b.lo)))
    return Val(lo, a.len + b.len, a.sb + b.sb)


def same(a: Val, b: Val, N: Term) -> Z3Term:
    return z3.And(a.len == b.len, a.sb == b.sb, z3.Or(a.len == 0, a.len == N, a.lo == b.lo))


def full(N: Term, sb: Term) -> Val:
    return Val(0, N, sb)


def unit(x: Term) -> Val:
    return Val(x, 1, 0)


def ite(c: Term, a: Val, b: Val) -> Val:
    return Val(z3.If(c, a.lo, b.lo), z3.If(c, a.len, b.len), z3.If(c, a.sb, b.sb))
