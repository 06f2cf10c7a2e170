"""optcc_rails (g > 1, any slow set): proved by the verifier, slot_time equal to the generated
schedule, within 3% of the exclusive LP at k = 64 where the issue asks, NVLink limits reported;
and no cluster the bound answers for is refused by `build_schedule("optcc", …)`."""
import random
from fractions import Fraction as F

import pytest

from bounds.closed_form import lower_bound
from lp_models.fluid import solve_fluid_lp
from optcc.algorithms import build_schedule
from optcc.algorithms.rails import build as optcc_rails
from optcc.algorithms.servers.build import optcc_server_slot_time
from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.simulate import simulate
from optcc.timing import check_capacity, slot_time
from verifier import prove_allreduce

CASES = [Cluster.build(16, 4, {0: 2}),                                        # the example
         Cluster.build(16, 4, {0: 2, 1: F(4, 3), 6: F(8, 7)}),
         Cluster.build(16, 4, failed_nics=[(1, 1), (2, 2)]),                  # two degraded servers
         Cluster.build(12, 2, failed_nics=[(0, 1), (3, 1), (5, 1)], pxn=False),
         Cluster.build(8, 2, {0: 2, 1: 3, 2: 2, 3: 3, 4: 2, 5: 3, 6: 2, 7: 3}),   # no healthy GPU
         Cluster.build(8, 4, {0: 2, 5: 3}),                                   # two servers, mixed
         Cluster.build(16, 8, failed_nics=[(1, 1)], pxn=False),               # NVLink-limited
         Cluster.build(16, 4, failed_nics=[(1, 1), (2, 2)], pxn=False)]       # ring rails


@pytest.mark.parametrize("cluster", CASES, ids=lambda c: c.describe())
def test_proved_and_slot_time_is_the_schedules(cluster):
    s = build_schedule("optcc", cluster, 3)
    assert "optcc_rails" in s.meta["construction"]
    proof = prove_allreduce(s)
    assert proof.proved, proof.counterexample
    assert check_capacity(s) is None and simulate(s).correct
    assert slot_time(s) == optcc_rails.slot_time(cluster, 3)
    assert slot_time(s) >= lower_bound(cluster)


def test_shares_balance_the_servers_nics():
    """Issue's example: GPU 0 at ℓ = 2 gets a smaller share, every rail's NIC part ends together."""
    plan = optcc_rails._Plan(Cluster.build(16, 4, {0: 2}), 4)
    assert plan.shares[0] < plan.shares[1] == plan.shares[2] == plan.shares[3]
    assert sum(plan.shares) == 1
    assert {w * t for w, (_, _, t) in zip(plan.shares, plan.rails)} == {plan.nic_time}


@pytest.mark.parametrize("cluster", [Cluster.build(16, 4, {0: 2}),
                                     Cluster.build(16, 4, failed_nics=[(1, 1)], pxn=False),
                                     Cluster.build(16, 4, failed_nics=[(1, 2)], pxn=False),
                                     Cluster.build(64, 4, failed_nics=[(1, 1), (2, 2)]),
                                     Cluster.build(16, 8, failed_nics=[(1, 1)], pxn=False)],
                         ids=lambda c: c.describe())
def test_within_3_percent_of_the_exclusive_lp_at_k64(cluster):
    t = optcc_rails.slot_time(cluster, 64)
    lp = solve_fluid_lp(cluster, "exclusive")
    assert lp.optimal
    assert t >= lower_bound(cluster)
    assert float(t) / lp.objective <= 1.03


def test_every_gpu_above_2_stays_above_the_pooled_lp():
    """Derived limit (docs/failures.md): a GPU at ℓ > 2 is cut-bound in its rail, so the rails
    alone stay above the pooled LP; the borrowing sub-rails (tests/optcc/test_rails_borrow.py) close it."""
    c = Cluster.build(16, 4, {0: 4})
    rails = optcc_rails._best_plan(c, 64, materialize=False).end
    assert float(rails) / solve_fluid_lp(c, "exclusive").objective > 1.05
    assert optcc_rails.slot_time(c, 64) < rails


def test_nvlink_limit_is_reported():
    slow_nv = Cluster.build(16, 4, {0: 2}, nvlink_bandwidth=100 * 10**9)     # NVLink 2x a NIC
    assert optcc_rails.nvlink_limited(slow_nv, 8)
    assert build_schedule("optcc", slow_nv, 2).meta["nvlink_limited"] is True
    assert not optcc_rails.nvlink_limited(Cluster.build(16, 4, {0: 2}), 8)


def test_uniform_single_server_keeps_optcc_servers():
    c = Cluster.build(16, 4, {r: F(2) for r in range(4, 8)})
    s = build_schedule("optcc", c, 2)
    assert "optcc_rails" not in s.meta["construction"]
    assert slot_time(s) == optcc_server_slot_time(c, 2)


