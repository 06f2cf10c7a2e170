"""The direct AllReduce (optcc.algorithms.direct.build): exact shard sizes equal to GLOP's optimum of the
same LP and to the exclusive LP on the small-q rails of issue 17, proved by the verifier,
slot_time equal to the built schedule, and the rails that take it within 3% of the exclusive LP."""
import random
from fractions import Fraction as F

import pytest

from lp_models.fluid import solve_fluid_lp
from optcc.algorithms.direct import build as direct
from optcc.algorithms.rails import build as optcc_rails
from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.simulate import simulate
from optcc.timing import check_capacity, slot_time
from verifier import prove_allreduce


def g1(ells) -> Cluster:
    return Cluster.build(len(ells), 1, {i: F(e) for i, e in enumerate(ells) if e != 1} or None)


def glop_direct_lp(ells) -> float:
    """min max_i Σ_{j≠i} (x_i + x_j)·max(ℓ_i, ℓ_j) over the simplex, solved by GLOP."""
    from ortools.linear_solver import pywraplp
    s = pywraplp.Solver.CreateSolver("GLOP")
    q = len(ells)
    x = [s.NumVar(0, 1, f"x{i}") for i in range(q)]
    t = s.NumVar(0, s.infinity(), "t")
    s.Add(sum(x) == 1)
    for i in range(q):
        s.Add(sum((x[i] + x[j]) * float(max(ells[i], ells[j])) for j in range(q) if j != i) <= t)
    s.Minimize(t)
    assert s.Solve() == pywraplp.Solver.OPTIMAL
    return s.Objective().Value()


NAMED = [([1, F(4, 3), 2, 1], F(34, 15)),       # rail of p = 16, g = 4, two degraded servers, PXN
         ([1, 2, 2, 1], F(8, 3)),               # the same without PXN
         ([2, F(3, 2), 1, 1], F(50, 21)),       # fig21 with g = 8 at p = 32
         ([2, 1, 1, 1], F(2)),                  # = T_ex(4, 2)
         ([1] * 5, F(8, 5))]                    # uniform: 2(q−1)/q


@pytest.mark.parametrize("ells,expected", NAMED, ids=str)
def test_shards_are_the_lp_optimum_on_the_issue_rails(ells, expected):
    c = g1(ells)
    x = direct.shards(c)
    assert sum(x) == 1 and min(x) >= 0
    t = max(direct.loads(c.slowdown, x))
    assert t == direct.fluid_time(c) == expected
    assert float(t) == pytest.approx(glop_direct_lp(ells), abs=1e-9)
    lp = solve_fluid_lp(c, "exclusive")                # the exclusive LP of the whole 4-node cluster
    assert lp.optimal and float(t) == pytest.approx(lp.objective, abs=1e-9)


def test_named_shard_sizes():
    assert direct.shards(g1([1, F(4, 3), 2, 1])) == [F(1, 3), F(4, 15), F(1, 15), F(1, 3)]
    assert direct.shards(g1([1] * 6)) == [F(1, 6)] * 6


def test_shards_match_glop_on_random_small_clusters():
    rng = random.Random(1717)
    ells = [F(1), F(8, 7), F(4, 3), F(3, 2), F(2), F(3), F(5, 2)]
    for _ in range(30):
        q = rng.randint(2, 8)
        e = [rng.choice(ells) for _ in range(q)]
        x = direct.shard_lp(e)
        assert sum(x) == 1 and min(x) >= 0
        assert float(max(direct.loads(e, x))) == pytest.approx(glop_direct_lp(e), abs=1e-9), e


PROVED = [([1, F(4, 3), 2, 1], 1), ([1, F(4, 3), 2, 1], 3), ([1, 2, 2, 1], 2), ([2, F(3, 2), 1, 1], 4),
          ([2, 1, 1, 1], 2), ([3, 1, 1, 2, F(8, 7), 1], 2), ([2, 3], 3), ([F(3, 2)] * 3, 2)]


@pytest.mark.parametrize("ells,k", PROVED, ids=str)
def test_proved_and_slot_time_is_the_schedules(ells, k):
    c = g1(ells)
    s = direct.build(c, k)
    assert s.meta["algorithm"] == "direct"
    proof = prove_allreduce(s)
    assert proof.proved, proof.counterexample
    assert proof.reported["deterministic"] and proof.reported["numerics"], proof.reported_counterexamples
    assert check_capacity(s) is None and simulate(s).correct
    t = slot_time(s)
    assert t == direct.slot_time(c, k)
    assert direct.fluid_time(c) <= t <= (1 + F(1, k)) * direct.fluid_time(c)


def test_zero_shards_get_no_pieces():
    c = g1([2, 1, 1, 1])                                 # the straggler owns nothing: x_0 = 0
    assert direct.shards(c)[0] == 0
    s = direct.build(c, 3)
    assert len(s.pieces) == 3 * 3 and all(f.piece < 9 for f in s.flows)


