"""The event model's port disciplines (optcc.timing.DISCIPLINES): exclusive (slot order), step
(step-synchronous ranks), shared (receivers max-min, optcc.event_shared)."""
from fractions import Fraction as F

import pytest

from optcc.algorithms.baselines import flat_ring_allreduce
from optcc.algorithms.registry import choose
from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.event_shared import water_fill
from optcc.event_timer import Prepared, ring_event_time
from optcc.latency import units
from optcc.schedule import Flow, Schedule
from optcc.timing import event_time

N = 8 * 2**30


def test_water_fill_is_max_min():
    assert water_fill(F(1), [F(1, 4), F(1)]) == [F(1, 4), F(3, 4)]
    assert water_fill(F(1), [F(1), F(1), F(1)]) == [F(1, 3)] * 3
    assert water_fill(F(1, 2), [F(1), F(1, 8)]) == [F(3, 8), F(1, 8)]


def test_two_senders_share_a_receiver():
    """0 → 2 and 1 → 2 at once, 1/2 each. exclusive trusts the schedule's ports (it never queues
    two flows of one start: 1/2); shared splits 2's port: both end at 1. A slow sender (ℓ = 4)
    keeps its 1/4 and the other gets 3/4: sizes 1/4 and 3/4 both end at 1."""
    c = Cluster.build(3)
    s = Schedule(c, [F(1, 2), F(1, 2)], [Flow(0, 2, 0, "add", F(0)), Flow(1, 2, 1, "add", F(0))])
    assert event_time(s) == event_time(s, discipline="step") == F(1, 2)
    assert event_time(s, discipline="shared") == 1
    c = Cluster.build(3, stragglers={0: 4})
    s = Schedule(c, [F(1, 4), F(3, 4)], [Flow(0, 2, 0, "add", F(0)), Flow(1, 2, 1, "add", F(0))])
    assert event_time(s, discipline="shared") == 1
    with pytest.raises(OptccError, match="discipline"):
        event_time(s, discipline="fair")


@pytest.mark.parametrize("p,g,bw", [(4, 1, 50e9), (8, 1, 50e9), (8, 4, 50e9), (16, 8, 100e9)])
def test_the_ring_is_the_same_under_shared_and_step_is_timed_alike(p, g, bw):
    """The fault-free ring has one sender per receiver per step and link: shared = exclusive
    (ring_event_time's rule). step: the array timer, ring_event_time and the reference agree."""
    c = Cluster.build(p, g, bandwidth=bw, nvlink_bandwidth=450e9, latency_model="simai")
    s = flat_ring_allreduce(c)
    o, li, lat = units(c, N)
    ex = event_time(s, o, None, li, lat)
    assert event_time(s, o, None, li, lat, "shared") == ex == ring_event_time(c, o, li, lat, "shared")
    st = event_time(s, o, None, li, lat, "step")
    assert st == ring_event_time(c, o, li, lat, "step") == Prepared(s).event_time(o, li, lat, "step") >= ex


@pytest.mark.parametrize("p,g,ells,k", [(8, 1, {0: F(2)}, 4), (9, 1, {0: F(3), 1: F(3, 2)}, 3),
                                        (16, 4, {i: F(2) for i in range(4)}, 3)])
def test_step_array_timer_equals_the_reference(p, g, ells, k):
    for model in ("alpha", "simai"):
        c = Cluster.build(p, g, ells, latency_model=model)
        s = choose(c).build(c, k)
        o, li, lat = units(c, N)
        assert Prepared(s).event_time(o, li, lat, "step") == event_time(s, o, None, li, lat, "step")


def test_step_waits_for_what_the_schedule_ends_before_not_for_a_flow_beside():
    """Rank 0 sends 0 → 1 (1/2 of n, slots 0–1/2) while it receives 2 → 0 (slots 0–1/4) and then
    3 → 0 (1/4–1/2), L = 1/10. exclusive: 3 → 0 follows 2 → 0 on 0's receive port (ended at 1/4),
    lands at 3/5. step: it also waits for 2 → 0 to land (0.35: rank 0's flow the schedule ends by
    its start), so 7/10; not for 0 → 1, which the schedule runs beside it (waiting for it too,
    19/20, would serialise what the schedule overlaps)."""
    c = Cluster.build(4)
    s = Schedule(c, [F(1, 2), F(1, 4), F(1, 4)], [Flow(0, 1, 0, "add", F(0)), Flow(2, 0, 1, "add", F(0)),
                                                  Flow(3, 0, 2, "add", F(1, 4))])
    assert event_time(s, latency_units=F(1, 10)) == F(3, 5)
    assert event_time(s, latency_units=F(1, 10), discipline="step") == F(7, 10)
    assert Prepared(s).event_time(F(0), F(0), F(1, 10), "step") == F(7, 10)


def test_optcc_is_slower_under_shared_and_step():
    """One straggler at ℓ = 2, p = 8, k = 4 (simai): its healthy GPUs upload to the straggler at
    once, which the exclusive rule queues and the shared rule splits; step-synchronous ranks wait
    for the landing (L) of what their ranks' earlier flows delivered, not for the straggler's long
    flows beside them. Both are slower than exclusive; step barely (0.02%), shared by 14%."""
    c = Cluster.build(8, 1, {0: F(2)}, bandwidth=50e9, latency_model="simai")
    s = choose(c).build(c, 4)
    o, li, lat = units(c, N)
    ex, sh, st = (event_time(s, o, None, li, lat, d) for d in ("exclusive", "shared", "step"))
    assert ex < st < sh
    assert round(float(ex), 4) == 2.5005 and round(float(sh), 4) == 2.8397 and round(float(st), 4) == 2.5010
