"""CP-SAT models (lp_models.slot_timing, lp_models.slot_search): optimal timing and from-scratch trees."""
from fractions import Fraction as F

import pytest

from bounds.closed_form import lower_bound
from lp_models.fluid import solve_fluid_lp
from lp_models.slot_search import optimal_tree_schedule
from lp_models.slot_timing import optimal_timing
from optcc.algorithms.single.build import optcc_allreduce
from optcc.algorithms.ring.build import ring_allreduce
from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.schedule import Flow, Schedule
from optcc_app.compose.timing_report import time_schedule
from optcc.timing import durations, slot_time
import verifier


def test_durations_use_the_slower_end_with_straggler_at_rank_0():
    """Regression: timing.durations once took the slower end by class id, not by ℓ."""
    c = Cluster.build(3, stragglers={0: F(3, 2)})
    s = Schedule(c, [F(1, 2)] * 2, [Flow(2, 0, 0, "add", F(0)), Flow(0, 1, 1, "add", F(0)), Flow(1, 2, 0, "add", F(0))])
    assert durations(s) == [F(3, 4), F(3, 4), F(1, 2)]


def test_ring_timing_is_already_optimal():
    sched = ring_allreduce(Cluster.build(4, stragglers={1: F(3, 2)}), 2)
    res = optimal_timing(sched, time_limit_s=20)
    assert res.optimal and res.given_is_optimal is True and res.excess == 0
    assert res.best_time_exact == slot_time(sched)
    assert verifier.prove_allreduce(res.schedule).proved


def test_stretched_ring_is_retimed_back_and_stays_correct():
    ring = ring_allreduce(Cluster.build(4, stragglers={0: 2}), 2)
    slow = Schedule(ring.cluster, ring.pieces, [f._replace(start=3 * f.start) for f in ring.flows], meta=ring.meta)
    assert verifier.prove_allreduce(slow).proved
    res = optimal_timing(slow, time_limit_s=20)
    assert res.optimal and res.given_is_optimal is False and res.excess > 0
    assert res.best_time_exact == slot_time(ring)
    assert time_schedule(res.schedule).violation is None
    assert verifier.prove_allreduce(res.schedule).proved


@pytest.mark.parametrize("p", [3, 4, 5, 6])
@pytest.mark.parametrize("ell", [F(3, 2), F(2)])
@pytest.mark.parametrize("k", [1, 2])
def test_optcc_flows_retimed_optimally(p, ell, k):
    """Report, per case, whether OptCC's own timing is optimal for its flows (benchmarks/lp_slot_optcc.py
    prints the table, k up to 4); here: the solve is optimal, never worse, and the result proves."""
    sched = optcc_allreduce(Cluster.build(p, stragglers={0: ell}), k)
    res = optimal_timing(sched, time_limit_s=30)
    assert res.optimal, res.status
    assert res.best_time_exact <= slot_time(sched)
    assert res.given_is_optimal == (res.best_time_exact == slot_time(sched))
    assert verifier.prove_allreduce(res.schedule).proved


@pytest.mark.parametrize("p,ell,pieces", [(3, F(2), 2), (4, F(1), 2), (4, F(3, 2), 2), (3, F(3, 2), 2)])
def test_from_scratch_tree_schedule_is_proved_and_respects_the_bounds(p, ell, pieces):
    cluster = Cluster.build(p, stragglers={0: ell} if ell != 1 else {})
    res = optimal_tree_schedule(cluster, pieces, time_limit_s=60)
    assert res.optimal and res.gap == 0
    sched = res.schedule
    assert slot_time(sched) == res.objective_exact
    assert time_schedule(sched).violation is None
    assert verifier.prove_allreduce(sched).proved
    assert res.objective_exact >= lower_bound(cluster)
    assert res.objective >= solve_fluid_lp(cluster, "exclusive").objective * (1 - 1e-9)


def test_time_limit_is_reported_not_hidden():
    res = optimal_tree_schedule(Cluster.build(4, stragglers={0: 2}), 3, time_limit_s=0.05, workers=1)
    assert not res.optimal
    assert res.status in ("FEASIBLE", "UNKNOWN")
    if res.objective is not None:
        assert res.gap is not None and res.gap > 0
        assert res.schedule.meta["solver_status"] == res.status


def test_search_refuses_large_clusters():
    with pytest.raises(OptccError, match="^p: "):
        optimal_tree_schedule(Cluster.build(12))
