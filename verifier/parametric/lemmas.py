"""Lemmas proved once, with Z3's nonlinear arithmetic, that the linear obligations instantiate.

- products: the facts Z3Arith.product_lemmas instantiates for its fresh product integers.
- boxes: integer slot boxes that do not overlap give time intervals that do not overlap.
- arcs: the value abstraction of verifier.parametric.values (an arc of ring inputs plus a
  straggler bit) means what it says: adding two arcs under `add_ok` is adding coefficients.
"""
from __future__ import annotations

import z3

from verifier.parametric.arith import SPREAD, Z3Arith
from verifier.parametric.obligations import Obligation
from verifier.parametric import values as V


def product_lemmas() -> list[Obligation]:
    a, a1, a2, b = z3.Ints("a a1 a2 b")
    return [
        Obligation("lemmas", "a, b ≥ 0 ⇒ a·b ≥ 0", [a >= 0, b >= 0], a * b >= 0),
        Obligation("lemmas", "a ≥ 1, b ≥ 0 ⇒ a·b ≥ b", [a >= 1, b >= 0], a * b >= b),
        Obligation("lemmas", "a = 0 ⇒ a·b = 0; a = 1 ⇒ a·b = b", [],
                   z3.And(z3.Implies(a == 0, a * b == 0), z3.Implies(a == 1, a * b == b))),
        Obligation("lemmas", f"b ≥ 0, a1 + {SPREAD} ≤ a2 ⇒ a1·b + {SPREAD}·b ≤ a2·b",
                   [b >= 0, a1 + SPREAD <= a2], a1 * b + SPREAD * b <= a2 * b),
    ] + [Obligation("lemmas", f"a1 + {c} = a2 ⇒ a1·b + {c}·b = a2·b", [a1 + c == a2],
                    a1 * b + c * b == a2 * b) for c in range(1, SPREAD)]


def box_lemma() -> Obligation:
    """Slot unit u > 0; box 1 ends (b1 + o1 + d1 ≤ b1 + l1 ≤ b2) before box 2's flow starts."""
    b1, l1, b2 = z3.Ints("b1 l1 b2")
    o1, d1, o2, u = z3.Reals("o1 d1 o2 u")
    assume = [u > 0, o1 >= 0, o2 >= 0, d1 > 0, o1 + d1 <= l1, b1 + l1 <= b2]
    return Obligation("lemmas", "disjoint slot boxes ⇒ disjoint time intervals", assume,
                      (b1 + o1 + d1) * u <= (b2 + o2) * u)


def arc_lemmas() -> list[Obligation]:
    """coef(a ⊕ b, x) = coef(a, x) + coef(b, x) for every rank x, whenever add_ok(a, b); equal
    values have equal coefficients; `full` is the sum of every input; `unit(x)` is input x."""
    A = Z3Arith()
    N, x, y = z3.Ints("N x y")
    a = V.Val(*z3.Ints("alo alen asb"))
    b = V.Val(*z3.Ints("blo blen bsb"))
    dom = [N >= 1, x >= 0, x < N, y >= 0, y < N] + V.well_formed(a, N) + V.well_formed(b, N)
    full_ok = V.coef(A, V.full(N, 1), x, N) == 1
    unit_ok = V.coef(A, V.unit(y), x, N) == z3.If(x == y, 1, 0)
    c = V.add(A, a, b, N)
    out = [
        Obligation("lemmas", "arc add is coefficient add", dom + [V.add_ok(A, a, b, N)],
                   z3.And(V.coef(A, c, x, N) == V.coef(A, a, x, N) + V.coef(A, b, x, N),
                          c.sb == a.sb + b.sb), side=A.side),
        Obligation("lemmas", "equal arcs have equal coefficients", dom + [V.same(a, b, N)],
                   z3.And(V.coef(A, a, x, N) == V.coef(A, b, x, N), a.sb == b.sb), side=A.side),
        Obligation("lemmas", "full and unit arcs", dom,
                   z3.And(full_ok, unit_ok), side=A.side),
    ]
    return out
