"""The event model with a work-conserving NVLink (optcc.event_maxmin, `event_time(...,
nvlink="max-min")`): NVLink streams below rate 1 share their server's ports max-min while they
run. SimGrid's replay agrees on the rails (tests/optcc/test_simgrid_disciplines.py)."""
from fractions import Fraction as F

import pytest

from optcc.algorithms.baselines import flat_ring_allreduce
from optcc.algorithms.registry import choose
from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.latency import units
from optcc.schedule import Flow, Schedule
from optcc.timing import event_time

N = 8 * 2**30


def _one_server_two_streams():
    """GPU 0 of a 3-GPU server (NVLink as fast as the NIC) streams a quarter of n to GPU 1 and half
    of n to GPU 2 at once, each at rate 1/2: stated, they end at 1/2 and 1; shared max-min, both
    run at 1/2 until the first ends at 1/2, then the second alone at rate 1 ends at 3/4."""
    c = Cluster.build(3, 3, bandwidth=100e9, nvlink_bandwidth=100e9)
    half = F(1, 2)
    return Schedule(c, [F(1, 4), F(1, 2), F(1, 4)],
                    [Flow(0, 1, 0, "copy", F(0), "nvlink", half), Flow(0, 2, 1, "copy", F(0), "nvlink", half)])


def test_a_stream_left_alone_takes_the_whole_port():
    s = _one_server_two_streams()
    assert event_time(s) == 1
    assert event_time(s, nvlink="max-min") == F(3, 4)


def test_the_overhead_and_latency_are_the_event_models():
    """o delays a stream's start (both start at o), L its landing: 3/4 + o + L."""
    s = _one_server_two_streams()
    assert event_time(s, F(1, 10), None, F(0), F(1, 20), nvlink="max-min") == F(3, 4) + F(1, 10) + F(1, 20)


@pytest.mark.parametrize("name", ["ring p=8", "flat ring g=8 (NVLink batches)", "optcc p=8", "optcc_multi p=9"])
def test_without_streams_below_rate_1_it_is_the_event_model(name):
    """No NVLink flow below rate 1 outside a batch: the same Fraction as the event model."""
    cases = {
        "ring p=8": lambda: flat_ring_allreduce(Cluster.build(8, bandwidth=50e9, latency_model="simai")),
        "flat ring g=8 (NVLink batches)": lambda: flat_ring_allreduce(
            Cluster.build(16, 8, bandwidth=100e9, nvlink_bandwidth=450e9, latency_model="simai")),
        "optcc p=8": lambda: _built(Cluster.build(8, 1, {0: F(2)}, bandwidth=50e9, latency_model="simai"), 4),
        "optcc_multi p=9": lambda: _built(Cluster.build(9, 1, {0: F(3), 1: F(3, 2)}, bandwidth=50e9,
                                                        latency_model="simai"), 3),
    }
    s = cases[name]()
    o, li, lat = units(s.cluster, N)
    assert event_time(s, o, None, li, lat, nvlink="max-min") == event_time(s, o, None, li, lat)


def _built(c, k):
    return choose(c).build(c, k)


def test_the_rails_straggler_stream_takes_what_the_ports_leave():
    """OptCC's rails at g = 8, 100 GB/s, p = 24, ℓ = 2, k = 1: the straggler's rail streams at 4/63
    where the others run at 1/7; max-min is 8.98% faster (SimGrid: the same to 1e-9)."""
    c = Cluster.build(24, 8, {0: F(2)}, bandwidth=100e9, nvlink_bandwidth=450e9, latency_model="simai")
    s = _built(c, 1)
    o, li, lat = units(c, N)
    stated, shared = event_time(s, o, None, li, lat), event_time(s, o, None, li, lat, nvlink="max-min")
    assert round(float(stated), 9) == 0.583566164 and round(float(shared), 9) == 0.535493234


def test_bad_sharing_names_the_field():
    s = _one_server_two_streams()
    with pytest.raises(OptccError, match="nvlink.*expected one of"):
        event_time(s, nvlink="fair")
    with pytest.raises(OptccError, match="nvlink.*exclusive discipline only"):
        event_time(s, discipline="step", nvlink="max-min")
