"""Mutants of the ring flow families (wrong offset, missing hop, off-by-one start, wrong op, ...):
each must be refuted by the parametric proof and by the per-instance verifier."""
from __future__ import annotations

from dataclasses import replace

from optcc.algorithms.families import Terms
from optcc.algorithms.families import ring as R

RS, AG = R.RS, R.AG


def _terms(base, **change):
    def terms(A, P, *idx):
        T = base.terms(A, P, *idx)
        return T._replace(**{k: f(A, P, T, *idx) for k, f in change.items()})
    return terms


def _mut(fam, **change):
    return replace(fam, terms=_terms(fam, **change))


def _fewer(fam):
    def domain(A, P, sigma, h, i):
        return fam.domain(A, P, sigma, h, i) + [h <= P.p - 3]
    return replace(fam, domain=domain)


MUTANTS = {
    "rs wrong offset (i − t + 1)": (_mut(RS, piece=lambda A, P, T, s, t, i: (s, A.mod(i - t + 1, P.p, -1, 1))), AG),
    "ag wrong offset (i − u)": (RS, _mut(AG, piece=lambda A, P, T, s, u, i: (s, A.mod(i - u, P.p, -1, 0)))),
    "rs skips a node (dst i + 2)": (_mut(RS, dst=lambda A, P, T, s, t, i: A.mod(i + 2, P.p, 0, 1)), AG),
    "ag sends backwards (dst i − 1)": (RS, _mut(AG, dst=lambda A, P, T, s, u, i: A.mod(i - 1, P.p, -1, 0))),
    "rs missing last hop": (_fewer(RS), AG),
    "ag missing last hop": (RS, _fewer(AG)),
    "rs starts one slot late": (_mut(RS, box=lambda A, P, T, s, t, i: T.box + 1), AG),
    "ag starts one slot early": (RS, _mut(AG, box=lambda A, P, T, s, u, i: T.box - 1)),
    "segments overlap (period 2p − 3)": (
        _mut(RS, box=lambda A, P, T, s, t, i: A.mul(s, 2 * P.p - 3) + t),
        _mut(AG, box=lambda A, P, T, s, u, i: A.mul(s, 2 * P.p - 3) + P.p - 1 + u)),
    "rs copies instead of adding": (replace(RS, op="copy"), AG),
    "ag adds instead of copying": (RS, replace(AG, op="add")),
}

assert Terms  # the mutants change fields of this tuple
