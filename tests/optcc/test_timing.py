"""Timing: slot and event model against hand-computed cases; capacity violations located."""
from fractions import Fraction as F

import pytest

from bounds.closed_form import fault_free_optimum, lower_bound
from optcc.algorithms.ring.build import ring_allreduce
from optcc.cluster import Cluster
from optcc.schedule import Flow, Schedule
from optcc_app.compose.timing_report import time_schedule
from optcc.timing import check_capacity, event_time, slot_time


@pytest.mark.parametrize("p", [2, 3, 5, 8, 16])
@pytest.mark.parametrize("k", [1, 4])
def test_ring_fault_free_is_t0_exactly(p, k):
    rep = time_schedule(ring_allreduce(Cluster.build(p), k))
    assert rep.slot_time == F(2 * (p - 1), p) == rep.t0 == rep.lower_bound
    assert rep.event_time == rep.slot_time
    assert rep.violation is None


@pytest.mark.parametrize("ell", ["8/7", "3/2", 2, 3])
def test_ring_with_straggler_costs_ell_t0(ell):
    c = Cluster.build(8, stragglers={3: ell})
    rep = time_schedule(ring_allreduce(c, 2))
    assert rep.slot_time == F(ell) * fault_free_optimum(8)
    assert rep.lower_bound == lower_bound(c)


def test_hand_computed_durations_and_event_model():
    # p = 3, straggler 0 at ℓ = 2, one piece of size 1/2 and one of 1/2.
    c = Cluster.build(3, stragglers={0: 2})
    flows = [Flow(1, 0, 0, "add", F(0)),      # 1/2 · 2 = 1
             Flow(2, 1, 1, "add", F(0)),      # 1/2 · 1 = 1/2
             Flow(0, 2, 0, "copy", F(5))]     # starts late in the slot model; ASAP can start at 1
    s = Schedule(c, [F(1, 2), F(1, 2)], flows)
    assert slot_time(s) == 6
    assert event_time(s) == 2
    assert event_time(s, alpha_units=F(1, 10)) == F(22, 10)   # two flows in sequence, α each
    assert check_capacity(s) is None


def test_capacity_violation_is_located():
    c = Cluster.build(4)
    flows = [Flow(1, 2, 0, "add", F(0)), Flow(3, 2, 0, "add", F(1, 4))]   # both arrive at 2, overlap
    s = Schedule(c, [F(1)], flows)
    v = check_capacity(s)
    assert v.port == (2, "nic", "recv") and v.time == F(1, 4) and v.flows == [0, 1]
    assert "rank 2" in v.describe(s)


def test_shared_model_allows_split_ports_exclusive_does_not():
    # Healthy 1 sends to straggler 0 (ℓ = 2) at rate 1, which takes half of 1's bandwidth in
    # the shared model, so a concurrent half-rate flow to 2 fits; under the paper's rule it does not.
    c = Cluster.build(3, stragglers={0: 2})
    flows = [Flow(1, 0, 0, "add", F(0)), Flow(1, 2, 0, "add", F(0), rate=F(1, 2))]
    shared = Schedule(c, [F(1)], flows, meta={"capacity": "shared"})
    assert check_capacity(shared) is None
    exclusive = Schedule(c, [F(1)], flows)
    assert check_capacity(exclusive).port == (1, "nic", "send")


def test_durations_share_one_object_per_value_whatever_the_rate_objects():
    """Flows with equal rates held in distinct objects get one duration object per value (what
    IntegerTimes reads once per object), and the values are the cluster's."""
    from optcc.timing import IntegerTimes, durations
    c = Cluster.build(3, stragglers={0: F(2)})
    flows = [Flow(i, (i + 1) % 3, 0, "copy", F(0), "nic", F(1, 2) + 0) for i in range(3)]
    assert len({id(f.rate) for f in flows}) == 3
    s = Schedule(c, [F(1)], flows)
    d = durations(s)
    assert d == [c.nic_time(f.src, f.dst, F(1), F(1, 2)) for f in flows] == [4, 2, 4]
    assert len({id(x) for x in d}) == len(set(d)) == 2
    assert IntegerTimes(s).durs == [4, 2, 4]
