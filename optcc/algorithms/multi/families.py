"""The periodic core of multi-straggler OptCC (m ≥ 3) as four flow families.

Derived from optcc.algorithms.multi.build (its docstring has the construction): H healthy ring
positions 0..H−1 (cluster.healthy in order) and stragglers i = 0..m−1 as nodes H+i (sorted by
ℓ descending, then rank); period L = 2(H + m − 1) slots of λ; straggler i serves ring link a
in window a + i. Job (σ, a): raws from every straggler (in link a−1's rest block of period σ),
reduce-scatter hops j = 1..H−1, full sum F to every straggler (window a + i of period σ+1),
all-gather hops j = 0..H−2 for σ ≤ k−2. Segment k−1's all-gather (the greedy drain) and the
fill pieces are not families: they are placed by search (`_drain_slots`, `_chain_fill_plan`).
Durations are not modelled here (a box is the flow's slot budget, `dur` = box length).
"""
from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any, NamedTuple

from optcc.algorithms.families import Arith, Family, Term, Terms

if TYPE_CHECKING:
    from optcc.schedule import Flow


class MultiParams(NamedTuple):
    H: Any      # healthy GPUs
    m: Any      # stragglers
    k: Any      # segments


def _L(P: MultiParams) -> Term:
    return 2 * (P.H + P.m - 1)


def _wrap(A: Arith, P: MultiParams, a: Term, j: Term) -> Term:
    """2m − 2 extra slots once hop j of job a has crossed the closing link H−1 → 0."""
    return A.ite(a + j >= P.H, 2 * P.m - 2, 0)


def _job(A: Arith, P: MultiParams, sigma: Term, a: Term, i: Term) -> Term:
    return [sigma >= 0, sigma < P.k, a >= 0, a < P.H, i >= 0, i < P.m]


def _raw(A: Arith, P: MultiParams, sigma: Term, a: Term, i: Term) -> Term:
    return Terms(P.H + i, a, (sigma, a), A.mul(sigma, _L(P)) + 2 * (A.mod(a - 1, P.H, -1, 0) + i), 2, 0, 2)


def _f(A: Arith, P: MultiParams, sigma: Term, a: Term, i: Term) -> Term:
    return Terms(a, P.H + i, (sigma, a), A.mul(sigma + 1, _L(P)) + 2 * (a + i), 2, 0, 2)


def _rs_dom(A: Arith, P: MultiParams, sigma: Term, a: Term, j: Term) -> Term:
    return [sigma >= 0, sigma < P.k, a >= 0, a < P.H, j >= 1, j <= P.H - 1]


def _rs(A: Arith, P: MultiParams, sigma: Term, a: Term, j: Term) -> Term:
    b = A.mod(a + j, P.H, 0, 1)
    return Terms(b, A.mod(b + 1, P.H, 0, 1), (sigma, a), A.mul(sigma, _L(P)) + 2 * a + j + _wrap(A, P, a, j),
                 1, 0, 1)


def _ag_dom(A: Arith, P: MultiParams, sigma: Term, a: Term, j: Term) -> Term:
    return [sigma >= 0, sigma <= P.k - 2, a >= 0, a < P.H, j >= 0, j <= P.H - 2]


def _ag(A: Arith, P: MultiParams, sigma: Term, a: Term, j: Term) -> Term:
    b = A.mod(a + j, P.H, 0, 1)
    return Terms(b, A.mod(b + 1, P.H, 0, 1), (sigma, a),
                 A.mul(sigma + 1, _L(P)) + 2 * a + 2 * P.m + P.H - 2 + j + _wrap(A, P, a, j), 1, 0, 1)


RAW = Family("multi.raw", ("sigma", "a", "i"), "add", _job, _raw)
RS = Family("multi.rs_hop", ("sigma", "a", "j"), "add", _rs_dom, _rs)
F = Family("multi.full_to_straggler", ("sigma", "a", "i"), "copy", _job, _f)
AG = Family("multi.ag_hop", ("sigma", "a", "j"), "copy", _ag_dom, _ag)
FAMILIES = (RAW, RS, F, AG)


def core_flows(H: int, m: int, k: int, healthy: Sequence[int], stragglers: Sequence[int], lam: Fraction) -> list[Flow]:
    """The core's flows on concrete parameters: healthy ranks, straggler ranks (node order)."""
    from optcc.algorithms.families import INT
    from optcc.schedule import Flow
    P = MultiParams(H, m, k)

    def rank(n: int) -> int:
        return healthy[n] if n < H else stragglers[n - H]
    out: list[Flow] = []
    for fam in FAMILIES:
        last = m if fam in (RAW, F) else H
        for sigma in range(k):
            for a in range(H):
                for x in range(last):
                    if all(fam.domain(INT, P, sigma, a, x)):
                        T = fam.terms(INT, P, sigma, a, x)
                        out.append(Flow(rank(T.src), rank(T.dst), T.piece[0] * H + T.piece[1], fam.op,
                                        T.box * lam))
    return out
