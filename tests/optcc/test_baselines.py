"""Baseline schedules: correct (simulated), within capacity, and timed exactly as their formulas say."""
from fractions import Fraction as F

import pytest

from optcc.algorithms.baselines import (
    flat_ring_allreduce, flat_ring_slot_time, hierarchical_ring_allreduce, hierarchical_ring_slot_time,
    pxn_ring_allreduce, r2ccl_allreduce, r2ccl_slot_time,
)
from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.simulate import simulate
from optcc.timing import check_capacity, event_time, slot_time
from paper_checks import models as M


@pytest.mark.parametrize("p,ell", [(2, 2), (3, 2), (5, F(3, 2)), (8, 2), (8, F(8, 7)), (6, 3)])
@pytest.mark.parametrize("k,s", [(1, 1), (4, 2)])
def test_r2ccl_schedule_correct_and_exactly_timed(p, ell, k, s):
    c = Cluster.build(p, stragglers={p // 2: ell})
    sch = r2ccl_allreduce(c, k, s).validate()
    assert simulate(sch).correct
    assert check_capacity(sch) is None
    assert slot_time(sch) == r2ccl_slot_time(c, k, s)


def test_r2ccl_hand_computed_n8_ell2():
    # X = Y = 1/2: T1 = 2·7/8·1/2·2 = 7/4, T2 = 2·6/7·1 = 12/7, T3 = (K+1)/K·ℓY = 5/4 (K = 4),
    # chain fill (N−2)·Y/(K·S) = 6·(1/2)/(4·2) = 3/8.
    c = Cluster.build(8, stragglers={0: 2})
    assert slot_time(r2ccl_allreduce(c, 4, 2)) == F(7, 4) + F(5, 4) + F(3, 8)
    # S → ∞ limit is the cost model with K = 4, and without chunking PAPER.md's 11/7 · T0.
    assert M.r2ccl_time(8, 2) == F(7, 4) + F(5, 4)
    assert M.r2ccl_time(8, 2, chunks=None) / M.t0(8) == F(11, 7) == M.r2ccl_ratio_formula(8, 2)


def test_r2ccl_ratio_formula_matches_model_for_many_n_and_ell():
    for n in (3, 4, 8, 16, 64):
        for ell in (F(8, 7), F(4, 3), F(2)):
            assert M.r2ccl_time(n, ell, chunks=None) / M.t0(n) == M.r2ccl_ratio_formula(n, ell)


def test_r2ccl_refuses_bad_clusters():
    with pytest.raises(OptccError):
        r2ccl_allreduce(Cluster.build(4), 4)                    # no degraded node
    with pytest.raises(OptccError):
        r2ccl_allreduce(Cluster.build(4, stragglers={0: 2, 1: 2}), 4)
    with pytest.raises(OptccError):
        r2ccl_allreduce(Cluster.build(4, stragglers={0: 2}), 0)


@pytest.mark.parametrize("p,g", [(8, 2), (16, 4), (8, 4)])
@pytest.mark.parametrize("ell", [1, 2])
def test_multi_gpu_rings(p, g, ell):
    stragglers = {r: ell for r in range(g)} if ell != 1 else {}
    c = Cluster.build(p, g, stragglers=stragglers)
    for build, formula, model in [
        (flat_ring_allreduce, flat_ring_slot_time, lambda au: M.flat_ring_time(p, g, ell, au)),
        (hierarchical_ring_allreduce, hierarchical_ring_slot_time, lambda au: M.hierarchical_ring_time(p, g, ell, au)),
    ]:
        sch = build(c).validate()
        assert simulate(sch).correct
        assert check_capacity(sch) is None
        assert slot_time(sch) == formula(c) == model(0)
        au = F(1, 1000)
        if build is flat_ring_allreduce or ell == 1:
            assert event_time(sch, au) == model(au)
        else:       # NVLink queues (optcc.timing): the reduce-scatter's pieces can feed the slow NIC ring early
            assert event_time(sch, au) <= model(au)


def test_hand_values_multi_gpu():
    c = Cluster.build(16, 4)
    assert flat_ring_slot_time(c) == F(2 * 15, 4 * 16)                 # 15/32
    assert hierarchical_ring_slot_time(c) == F(2 * 3, 4) / 9 + F(2 * 3, 16)   # NVLink 9× faster
    assert pxn_ring_allreduce(Cluster.build(16, 4, stragglers={0: 2, 1: 2, 2: 2, 3: 2})).meta["algorithm"] == "flat_ring"


@pytest.mark.parametrize("p,g", [(16, 8), (32, 8), (8, 8)])
def test_flat_ring_is_nvlink_bound_where_nvlink_is_slower_than_a_nic_hop(p, g):
    """100 GB/s NICs against 450 GB/s NVLink (s_nv = 9/2 < g − 1 = 7): each step's NVLink hops share a
    port at 1/(g−1) and outlast the NIC hop, so a synchronous step lasts the NVLink hop. The flat
    ring used to be refused here while its event timer charged the NIC step (0.2388 n/B at p = 16
    against the 0.3646 its NVLink hops need alone)."""
    c = Cluster.build(p, g, bandwidth=100e9, nvlink_bandwidth=450e9)
    assert c.nvlink_speedup == F(9, 2)
    sch = flat_ring_allreduce(c).validate()
    assert simulate(sch).correct and check_capacity(sch) is None
    shard = F(1, g * p)
    hop = shard * (g - 1) / F(9, 2) if c.servers > 1 else shard * g / F(9, 2)
    want = 2 * (p - 1) * hop
    assert flat_ring_slot_time(c) == slot_time(sch) == want
    nv = [f for f in sch.flows if f.link == "nvlink"]
    assert max(f.start for f in nv) + hop == want            # the last NVLink hop ends the ring


@pytest.mark.parametrize("p", [3, 5, 8])
def test_ring_alpha_model_matches_event_model(p):
    from optcc.algorithms.ring.build import ring_allreduce
    for ell in (1, F(8, 7), 2):
        stragglers = {1: ell} if ell != 1 else {}
        sch = ring_allreduce(Cluster.build(p, stragglers=stragglers))
        for au in (F(0), F(1, 100)):
            assert event_time(sch, au) == M.ring_time(p, ell, au)


@pytest.mark.parametrize("p,g,ell,server", [(8, 2, F(2), 1), (12, 4, F(8, 7), 0), (16, 4, F(2), 2), (24, 8, F(4, 3), 1)])
def test_r2ccl_servers_schedule_correct_and_exactly_timed(p, g, ell, server):
    from optcc.algorithms.baselines import r2ccl_server_allreduce, r2ccl_server_slot_time
    c = Cluster.build(p, g, stragglers={server * g + i: ell for i in range(g)})
    sch = r2ccl_server_allreduce(c, 4, 2).validate()
    assert simulate(sch).correct
    assert check_capacity(sch) is None
    t = slot_time(sch)
    assert t == r2ccl_server_slot_time(c, 4, 2)
    # Independently: NVLink RS + AG, (g−1) rounds of 1/(g·s_nv) each, plus the q-node R2CCL on 1/g.
    q = p // g
    inst = Cluster.build(q, stragglers={server: ell})
    assert t == 2 * F(g - 1, g) / c.nvlink_speedup + r2ccl_slot_time(inst, 4, 2) / g


def test_r2ccl_servers_hand_value_and_model_limit():
    from optcc.algorithms.baselines import r2ccl_server_slot_time
    # p = 16, g = 4 (q = 4 servers), ℓ = 2, K = 4, S = 2, s_nv = 9 (450/50 GB/s):
    # instance: T1 = 2·3/4·(1/2)·2 = 3/2, T2 = 2·2/3·1 = 4/3, T3 = 5/4 + 2·(1/2)/8 = 11/8 → 23/8;
    # NVLink 2·3/4/9 = 1/6; total 1/6 + 23/32.
    c = Cluster.build(16, 4, stragglers={i: 2 for i in range(4)}, bandwidth=50 * 10**9, nvlink_bandwidth=450 * 10**9)
    assert r2ccl_server_slot_time(c, 4, 2) == F(1, 6) + F(23, 32)
    # S → ∞ limit: paper_checks.models.r2ccl_server_time (α = 0) drops the chain fill (q−2)·Y/(K·S)/g.
    assert M.r2ccl_server_time(16, 4, 2) == F(1, 6) + (F(3, 2) + F(5, 4)) / 4
    assert r2ccl_server_slot_time(c, 4, 2) - M.r2ccl_server_time(16, 4, 2) == F(2, 1) * F(1, 2) / (4 * 2) / 4


def test_r2ccl_servers_refuses():
    from optcc.algorithms.baselines import r2ccl_server_allreduce
    with pytest.raises(OptccError):
        r2ccl_server_allreduce(Cluster.build(8, 4), 4)                                  # nobody degraded
    with pytest.raises(OptccError):
        r2ccl_server_allreduce(Cluster.build(8, 4, stragglers={0: 2, 4: 2}), 4)         # two servers
