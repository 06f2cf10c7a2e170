"""Bounds from the literature on the same clusters as Theorem 1: the cut-set bound on Zhou & Sun's
pairwise-link model (bounds.pairwise) and ForestColl's allgather/reduce-scatter cut formula on a
switch topology (bounds.forestcoll). Every value is checked against a hand-derived exact value."""
from __future__ import annotations

from fractions import Fraction as F

import pytest

from bounds.closed_form import lower_bound, lower_bound_single_straggler
from bounds.cut_set import cut_set_bound
from bounds.forestcoll import cluster_topology, forestcoll_allgather_time
from bounds.pairwise import cut_links, fits_per_nic, pairwise_cut_set_bound, per_nic_links
from optcc.cluster import Cluster
from optcc.errors import OptccError

GB = 10**9


def _one(p, ell):
    return Cluster.build(p, stragglers={0: F(ell)} if ell != 1 else {})


# ---- Zhou & Sun's model: pairwise links β_ij --------------------------------------------------

@pytest.mark.parametrize("ell", [F(1), F(3, 2), F(2), F(5)])
def test_p2_pairwise_cut_equals_theorem1(ell):
    """p = 2: the only links are 0→1 and 1→0, each at most min(1/ℓ, 1) = 1/ℓ; the cut-set bound
    is ℓ, and Theorem 1 is max(ℓ, 2ℓ/(ℓ+1)) = ℓ: the two bounds coincide."""
    c = _one(2, ell)
    beta = per_nic_links(c)
    assert beta == [[0, 1 / ell], [1 / ell, 0]] and fits_per_nic(c, beta)
    assert pairwise_cut_set_bound(beta) == ell == lower_bound(c)


@pytest.mark.parametrize("p", [3, 5, 8])
def test_even_split_cut_is_the_straggler(p):
    """β_ij = min(1/ℓ_i, 1/ℓ_j)/(p−1), one straggler at ℓ. By hand: a set of k GPUs holding the
    straggler sends (p−k)(1/ℓ + k − 1)/(p−1), one of k healthy GPUs k(p−k−1+1/ℓ)/(p−1); both
    concave in k, least at the ends: 1/ℓ (the straggler alone, or all healthy GPUs; one healthy
    GPU sends (p−2+1/ℓ)/(p−1) ≥ 1/ℓ). So the bound is ℓ, the per-NIC cut-set
    bound; Theorem 1 equals it iff ℓ ≥ ℓ* = 2 − 1/(p−1)."""
    star = 2 - F(1, p - 1)
    for ell in (F(1), F(8, 7), F(3, 2), F(2), F(3)):
        c = _one(p, ell)
        beta = per_nic_links(c)
        assert fits_per_nic(c, beta)
        assert cut_links(beta, {0}) == 1 / ell
        assert cut_links(beta, {1}) == (p - 2 + 1 / ell) / (p - 1)
        assert cut_links(beta, range(1, p)) == 1 / ell
        assert pairwise_cut_set_bound(beta) == ell == cut_set_bound(c)
        thm1 = lower_bound_single_straggler(p, ell) if ell > 1 else lower_bound(c)
        assert thm1 >= ell and (thm1 == ell) == (ell >= star)


def test_what_the_volume_term_adds_on_the_same_network():
    """p = 8, ℓ = 8/7 (even split): pairwise cut-set 8/7, Theorem 1 = 2·(8/7)·7/(8+1) = 16/9.
    p = 5, no straggler: β = 1/4, least cut |S|(5−|S|)/4 = 1 at |S| = 1; Theorem 1 = T0 = 8/5."""
    c = _one(8, F(8, 7))
    assert pairwise_cut_set_bound(per_nic_links(c)) == F(8, 7) < F(16, 9) == lower_bound(c)
    h = _one(5, 1)
    assert per_nic_links(h)[0][1] == F(1, 4)
    assert pairwise_cut_set_bound(per_nic_links(h)) == 1 < F(8, 5) == lower_bound(h)


