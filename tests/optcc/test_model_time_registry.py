"""optcc.model_time for the registry's issue-17 entries (optcc_rails, all_slow): it names the
construction build_schedule runs, its slot is the schedule's, and its overhead count A bounds
the event model's time over o (derived in optcc/latency_counts.py; tested here, not proved)."""
from fractions import Fraction as F

import pytest

from optcc.algorithms import build_schedule
from optcc.algorithms.registry import choose
from optcc.cluster import Cluster
from optcc.model_time import knee, model_time, overhead_count, served_by, slot
from optcc.timing import IntegerTimes, event_time, slot_time

N = 2**30
RAILS = [Cluster.build(8, 2, {0: F(2)}),                                   # mixed ℓ in one server
         Cluster.build(12, 2, {0: F(2), 1: F(2), 4: F(3, 2), 5: F(3, 2)}),  # two straggler servers
         Cluster.build(16, 4, failed_nics=[(1, 1)], pxn=False)]             # a lost NIC without PXN
ALL_SLOW = [Cluster.build(5, 1, {i: F(3, 2) + i for i in range(5)}),
            Cluster.build(6, 1, {0: 3, 1: 2, 2: 2, 3: F(5, 2), 4: 2, 5: 4})]


@pytest.mark.parametrize("cluster,name", [(c, "optcc_rails") for c in RAILS] + [(c, "all_slow") for c in ALL_SLOW])
def test_kind_slot_and_overhead_count(cluster, name):
    assert served_by("optcc", cluster) == choose(cluster).name == name
    for k in (1, 3):
        s = build_schedule("optcc", cluster, k)
        grid = IntegerTimes(s)
        assert slot("optcc", cluster, k) == slot_time(s, grid)
        a = overhead_count("optcc", cluster, k)
        for o in (F(1, 10**5), F(1, 100)):
            assert event_time(s, o, grid) <= slot_time(s, grid) + a * o


def test_rails_latency_is_modelled_below_its_knee():
    """optcc_rails' B and knee (optcc.algorithms.rails.counts; tested in tests/optcc/test_model_time_rails.py)."""
    c = RAILS[1]
    assert 0 < knee("optcc", c, 4) <= F(1, 4 * 12)
    assert model_time("optcc", c, 4, N).valid                        # Li = L = 0
    lat = c.with_latency(F(0), F(0), F(1, 10**6))
    mt = model_time("optcc", lat, 4, N)
    assert mt.valid and mt.slot == slot("optcc", c, 4)
    far = c.with_latency(F(0), F(0), F(1, 10**3))                    # λ ≈ 0.05 n/B: past the knee
    assert not model_time("optcc", far, 4, N).valid


def test_all_slow_counts_are_the_reduced_clusters():
    from optcc.algorithms.all_slow.build import reduced
    c = ALL_SLOW[1].with_latency(F(0), F(1, 10**6), F(1, 10**6))
    red, scale = reduced(c)
    assert scale == 2 and red.issue_delay == c.issue_delay and red.latency == c.latency
    mt, mr = model_time("optcc", c, 4, N), model_time("optcc", red, 4, N)
    assert (mt.overheads, mt.latencies, mt.valid) == (mr.overheads, mr.latencies, mr.valid)
    assert mt.slot == 2 * mr.slot
