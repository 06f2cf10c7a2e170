"""Vectorized evaluation of the symbolic bounds over parameter sweeps (sympy.lambdify + numpy).

The cut and volume terms are compiled separately from the sympy expressions in
`bounds.symbolic`, so a sweep also reports which term binds at each point. Float64 results;
use `bounds.closed_form` for exact single points.
"""
from __future__ import annotations

from functools import cache

import numpy as np
import sympy as sp

from bounds import symbolic as S


@cache
def _compiled(name: str):
    if name == "theorem1":
        bound, args, t0 = S.THEOREM_1, (S.p, S.ell), S.T0_G1
    elif name == "theorem3":
        bound, args, t0 = S.THEOREM_3, (S.p, S.g, S.ell), S.T0
    else:
        raise ValueError(name)
    make = lambda e: sp.lambdify(args, e, modules="numpy")  # noqa: E731
    return make(bound.cut.expr), make(bound.volume.expr), make(t0)


def _result(cut, volume, t0, shape) -> dict:
    cut = np.broadcast_to(np.asarray(cut, dtype=float), shape)
    volume = np.broadcast_to(np.asarray(volume, dtype=float), shape)
    t0 = np.broadcast_to(np.asarray(t0, dtype=float), shape)
    lb = np.maximum(cut, volume)
    return {"lower_bound": lb, "cut": cut, "volume": volume, "t0": t0,
            "ratio_to_t0": lb / t0, "cut_binds": cut >= volume}


def sweep_single_straggler(p, ell) -> dict:
    """Theorem 1 (paper) over broadcast arrays p, ℓ: bound, terms, T0, ratio, cut_binds."""
    p, ell = np.broadcast_arrays(np.asarray(p, dtype=float), np.asarray(ell, dtype=float))
    cut, vol, t0 = _compiled("theorem1")
    return _result(cut(p, ell), vol(p, ell), t0(p, ell), p.shape)


def sweep_straggler_server(p, g, ell) -> dict:
    """Theorem 3 (paper) over broadcast arrays p, g, ℓ: bound, terms, T0, ratio, cut_binds."""
    p, g, ell = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (p, g, ell)))
    cut, vol, t0 = _compiled("theorem3")
    return _result(cut(p, g, ell), vol(p, g, ell), t0(p, g, ell), p.shape)
