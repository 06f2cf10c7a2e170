"""LP → Schedule (lp_models.to_schedule): proved, within 2% of the LP optimum at k = 64."""
from fractions import Fraction as F

import pytest

from bounds.closed_form import lower_bound
from lp_models.fluid import solve_fluid_lp
from lp_models.to_schedule import lp_schedule
from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.schedule import Schedule
from optcc.simulate import simulate
from optcc_app.compose.timing_report import time_schedule
from optcc.timing import check_capacity
import verifier


@pytest.mark.parametrize("p", [5, 8, 16])
@pytest.mark.parametrize("ell", [F(8, 7), F(3, 2), F(2)])
def test_shared_schedule_is_proved_and_within_2_percent_at_k64(p, ell):
    cluster = Cluster.build(p, stragglers={0: ell})
    sched = lp_schedule(cluster, 64, "shared")
    assert sched.meta["capacity"] == "shared"
    assert any(f.rate < 1 for f in sched.flows)
    rep = time_schedule(sched)
    assert rep.violation is None
    lp = sched.meta["lp_optimum"]
    assert abs(lp - float(lower_bound(cluster))) < 1e-9 * lp
    assert float(rep.slot_time) <= 1.02 * lp
    assert rep.slot_time >= lower_bound(cluster)          # beating the bound would be a bug
    proof = verifier.prove_allreduce(sched)
    assert proof.proved, proof.counterexample


@pytest.mark.parametrize("p,ell", [(5, F(3, 2)), (8, F(8, 7)), (6, F(3))])
def test_exclusive_schedule_reaches_the_exclusive_lp(p, ell):
    cluster = Cluster.build(p, stragglers={0: ell})
    sched = lp_schedule(cluster, 64, "exclusive")
    rep = time_schedule(sched)
    assert rep.capacity == "exclusive" and rep.violation is None
    exc = solve_fluid_lp(cluster, "exclusive").objective
    assert exc <= float(rep.slot_time) <= 1.02 * exc
    assert verifier.prove_allreduce(sched).proved


def test_multi_straggler_schedule_is_correct():
    cluster = Cluster.build(7, stragglers={0: F(3, 2), 3: F(6, 5)})
    sched = lp_schedule(cluster, 8, "shared")
    assert simulate(sched).correct
    assert check_capacity(sched) is None
    assert verifier.prove_allreduce(sched).proved
    # k = 8: slot time is (1 + 1/8 + 1/128) × the exact-share load
    assert float(time_schedule(sched).slot_time) <= (1 + 1 / 8 + 1 / 128) * sched.meta["lp_optimum"] * (1 + 1e-6)


def test_shared_schedule_breaks_under_the_exclusive_rule_when_ell_below_2():
    """The shared optimum needs bandwidth sharing: under the paper's port rule it is over capacity."""
    cluster = Cluster.build(8, stragglers={0: F(3, 2)})
    sched = lp_schedule(cluster, 4, "shared")
    assert check_capacity(sched, "shared") is None
    assert check_capacity(sched, "exclusive") is not None


def test_schedule_round_trips_through_json():
    sched = lp_schedule(Cluster.build(4, stragglers={1: F(3, 2)}), 2)
    again = Schedule.from_json(sched.to_json())
    assert again.sha256() == sched.sha256()


def test_refuses_bad_input():
    with pytest.raises(OptccError, match="^segments: "):
        lp_schedule(Cluster.build(4), 0)
    with pytest.raises(OptccError, match="^g: "):
        lp_schedule(Cluster.build(8, 2), 4)


@pytest.mark.parametrize("capacity", ["shared", "exclusive"])
@pytest.mark.parametrize("p,k", [(2, 1), (4, 8), (5, 3)])
def test_fault_free_cluster(capacity, p, k):
    """No stragglers (one LP class): every size and start is an exact Fraction, the schedule is
    correct and proved, and it takes T0 · (1 + 1/k + 1/(2k²)) (the module's slot-time formula)."""
    from bounds.closed_form import fault_free_optimum
    sched = lp_schedule(Cluster.build(p), k, capacity)
    assert all(type(x) is F for x in sched.pieces) and sum(sched.pieces) == 1
    assert all(type(f.start) is F and type(f.rate) is F for f in sched.flows)
    assert simulate(sched, seed=0).correct and simulate(sched, seed=1).correct
    proof = verifier.prove_allreduce(sched)
    assert proof.proved, proof.counterexample
    t0 = fault_free_optimum(p, 1)
    assert time_schedule(sched).slot_time == t0 * (1 + F(1, k) + F(1, 2 * k * k))
