"""The ring's rank-local enumeration (optcc.algorithms.families.local): nodes are ranks; hop
(σ, t, i) sends i -> i+1 mod p, so a rank is the source of position i = r and the destination
of i = r − 1 mod p."""
from __future__ import annotations

from fractions import Fraction

from optcc.algorithms.families import INT, Arith, Params, Term
from optcc.algorithms.families.arrays import NP
from optcc.algorithms.families.local_form import Branch, LocalForm, always
from optcc.algorithms.ring import families as R


def form() -> LocalForm:
    """The ring's rank-local enumeration."""

    def src_i(A: Arith, P: Params, r: Term, sigma: Term, t: Term) -> tuple[Term, ...]:
        return (sigma, t, r)

    def dst_i(A: Arith, P: Params, r: Term, sigma: Term, t: Term) -> tuple[Term, ...]:
        return (sigma, t, A.mod(r - 1, P.p, -1, 0))

    branches = tuple(Branch(fam, end, 2, fn, always) for fam in R.FAMILIES
                     for end, fn in (("src", src_i), ("dst", dst_i)))

    def ranges(P: Params) -> dict[str, tuple[tuple[int, int], ...]]:
        span = ((0, P.k - 1), (0, P.p - 2), (0, P.p - 1))
        return {fam.name: span for fam in R.FAMILIES}

    def clock(P: Params) -> tuple[tuple[Fraction, ...], tuple[Fraction, ...]]:
        return (Fraction(0),), (R.slot(INT, P),)

    return LocalForm("ring", R.FAMILIES, branches, ranges, lambda P: P.p, lambda P, r: r,
                     lambda P, n: n, lambda P, key: R.piece_index(NP, P, key), clock,
                     R.piece_sizes, lambda P: 2 * (P.p - 1) * P.k * R.slot(INT, P), lambda P: Params(P.p, P.k, 1, -1))