def test_uniform_is_the_ring_time_at_every_k():
    for q in (3, 4, 8):
        for k in (1, 5):
            assert direct.slot_time(g1([F(3, 2)] * q), k) == F(3, 2) * F(2 * (q - 1), q)


def test_refuses_g_above_1():
    with pytest.raises(OptccError) as e:
        direct.build(Cluster.build(8, 2, {0: 2}), 2)
    assert e.value.field == "g"


@pytest.mark.parametrize("pxn", [True, False])
def test_two_degraded_servers_p16_g4_within_3_percent(pxn):
    """Issue 17's p = 16, g = 4 two-degraded-server rows (benchmarks/failure_patterns.py):
    1.158 (PXN) and 1.073 (no PXN) of the exclusive LP with optcc_multi / ring rails; the direct
    rails bring both within 3% at k = 64."""
    c = Cluster.build(16, 4, failed_nics=[(1, 1), (2, 2)], pxn=pxn)
    plan = optcc_rails._best_plan(c, 64, materialize=False)
    for l, (sched, _, _) in enumerate(plan.rails):       # the rails with two slow GPUs take direct
        if len(optcc_rails.rail_cluster(c, l).stragglers) >= 2:
            assert sched.meta["algorithm"] == "direct"
    lp = solve_fluid_lp(c, "exclusive")
    assert lp.optimal
    ratio = float(optcc_rails.slot_time(c, 64)) / lp.objective
    assert ratio <= 1.03
    assert ratio == pytest.approx(1.0169 if pxn else 1.0247, abs=1e-3)


def test_fig21_g8_p32_rails_within_3_percent_of_the_exclusive_lp():
    """Two straggler servers at ℓ = (2, 3/2), g = 8, p = 32 (q = 4 rails [2, 3/2, 1, 1]):
    1.41 × the flat ring's fault-free time at α = 0 before; the rails now reach their LP."""
    slow = {i: F(2) for i in range(8)} | {8 + i: F(3, 2) for i in range(8)}
    c = Cluster.build(32, 8, slow)
    lp = solve_fluid_lp(c, "exclusive")
    assert lp.optimal and float(optcc_rails.slot_time(c, 64)) / lp.objective <= 1.03


def test_rails_cluster_with_direct_is_proved():
    c = Cluster.build(16, 4, failed_nics=[(1, 1), (2, 2)])
    s = optcc_rails.build(c, 8)
    plan = optcc_rails._best_plan(c, 8, materialize=False)
    assert any(sched.meta["algorithm"] == "direct" for sched, _, _ in plan.rails)
    proof = prove_allreduce(s)
    assert proof.proved, proof.counterexample
    assert slot_time(s) == optcc_rails.slot_time(c, 8)


def test_verifier_refutes_a_direct_schedule_missing_one_add():
    c = g1([1, F(4, 3), 2, 1])
    s = direct.build(c, 2)
    drop = next(i for i, f in enumerate(s.flows) if f.op == "add")
    s.flows.pop(drop)
    proof = prove_allreduce(s)
    assert not proof.proved and not proof.properties["sum"]


@pytest.mark.parametrize("cluster,k", [(Cluster.build(64, 8, failed_nics=[(1, 1), (2, 4)]), 64),   # direct loses
                                       (Cluster.build(32, 8, {i: F(2) for i in range(8)}), 16),
                                       (Cluster.build(16, 4, {0: 2}), 3)], ids=str)
def test_rails_never_slower_than_without_direct(cluster, k):
    """_best_plan keeps the rails without direct where direct's NVLink lead costs more than its
    rails save (p = 64, g = 8, two servers), and is never slower than them."""
    without = optcc_rails._Plan(cluster, k, materialize=False, rails=optcc_rails._rails(cluster, k, False))
    best = optcc_rails._best_plan(cluster, k, materialize=False)
    assert best.end <= without.end
    if cluster.p == 64:
        assert best.end == without.end and all(s.meta["algorithm"] != "direct" for s, _, _ in best.rails)


def test_flows_share_their_rate_objects_and_the_shard_lp_is_solved_once():
    """The rails' plan builds the direct AllReduce for every k: its flows hold one rate object per
    (round kind, owner, peer), not one each (durations reads each object once), and the shard LP of a slowdown tuple is solved once, each
    caller getting its own list."""
    ells = (1, F(4, 3), 2, 1)
    s = direct.build(g1(ells), 16)
    assert len({id(f.rate) for f in s.flows}) <= 3 * 4 * 3 < len(s.flows) // 10
    before = direct._shard_lp.cache_info()
    x = direct.shard_lp(ells)
    x[0] = F(7)
    assert direct.shard_lp(ells) == [F(1, 3), F(4, 15), F(1, 15), F(1, 3)]
    assert direct._shard_lp.cache_info().misses == before.misses