def _random_cluster(rng: random.Random) -> Cluster:
    p = rng.randint(2, 32)
    g = rng.choice([d for d in range(1, p + 1) if p % d == 0 and d <= 8])
    ells = [F(1), F(8, 7), F(4, 3), F(3, 2), F(2), F(3)]
    slow = {r: rng.choice(ells[1:]) for r in rng.sample(range(p), rng.randint(0, p))}
    return Cluster.build(p, g, slow or None)


def test_no_refusal_the_bound_does_not_share():
    """Property (issue 17): wherever `bound` answers, `schedule --algo optcc` gives a proved
    schedule. Fixed seed, 40 clusters with p ≤ 32, g | p, any slow set."""
    rng = random.Random(17)
    for _ in range(40):
        c = _random_cluster(rng)
        try:
            lower_bound(c)
        except OptccError:
            continue
        s = build_schedule("optcc", c, rng.choice([1, 2]))
        proof = prove_allreduce(s)
        assert proof.proved, (c.describe(), proof.counterexample)


@pytest.mark.parametrize("cluster", [Cluster.build(16, 4, failed_nics=[(1, 1), (2, 2)]),
                                     Cluster.build(64, 8, failed_nics=[(1, 1), (2, 4)]),
                                     Cluster.build(32, 4, {0: 3, 5: 2, 9: F(3, 2), 10: F(3, 2), 11: F(3, 2)}),
                                     Cluster.build(16, 4, {0: 8})], ids=lambda c: c.describe())
def test_derived_bound_is_the_shared_port_lp(cluster):
    """The server-aggregate bound (derived, bounds.closed_form.server_terms) for several straggler
    servers and mixed servers equals the shared-port LP with pooled servers."""
    lp = solve_fluid_lp(cluster, "shared")
    assert lp.optimal and abs(lp.objective - float(lower_bound(cluster))) < 1e-9


def test_bound_and_lp_say_when_nvlink_limits_pooling(capsys):
    from bounds.closed_form import pooling_nvlink_time
    from optcc_app.cli import main
    slow_nv = Cluster.build(16, 4, {0: 2}, nvlink_bandwidth=100 * 10**9)
    # GPU 1..3 carry w = 1/3.5 each: (1 + 2·(2/7))/2 = 11/14 n/B of NVLink
    assert pooling_nvlink_time(slow_nv) == F(11, 14)
    res = solve_fluid_lp(slow_nv, "exclusive")
    assert "nvlink[every server]" in res.binding and abs(res.objective - 11 / 14) < 1e-9
    assert main(["bound", "--p", "16", "--g", "4", "--straggler", "0:2", "--nvlink-bandwidth", "100e9"]) == 0
    assert "limited by NVLink" in capsys.readouterr().out
    assert main(["bound", "--p", "16", "--g", "4", "--straggler", "0:2"]) == 0
    assert "limited by NVLink" not in capsys.readouterr().out
    uniform = Cluster.build(16, 4, {r: 2 for r in range(4)})
    assert pooling_nvlink_time(uniform) == F(2 * 3, 4 * 9)            # the LP's old NVLink row


def test_every_gpu_slow_is_time_scaled():
    """all_slow (derived): ℓ_min × the schedule of the cluster with every ℓ divided by ℓ_min."""
    from optcc.algorithms.registry import optcc_closed_form
    from optcc.algorithms.all_slow import build as all_slow
    c = Cluster.build(6, 1, {0: 3, 1: 2, 2: 2, 3: F(5, 2), 4: 2, 5: 4})
    s = build_schedule("optcc", c, 2)
    assert s.meta["time_scaled_by"] == "2" and prove_allreduce(s).proved
    red, scale = all_slow.reduced(c)
    assert scale == 2 and min(red.slowdown) == 1
    assert slot_time(s) == 2 * slot_time(build_schedule("optcc", red, 2)) == optcc_closed_form(c, 2)
    assert not all_slow.applies(Cluster.build(4, 1, {0: 2}))


def test_nvlink_rate_rules_fit_every_port():
    """Both rules (docs/failures.md "NVLink rates"): with both kinds active a port of GPU l
    carries R + (g−2)·r_l ≤ 1, with one kind max((g−1)·r_l, R − r_l) ≤ 1; the one-kind rate is
    never below the two-kind rate; equal shares make the rules identical."""
    rng = random.Random(17)
    for _ in range(50):
        g = rng.randint(2, 8)
        raw = [F(rng.randint(1, 9)) for _ in range(g)]
        shares = [x / sum(raw) for x in raw]
        for rule in ("equal", "proportional"):
            half, full = optcc_rails._rates(shares, g, rule)
            assert sum(half) + (g - 2) * max(half) <= 1
            assert all(max((g - 1) * r, sum(full) - r) <= 1 for r in full)
            assert all(h <= f for h, f in zip(half, full))
        assert optcc_rails._rates([F(1, g)] * g, g, "proportional") == optcc_rails._rates([F(1, g)] * g, g, "equal")