def test_fixed_links_can_be_slower_than_the_per_nic_fabric():
    """p = 4, no straggler, links within pairs {0,1}, {2,3} at 3/4 and across at 1/8 (each NIC
    sends and receives 3/4 + 2/8 = 1: it fits). The cut {0,1} | {2,3} carries 4·1/8 = 1/2, so
    this network needs ≥ 2 n/B, above Theorem 1's 3/2: the per-NIC fabric lets every NIC reach
    every peer at full rate, which a fixed split does not."""
    a, x = F(3, 4), F(1, 8)
    beta = [[0, a, x, x], [a, 0, x, x], [x, x, 0, a], [x, x, a, 0]]
    c = _one(4, 1)
    assert fits_per_nic(c, beta)
    assert cut_links(beta, {0, 1}) == F(1, 2) and cut_links(beta, {0, 2}) == F(7, 4)
    assert pairwise_cut_set_bound(beta) == 2 > F(3, 2) == lower_bound(c)


def test_pairwise_bad_input():
    c = _one(2, 2)
    assert not fits_per_nic(c, [[0, 1], [1, 0]])  # 1 > 1/ℓ = 1/2
    with pytest.raises(OptccError, match="beta"):
        pairwise_cut_set_bound([[0, 1], [0, 0]])  # nothing reaches node 0
    with pytest.raises(OptccError, match=r"beta\[1\]"):
        pairwise_cut_set_bound([[0, 1], [1]])
    with pytest.raises(OptccError, match=r"beta\[0\]"):
        pairwise_cut_set_bound([[0, -1], [1, 0]])
    with pytest.raises(OptccError, match="cluster.g"):
        per_nic_links(Cluster.build(4, 2))


# ---- ForestColl: switch topology, each GPU's link to the switch is its NIC --------------------

@pytest.mark.parametrize("p,ell,thm1", [(2, F(3), F(3)), (8, F(2), F(2)), (8, F(8, 7), F(16, 9)),
                                        (5, F(1), F(8, 5))])
def test_star_forestcoll_against_theorem1(p, ell, thm1):
    """Star, one straggler. By hand: a side without the switch sends Σ 1/ℓ_i, worst ratio ℓ (the
    straggler alone); a side with the switch and all GPUs but j sends 1/ℓ_j to j, ratio (p−1)ℓ_j,
    the largest. So reduce-scatter takes (p−1)ℓ/p, a lower bound on AllReduce strictly below
    Theorem 1 (≥ ℓ). Twice it (reduce-scatter, then allgather) is ≥ Theorem 1, equal iff ℓ = 1
    (T0) or p = 2 (derived)."""
    c = _one(p, ell)
    cap, comp = cluster_topology(c)
    rs = forestcoll_allgather_time(cap, comp)
    assert rs == (p - 1) * ell / p
    assert lower_bound(c) == thm1 > rs
    assert (2 * rs == thm1) == (ell == 1 or p == 2) and 2 * rs >= thm1


def test_two_servers_forestcoll_against_server_bound():
    """p = 4, g = 2, GPU 0 at ℓ = 2, NVLink 9B. By hand: server A's NICs carry b_A = 1/2 + 1 = 3/2
    out of {GPU 0, GPU 1, A's NVLink switch}: ratio 2/(3/2) = 4/3, the largest (a side missing one
    GPU reaches it over NVLink at ≥ 9). Time (1/4)·(4/3) = 1/3, half the per-NIC cut 1/b_A = 2/3,
    which is lower_bound (volume 2/(3/2 + 2) = 4/7)."""
    c = Cluster.build(4, 2, {0: F(2)}, bandwidth=50 * GB, nvlink_bandwidth=9 * 50 * GB)
    cap, comp = cluster_topology(c)
    assert forestcoll_allgather_time(cap, comp) == F(1, 3)
    assert lower_bound(c) == cut_set_bound(c) == F(2, 3)


def test_forestcoll_bad_input():
    with pytest.raises(OptccError, match="compute"):
        forestcoll_allgather_time({(0, 1): F(1)}, [0])
    with pytest.raises(OptccError, match="capacity"):
        forestcoll_allgather_time({(0, 1): F(1)}, [0, 1])  # nothing leaves {1}
