"""Mutants of the ring and OptCC flow families (wrong offset, missing hop, off-by-one start, wrong op, ...):
each must be refuted by the parametric proof and by the per-instance verifier."""
from __future__ import annotations

from dataclasses import replace

from optcc.algorithms.single import families as O
from optcc.algorithms.ring import families as R

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


# ---- single-straggler OptCC (families.optcc): index 0 pro, 1 rs, 2 up, 3 down, 4 p2p_up,
# 5 p2p_down, 6 ag, 7 epi


def _with(**by_index):
    fams = list(O.FAMILIES)
    for i, fam in by_index.items():
        fams[int(i[1:])] = fam
    return tuple(fams)


def _fewer_rs():
    def domain(A, P, sigma, o, j):
        return O.RS.domain(A, P, sigma, o, j) + [j <= P.p - 3]
    return replace(O.RS, domain=domain)


OPTCC_MUTANTS = {
    "rs hop one slot late": _with(f1=_mut(O.RS, box=lambda A, P, T, s, o, j: T.box + 1)),
    "ag hop two slots early": _with(f6=_mut(O.AG, box=lambda A, P, T, s, o, j: T.box - 2)),
    "upload copies instead of adding": _with(f2=replace(O.UP, op="copy")),
    "download adds instead of copying": _with(f3=replace(O.DOWN, op="add")),
    "rs missing last hop": _with(f1=_fewer_rs()),
    "download to the next node": _with(f3=_mut(O.DOWN, dst=lambda A, P, T, s, o: A.mod(o + 1, P.p - 1, 0, 1))),
    "p2p upload at the window start": _with(f4=_mut(O.P2P_UP, offset=lambda A, P, T, s, o: 0)),
    "prologue wrong shard (i − t)": _with(f0=_mut(O.PRO, piece=lambda A, P, T, t, i: (0, A.mod(i - t, P.p - 1, -1, 0)))),
    "pipeline period 2H − 2": _with(**{f"f{n}": _mut(f, box=lambda A, P, T, *idx, f=f: T.box - A.mul(idx[0], 2))
                                       for n, f in ((1, O.RS), (2, O.UP), (3, O.DOWN), (6, O.AG))}),
    "p2p download before the next download": _with(f5=_mut(O.P2P_DOWN, offset=lambda A, P, T, s, o: 0)),
}
