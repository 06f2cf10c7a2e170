"""bounds.cut_set: the per-NIC cut-set bound, its closed-form minimum against every cut, and its
exact relation to bounds.closed_form.lower_bound (Theorems 1 and 3, the derived bounds)."""
from __future__ import annotations

import itertools
from fractions import Fraction as F

import pytest

from bounds.closed_form import cluster_terms, lower_bound, lower_bound_single_straggler
from bounds.cut_set import cut_capacity, cut_set_bound
from optcc.cluster import Cluster

GB = 10**9


def _server(g, s, ell):
    return {s * g + j: F(ell) for j in range(g)}


# (p, g, stragglers, NVLink bandwidth in B units): single straggler, several, g > 1, slow NVLink
CLUSTERS = [
    (6, 1, {0: F(2)}, 9), (7, 1, {3: F(3, 2)}, 9), (8, 1, {0: F(8, 7)}, 9), (5, 1, {}, 9),
    (8, 1, {0: F(2), 1: F(4, 3)}, 9), (9, 1, {1: F(3), 4: F(2), 7: F(3, 2)}, 9),
    (8, 2, _server(2, 0, 2), 9), (8, 4, _server(4, 1, F(3, 2)), 9), (8, 4, {0: F(2)}, 9),
    (8, 2, {**_server(2, 0, 2), **_server(2, 1, F(3, 2))}, 9), (8, 4, _server(4, 0, 2), F(1, 2)),
    (6, 2, {0: F(3), 3: F(2)}, F(1, 4)), (4, 4, _server(4, 0, 2), 9),
]


def _cluster(p, g, st, s_nv):
    return Cluster.build(p, g, st, bandwidth=50 * GB, nvlink_bandwidth=F(s_nv) * 50 * GB)


@pytest.mark.parametrize("p,g,st,s_nv", CLUSTERS)
def test_closed_form_minimum_is_the_minimum_over_every_cut(p, g, st, s_nv):
    c = _cluster(p, g, st, s_nv)
    caps = [cut_capacity(c, side) for r in range(1, p) for side in itertools.combinations(range(p), r)]
    assert cut_set_bound(c) == 1 / min(caps)


@pytest.mark.parametrize("p,g,st,s_nv", CLUSTERS)
def test_theorems_and_the_cut_set_bound(p, g, st, s_nv):
    """NVLink-rich (every single-GPU cut at least the weakest server's NICs): the cut-set bound is
    exactly the cut term of lower_bound, so lower_bound ≥ it, equal iff the cut term binds (the
    volume term is what the per-NIC Theorems add). Slow NVLink: the single-GPU cut can exceed it."""
    c = _cluster(p, g, st, s_nv)
    terms, cut_set = cluster_terms(c), cut_set_bound(c)
    ells = [F(x) for x in c.slowdown]
    nvlink_rich = c.servers >= 2 and (g == 1 or min(1 / x for x in ells) + F(s_nv) >= 1 / terms.cut)
    if nvlink_rich:
        assert cut_set == terms.cut <= lower_bound(c)
        assert (cut_set == lower_bound(c)) == (terms.cut >= terms.volume)
    else:                    # slow NVLink, or one server (no NIC cut: lower_bound is 0 there)
        assert cut_set == 1 / (min(1 / x for x in ells) + F(s_nv)) > terms.cut


def test_single_straggler_equal_to_theorem1_iff_ell_at_least_the_crossing():
    """g = 1, one straggler: the cut-set bound is ℓ; Theorem 1 equals it iff ℓ ≥ ℓ* = 2 − 1/(p−1),
    and is strictly above it below (the volume term)."""
    for p in (3, 8, 16, 33):
        star = 2 - F(1, p - 1)
        for ell in (F(1), F(8, 7), F(3, 2), star - F(1, 1000), star, F(2), F(3)):
            c = Cluster.build(p, stragglers={0: ell} if ell > 1 else {})
            assert cut_set_bound(c) == ell
            thm1 = lower_bound_single_straggler(p, ell)
            assert (thm1 == ell) == (ell >= star) and thm1 >= ell


def test_figure_settings():
    """The paper checks' clusters: Figure 22 (g = 8, one server at ℓ = 2, NVLink 9×) and Figure 21
    (servers at 2 and 3/2): the cut-set bound is ℓ/g = 1/4 = Theorem 3's cut term."""
    for st in (_server(8, 0, 2), {**_server(8, 0, 2), **_server(8, 1, F(3, 2))}):
        for p in (16, 32, 64):
            c = _cluster(p, 8, st, 9)
            assert cut_set_bound(c) == F(1, 4) == cluster_terms(c).cut


def test_slow_nvlink_makes_the_gpu_cut_the_larger_bound():
    """p = 8, g = 4, server 0 at ℓ = 2, NVLink at B/2: a straggler GPU alone passes at most 1/2 + 1/2
    of B across its cut (NIC plus NVLink), so T ≥ 1·n/B, above lower_bound's 1/2, which treats NVLink
    as free (bounds.closed_form's server aggregate)."""
    c = _cluster(8, 4, _server(4, 0, 2), F(1, 2))
    assert cut_capacity(c, [0]) == F(1, 2) + F(1, 2)
    assert cut_set_bound(c) == 1 > lower_bound(c) == F(1, 2)