def test_proportional_rates_close_the_nvlink_limited_gap():
    """p = 16, g = 8, one NIC lost without PXN: the rails' streams at rates ∝ w_l take the LP's
    pooling row (1 + (g−2)·w_max)/s_nv, not 2(g−1)·w_max/s_nv, and the lead is bisected; the
    plan picked is never slower than the equal-rate plan."""
    c = Cluster.build(16, 8, failed_nics=[(1, 1)], pxn=False)
    rails = optcc_rails._rails(c, 64)
    equal = optcc_rails._Plan(c, 64, materialize=False, rails=rails)
    prop = optcc_rails._Plan(c, 64, materialize=False, rates="proportional", rails=rails)
    assert equal.nvlink_work == F(2, 9) and prop.nvlink_work == F(13, 63)
    assert prop.end < equal.end and prop.lead < equal.lead
    assert optcc_rails.slot_time(c, 64) == prop.end
    assert build_schedule("optcc", c, 2).meta["nvlink_rates"] == "proportional"
    for other in (Cluster.build(16, 4, failed_nics=[(1, 1)], pxn=False), Cluster.build(16, 4, {0: 2})):
        rails = optcc_rails._rails(other, 16)
        assert optcc_rails.slot_time(other, 16) <= optcc_rails._Plan(other, 16, materialize=False, rails=rails).end


def test_tiny_rails_take_the_fastest_of_multi_ring_direct():
    """Rail [1, 2, 2, 1] at k = 1: the ring's max ℓ·2(q−1)/q = 3 beats optcc_multi (6) and the
    direct AllReduce (10/3); at k = 64 direct's 8/3·(1 + 1/256) beats the ring's 3 and
    optcc_multi's 3.047. Rail [1, 4/3, 2, 1] at k = 64 takes direct (2.290) over optcc_multi (2.617);
    at k = 2 direct ties the ring (3) and the ring is kept (ties keep the earlier candidate)."""
    from optcc.algorithms.direct import build as direct
    from optcc.algorithms.multi.build import optcc_multi_slot_time
    two = Cluster.build(4, 1, {1: 2, 2: 2})
    assert optcc_multi_slot_time(two, 1) > 3 and direct.slot_time(two, 1) > 3
    ring = optcc_rails.rail_schedule(two, 1)
    assert ring.meta["algorithm"] == "ring" and slot_time(ring) == 3
    assert optcc_multi_slot_time(two, 64) > 3
    fast = optcc_rails.rail_schedule(two, 64)
    assert fast.meta["algorithm"] == "direct" and slot_time(fast) == direct.slot_time(two, 64) == F(8, 3) * F(257, 256)
    mixed = Cluster.build(4, 1, {1: F(4, 3), 2: 2})
    kept = optcc_rails.rail_schedule(mixed, 64)
    assert kept.meta["algorithm"] == "direct" and slot_time(kept) == direct.slot_time(mixed, 64) < optcc_multi_slot_time(mixed, 64)
    assert direct.slot_time(mixed, 2) == 3 and optcc_rails.rail_schedule(mixed, 2).meta["algorithm"] == "ring"
    c = Cluster.build(16, 4, failed_nics=[(1, 1), (2, 2)], pxn=False)
    assert optcc_rails.slot_time(c, 64) < F(61198, 100000)            # 0.61198 with optcc_multi rails


@pytest.mark.parametrize("rates", ["equal", "proportional"])
def test_times_only_plan_equals_the_per_rail_plan(rates):
    """_Plan(materialize=False) lays out one representative per class of identical rails (same
    schedule, share, rates); materialize=True lays out every rail. Their lead, end, grid and
    NVLink work must be equal, on clusters whose rails are all alike (uniform straggler servers),
    partly alike and all different (mixed ℓ inside a server)."""
    clusters = [Cluster.build(32, 8, {**{i: F(3, 2) for i in range(8)}, **{8 + i: F(2) for i in range(8)}}),
                Cluster.build(16, 4, {0: F(2), 1: F(2), 5: F(4, 3)}),
                Cluster.build(24, 4, {0: F(2), 1: F(4, 3), 2: F(8, 7), 3: F(3)}),
                Cluster.build(16, 8, failed_nics=[(1, 1)], pxn=False)]
    for c in clusters:
        for k in (1, 4, 16):
            rails = optcc_rails._rails(c, k)
            fast = optcc_rails._Plan(c, k, materialize=False, rates=rates, rails=rails)
            full = optcc_rails._Plan(c, k, materialize=True, rates=rates, rails=rails)
            assert (fast.lead, fast.end, fast.grid, fast.nvlink_work, fast.nvlink_limited) == \
                   (full.lead, full.end, full.grid, full.nvlink_work, full.nvlink_limited), (c.slowdown, k)
            assert fast.end >= fast.nic_time > 0
