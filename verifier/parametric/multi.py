"""Port exclusivity of the multi-straggler OptCC periodic core, for all H ≥ 1, m ≥ 3, k ≥ 1.

Only the core's four families (optcc.algorithms.multi.families) and only ports (plus
ranges): the drain and the fill are placed by search and are not families, so the sum property,
causality and the finish time of multi-straggler schedules stay per-instance proofs.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import z3

from optcc.algorithms.multi import families as M
from verifier.parametric import generic as G

if TYPE_CHECKING:
    from verifier.parametric.obligations import Obligation

FOR_ALL = "all H ≥ 1 healthy, m ≥ 3 stragglers, k ≥ 1 (periodic core only: ports)"


def generator_model() -> G.GeneratorModel:
    H, m, k = z3.Ints("H m k")
    P = M.MultiParams(H, m, k)
    return G.GeneratorModel("multi-core", P, [H >= 1, m >= 3, k >= 1], M.FAMILIES, lambda P: P.H + P.m,
                          lambda A, P, key: z3.And(key[0] >= 0, key[0] < P.k, key[1] >= 0, key[1] < P.H))


def obligations() -> list[Obligation]:
    C = generator_model()
    return G.well_formed(C) + G.ports(C)
