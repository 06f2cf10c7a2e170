"""OptCC for g GPUs per server, one straggler server: simulation, ports, links, closed form,
proofs, LP target, dispatch, errors (optcc/algorithms/servers/build.py)."""
from fractions import Fraction as F

import pytest

from bounds.closed_form import lower_bound_straggler_server
from optcc.algorithms import build_schedule
from optcc.algorithms.servers.build import (optcc_server_allreduce, optcc_server_slot_time,
                                            straggler_server)
from optcc.algorithms.single.build import _shard_size
from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.simulate import simulate
from optcc.timing import check_capacity, slot_time

B = 50 * 10**9


def server_cluster(q, g, server, ell, nvlink=450 * 10**9):
    slow = {r: ell for r in range(server * g, server * g + g)} if ell != 1 else None
    return Cluster.build(q * g, g, slow, bandwidth=B, nvlink_bandwidth=nvlink)


GRID = [(g, q, ell, k) for g in (2, 4, 8) for q in (2, 3, 4, 5)
        for ell in (F(1), F(8, 7), F(3, 2), F(2), F(3)) for k in (1, 2, 3)
        if g * q <= 24 and not (g == 8 and k == 3)]


@pytest.mark.parametrize("g,q,ell,k", GRID)
def test_correct_ports_and_closed_form(g, q, ell, k):
    c = server_cluster(q, g, (q - 1) // 2, ell)
    s = optcc_server_allreduce(c, k)
    s.validate()
    assert simulate(s).correct
    assert check_capacity(s) is None                 # exclusive: one flow per port direction per link
    assert slot_time(s) == optcc_server_slot_time(c, k)


@pytest.mark.parametrize("g,q,ell,k", [(2, 10, F(3, 2), 5), (4, 6, F(101, 100), 4), (8, 7, F(19, 10), 5),
                                      (4, 8, F(3), 3), (2, 6, F(9, 4), 5)])
def test_closed_form_at_the_nvlink_boundary(g, q, ell, k):
    """s_nv = g − 1 (the slowest NVLink the closed form admits), larger q and k."""
    c = server_cluster(q, g, q // 2, ell, nvlink=(g - 1) * B)
    s = optcc_server_allreduce(c, k)
    assert check_capacity(s) is None
    assert slot_time(s) == optcc_server_slot_time(c, k)


def test_closed_form_refuses_when_nvlink_outweighs_nics():
    """2(g−1)/(g·s_nv) > T_1/g (q = 3, ℓ ≈ 1, s_nv = g − 1): it raises; the schedule is NVLink-bound."""
    c = server_cluster(3, 4, 1, F(101, 100), nvlink=3 * B)
    with pytest.raises(OptccError, match="nvlink_bandwidth"):
        optcc_server_slot_time(c, 5)
    s = optcc_server_allreduce(c, 5)
    assert simulate(s).correct and check_capacity(s) is None
    assert slot_time(s) >= F(2 * 3, 4) / 3            # at least NVLink's own work


@pytest.mark.parametrize("g,q", [(2, 3), (4, 4), (8, 3)])
def test_lead_is_two_batches_and_nics_never_idle_in_between(g, q):
    """Derived claim of the docstring: the instance starts after 2 RS batches (q ≥ 3)."""
    c = server_cluster(q, g, 1, F(2))
    k = 3
    s = optcc_server_allreduce(c, k)
    delta = _shard_size(q - 1, k, F(2))
    batch = (g - 1) * delta / (g * c.nvlink_speedup)
    assert F(s.meta["lead"]) == 2 * batch
    nic_starts = sorted(f.start for f in s.flows if f.link == "nic")
    assert nic_starts[0] == 2 * batch


def test_links_are_right_and_rates_are_whole_ports():
    c = server_cluster(4, 4, 2, F(3, 2))
    s = optcc_server_allreduce(c, 2)
    g = c.g
    for f in s.flows:
        assert f.rate == 1
        same = f.src // g == f.dst // g
        assert (f.link == "nvlink") == same, f
    nv = [f for f in s.flows if f.link == "nvlink"]
    # every piece of every server is reduced and broadcast over NVLink: (g−1) adds + (g−1) copies
    assert len(nv) == 2 * (g - 1) * c.servers * len(s.pieces)
    assert sum(f.op == "add" for f in nv) == sum(f.op == "copy" for f in nv)


@pytest.mark.parametrize("nv_speedup", [1, 2, 3])
def test_slow_nvlink_still_correct_and_within_ports(nv_speedup):
    """s_nv < g−1: no closed form (it raises), but the schedule stays correct and capacity-safe."""
    c = server_cluster(4, 4, 1, F(8, 7), nvlink=nv_speedup * B)
    s = optcc_server_allreduce(c, 2)
    assert simulate(s).correct and check_capacity(s) is None
    fast = slot_time(optcc_server_allreduce(server_cluster(4, 4, 1, F(8, 7)), 2))
    assert slot_time(s) > fast
    if nv_speedup < 3:
        with pytest.raises(OptccError, match="nvlink_bandwidth"):
            optcc_server_slot_time(c, 2)
    else:
        assert slot_time(s) == optcc_server_slot_time(c, 2)


def test_one_server_is_nvlink_only():
    c = Cluster.build(4, 4, {r: 2 for r in range(4)})
    s = optcc_server_allreduce(c, 3)
    assert simulate(s).correct and check_capacity(s) is None
    assert all(f.link == "nvlink" for f in s.flows)
    assert slot_time(s) == optcc_server_slot_time(c, 3) == F(2 * 3, 4) / 9


@pytest.mark.parametrize("p,g,server,ell,k", [(8, 2, 1, F(2), 2), (8, 4, 0, F(3, 2), 2),
                                              (12, 4, 2, F(8, 7), 2), (16, 8, 1, F(2), 1),
                                              (12, 2, 3, F(3), 3)])
def test_verifier_proves(p, g, server, ell, k):
    from verifier import prove_allreduce
    s = optcc_server_allreduce(server_cluster(p // g, g, server, ell), k)
    proof = prove_allreduce(s)
    assert proof.proved, proof


def test_figure10_target_p16_generated_and_lp():
    """Figure 10 setting, p = 16, g = 4, k = 64: generated = closed form, ≤ 3% over the LP."""
    from lp_models.fluid import solve_fluid_lp
    for ell in (F(8, 7), F(2)):
        c = server_cluster(4, 4, 1, ell)
        s = optcc_server_allreduce(c, 64)
        assert check_capacity(s) is None
        t = slot_time(s)
        assert t == optcc_server_slot_time(c, 64)
        lp = solve_fluid_lp(c, "exclusive")
        assert lp.optimal
        assert float(t) / lp.objective <= 1.03
        assert t >= lower_bound_straggler_server(16, 4, ell)


def test_build_schedule_dispatches_for_g_above_one():
    c = server_cluster(3, 2, 0, F(2))
    s = build_schedule("optcc", c, 2)
    assert s.meta["algorithm"] == "optcc" and s.meta["g"] == 2
    r = build_schedule("ring", c, 1)
    assert r.meta["algorithm"] == "flat_ring"
    assert simulate(r).correct


@pytest.mark.parametrize("slow,match", [({0: 2, 1: 2, 4: 2, 5: 2}, "servers \\[0, 2\\]"),
                                        ({0: 2}, "mixes slowdowns"),
                                        ({2: 2, 3: F(3, 2)}, "mixes slowdowns")])
def test_errors_name_the_field(slow, match):
    c = Cluster.build(8, 2, slow)
    with pytest.raises(OptccError, match=match) as e:
        optcc_server_allreduce(c, 1)
    assert e.value.field == "stragglers"


def test_straggler_server_and_segment_errors():
    assert straggler_server(Cluster.build(8, 4)) == (0, 1)
    assert straggler_server(server_cluster(2, 4, 1, F(2))) == (1, F(2))
    with pytest.raises(OptccError):
        optcc_server_allreduce(server_cluster(2, 4, 1, F(2)), 0)
    with pytest.raises(OptccError, match="^g: "):
        optcc_server_allreduce(Cluster.build(4, 1, {0: 2}), 1)


@pytest.mark.parametrize("p,ell", [(16, F(8, 7)), (64, F(2)), (256, F(3, 2))])
def test_lp_is_the_construction_limit(p, ell):
    """The server-level exclusive LP equals max(T_ex(q, ℓ)/g, 2(g−1)/(g·s_nv)) (derived), and the
    closed form approaches it as k grows (only the O(1/k) fill is left)."""
    from lp_models.fluid import solve_fluid_lp
    from bounds.closed_form import exclusive_single_straggler_optimum as exclusive_fluid_optimum
    g = 4
    c = server_cluster(p // g, g, 1, ell)
    lp = solve_fluid_lp(c, "exclusive")
    limit = max(exclusive_fluid_optimum(p // g, ell) / g, F(2 * (g - 1), g) / c.nvlink_speedup)
    assert lp.optimal and lp.objective == pytest.approx(float(limit), rel=1e-9)
    gaps = [float(optcc_server_slot_time(c, k)) / lp.objective - 1 for k in (16, 256, 4096)]
    assert gaps[0] > gaps[1] > gaps[2] > 0 and gaps[2] < 2e-3


# ---- two servers (q = 2): the k-segment pipelined exchange ---------------------------------
def _nvlink_work(c):
    return F(2 * (c.g - 1), c.g) / c.nvlink_speedup


@pytest.mark.parametrize("g", [2, 3, 4, 8])
@pytest.mark.parametrize("s_nv", [F(1, 3), F(1), F(3, 2), "g-1", F(9), F(40)])
def test_two_servers_closed_form_equals_generated(g, s_nv):
    """q = 2 over ℓ, k and NVLink speeds from far below a NIC to 40×: correct, one flow per port
    direction, and slot time = max(ℓ/g + W/k, W), W = 2(g−1)/(g·s_nv) (derived, no extra condition)."""
    s_nv = F(g - 1) if s_nv == "g-1" else s_nv
    for ell in (F(1), F(8, 7), F(3, 2), F(2), F(3)):
        for k in (1, 2, 3, 5):
            c = server_cluster(2, g, k % 2, ell, nvlink=s_nv * B)
            s = optcc_server_allreduce(c, k)
            assert simulate(s).correct and check_capacity(s) is None
            w = _nvlink_work(c)
            expect = max(ell / g + w / k, w)
            assert slot_time(s) == optcc_server_slot_time(c, k) == expect, (ell, k)


def test_two_servers_nic_bound_pipeline_shape():
    """NIC-bound (p = 16, g = 8, ℓ = 2, k = 8): the NICs start after one RS batch, swap the k
    segments back to back (one flow per NIC direction); every other NVLink round (RS of later
    segments, AG of earlier ones) runs while the NICs work; one AG batch follows the last NIC flow."""
    g, k, ell = 8, 8, F(2)
    c = server_cluster(2, g, 1, ell)
    s = optcc_server_allreduce(c, k)
    batch = _nvlink_work(c) / (2 * k)
    seg = ell / (g * k)
    nic = [f for f in s.flows if f.link == "nic"]
    assert sorted({f.start for f in nic}) == [batch + i * seg for i in range(k)]
    assert all(sum(f.src == r for f in nic if f.start == t) == 1 for r in range(2 * g) for t in {f.start for f in nic})
    nv = [f for f in s.flows if f.link == "nvlink"]
    rnd = batch / (g - 1)
    nv_end = max(f.start + rnd for f in nv)
    assert nv_end == batch + k * seg + batch == slot_time(s)
    nic_end = batch + k * seg
    outside = [f for f in nv if f.start < batch or f.start + rnd > nic_end]
    assert len(outside) == 2 * 2 * (g - 1) * g    # per server: one RS batch before, one AG batch after
    assert {f.op for f in outside if f.start < batch} == {"add"}
    assert {f.op for f in outside if f.start >= nic_end} == {"copy"}
    assert {f.op for f in nv if batch <= f.start and f.start + rnd <= nic_end} == {"add", "copy"}


@pytest.mark.parametrize("g,p,ell", [(8, 16, F(2)), (8, 16, F(8, 7)), (4, 8, F(2)), (4, 8, F(8, 7))])
def test_two_servers_against_lp_and_theorem3(g, p, ell):
    """k = 64: within 1.3% of the exclusive LP (exactly the LP where NVLink binds, Figure 22's
    g = 8, ℓ = 8/7) and ≥ Theorem 3; far below the unpipelined ℓ/g + W of the earlier construction."""
    from lp_models.fluid import solve_fluid_lp
    c = server_cluster(p // g, g, 1, ell)
    t = optcc_server_slot_time(c, 64)
    lp = solve_fluid_lp(c, "exclusive")
    assert lp.optimal and 1 - 1e-9 <= float(t) / lp.objective <= 1.013
    assert t >= lower_bound_straggler_server(p, g, ell)
    assert t < ell / g + _nvlink_work(c)
    if ell / g < _nvlink_work(c) * F(63, 64):
        assert t == _nvlink_work(c) and float(t) == pytest.approx(lp.objective, rel=1e-9)


@pytest.mark.parametrize("p,g,ell,k,s_nv", [(4, 2, F(2), 3, F(9)), (8, 4, F(8, 7), 3, F(9)),
                                            (16, 8, F(2), 2, F(9)), (8, 4, F(3), 2, F(1, 2))])
def test_verifier_proves_two_servers(p, g, ell, k, s_nv):
    from verifier import prove_allreduce
    s = optcc_server_allreduce(server_cluster(p // g, g, 1, ell, nvlink=s_nv * B), k)
    proof = prove_allreduce(s)
    assert proof.proved, proof


@pytest.mark.parametrize("g", [2, 4, 8])
@pytest.mark.parametrize("s_nv", [F(1, 2), F(9)])
def test_one_server_time_and_no_division_by_zero(g, s_nv):
    """q = 1: NVLink reduce-scatter + all-gather, 2(g−1)/(g·s_nv) for every k (NVLink is the only
    resource and every round already uses all its ports, so segmenting cannot help); T0 and the
    bound are 0 and timing reports it without dividing by zero."""
    from optcc_app.compose.timing_report import time_schedule
    c = server_cluster(1, g, 0, F(2), nvlink=s_nv * B)
    for k in (1, 4):
        s = optcc_server_allreduce(c, k)
        assert simulate(s).correct and check_capacity(s) is None
        assert slot_time(s) == optcc_server_slot_time(c, k) == _nvlink_work(c)
    rep = time_schedule(s, 10**6)
    assert rep.t0 == 0 and rep.lower_bound == 0 and rep.slot_time == _nvlink_work(c)
