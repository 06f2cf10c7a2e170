"""The Z3 arithmetic namespace the flow families are evaluated in (see optcc.algorithms.families).

- mod(x, n, qlo, qhi): an if-then-else over the bounded quotient q ∈ [qlo, qhi] (linear for a
  symbolic n: q is a constant); the promise qlo·n ≤ x < (qhi+1)·n is recorded as a side
  condition that every obligation proves separately under its own assumptions.
- mul(a, b): a fresh integer v standing for a·b; `product_lemmas` returns the instances of the
  lemmas of verifier.parametric.lemmas (proved once, with real multiplication) that relate the
  products built in one obligation. This keeps every obligation in linear arithmetic.
"""
from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

import z3

if TYPE_CHECKING:
    from optcc.algorithms.families import Term

Z3Term = Any
"""A Z3 expression or sort (z3 ships no type information; the parametric proofs name its
objects by this alias so that they read apart from formula terms, `Term`)."""


SPREAD = 4      # products a·b, a'·b are related exactly for |a − a'| < SPREAD, by ≥ beyond


class Z3Arith:
    def __init__(self) -> None:
        self.side: list[Z3Term] = []          # range promises of mod, to prove under the assumptions
        self.products: list[tuple[Z3Term, Z3Term, Z3Term]] = []      # (a, b, v): v stands for a·b
        self.defs: list[Z3Term] = []          # definitions of fresh names (always satisfiable)
        self._fresh = itertools.count()

    def mod(self, x: Term, n: Term, qlo: int, qhi: int) -> Term:
        self.side.append(z3.And(x >= qlo * n, x < (qhi + 1) * n))
        expr = x - qhi * n
        for q in range(qhi - 1, qlo - 1, -1):
            expr = z3.If(x < (q + 1) * n, x - q * n, expr)
        return expr

    @staticmethod
    def ite(c: Term, a: Term, b: Term) -> Term:
        return z3.If(c, a, b)

    @staticmethod
    def And(*cs: Term) -> Term:
        return z3.And(*cs)

    @staticmethod
    def Or(*cs: Term) -> Term:
        return z3.Or(*cs)

    @staticmethod
    def Not(c: Term) -> Term:
        return z3.Not(c)

    def odd(self, x: Term) -> Term:
        q = z3.Int(f"half{next(self._fresh)}")
        self.defs.append(z3.Or(x == 2 * q, x == 2 * q + 1))    # defines q = x div 2
        return x == 2 * q + 1

    def mul(self, a: Term, b: Term) -> Term:
        if isinstance(a, int) and isinstance(b, int):
            return a * b
        if isinstance(a, int):
            a, b = b, a
        if isinstance(b, int):
            return a * b                 # linear already
        for a2, b2, v in self.products:
            if a2.eq(a) and b2.eq(b):
                return v
        v = z3.Int(f"prod{next(self._fresh)}")
        self.products.append((a, b, v))
        return v

    @staticmethod
    def real(x: Term) -> Term:
        if isinstance(x, int):
            return z3.RealVal(x)
        return z3.ToReal(x) if x.is_int() else x

    @staticmethod
    def div(a: Term, b: Term) -> Term:
        return z3.ToReal(a) / b if isinstance(a, z3.ArithRef) and a.is_int() else a / b

    def product_definitions(self) -> list[Z3Term]:
        """v = a·b for every product built: exact, nonlinear; for obligations that are nonlinear
        already (closed forms), where the linear lemmas do not determine a product."""
        return list(self.defs) + [v == a * b for a, b, v in self.products]

    def product_lemmas(self) -> list[Z3Term]:
        """Instances of the product lemmas for every product and pair of products on one factor,
        plus the definitions of fresh names (parities)."""
        out = list(self.defs)
        for a, b, v in self.products:
            out += [z3.Implies(z3.And(a >= 0, b >= 0), v >= 0), z3.Implies(a == 0, v == 0),
                    z3.Implies(a == 1, v == b), z3.Implies(z3.And(a >= 1, b >= 0), v >= b)]
        for (a1, b1, v1), (a2, b2, v2) in itertools.permutations(self.products, 2):
            if b1.eq(b2):
                out += [z3.Implies(a1 == a2, v1 == v2),
                        z3.Implies(z3.And(b1 >= 0, a1 + SPREAD <= a2), v1 + SPREAD * b1 <= v2)]
                out += [z3.Implies(a1 + c == a2, v1 + c * b1 == v2) for c in range(1, SPREAD)]
        return out


class Z3RealArith(Z3Arith):
    """Z3Arith with exact (nonlinear) multiplication instead of fresh product names: for the
    obligations that are nonlinear real arithmetic already (closed forms), where nlsat decides the
    products directly and a fresh integer name would make the query mixed integer–real."""

    def mul(self, a: Term, b: Term) -> Term:
        return a * b

