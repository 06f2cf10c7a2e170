"""optcc.event_timer: equal to optcc.timing.event_time on generated schedules of every
construction, latency preset and g; NCCLNoFailure's array generator gives the real schedule's
flows; the closed forms of optcc.model_time are upper bounds on these event times."""
from fractions import Fraction as F

import pytest

from optcc.algorithms.baselines import flat_ring_allreduce, flat_ring_slot_time, hierarchical_ring_allreduce
from optcc.algorithms.registry import choose
from optcc.cluster import Cluster
from optcc.latency import units
from optcc.model_time import model_time
from optcc.schedule import Schedule
from optcc.timing import IntegerTimes, event_time
from paper_checks import per_model as P
from paper_checks import settings as S
from optcc.event_timer import Prepared, fast_event_time, ring_event_time, ring_flow_tuples
from verifier_cases import local_op_p2

N = 8 * 2**30
MODELS = ("alpha", "simai", "nccl")
# (p, g, ℓ or (ℓ1, ℓ2), k): optcc_single, optcc_multi, all_slow, optcc_servers, optcc_rails
CASES = [(8, 1, F(2), 5), (12, 1, F(8, 7), 16), (16, 1, F(4, 3), 40), (9, 1, (F(3), F(3, 2)), 5),
         (10, 1, (F(2), F(4, 3)), 12), (16, 4, F(2), 12), (16, 8, F(2), 9), (24, 8, F(8, 7), 4),
         (16, 4, (F(2), F(3, 2)), 8), (32, 8, (F(2), F(3, 2)), 6)]


def _all_slow_case():
    c = Cluster.build(6, stragglers={i: F(2) for i in range(6)}, latency_model="simai")
    return c


@pytest.mark.parametrize("p,g,ells,k", CASES)
def test_fast_event_time_equals_event_time(p, g, ells, k):
    for model in MODELS:
        c = P.cluster(p, g, ells, model)
        s = choose(c).build(c, k)
        grid = IntegerTimes(s)
        o, li, lat = units(c, N)
        for scale in (1, 40):            # the preset, and latencies 40× larger (past the knee)
            e = event_time(s, o * scale, grid, li * scale, lat * scale)
            assert fast_event_time(s, o * scale, li * scale, lat * scale, grid) == e
        mt = model_time("optcc", c, k, N)
        if mt.valid:                     # the closed form is an upper bound on the event time
            assert mt.time >= event_time(s, o, grid, li, lat)


def test_fast_event_time_with_local_ops_and_all_slow():
    c = _all_slow_case()
    for k in (1, 3):
        s = choose(c).build(c, k)
        for o, li, lat in [(F(0), F(0), F(0)), (F(1, 50), F(1, 70), F(1, 30))]:
            assert fast_event_time(s, o, li, lat) == event_time(s, o, None, li, lat)
    multi = P.cluster(9, 1, (F(3), F(3, 2)), "simai")
    s = choose(multi).build(multi, 4)
    assert fast_event_time(s, F(1, 90), F(1, 77), F(1, 33)) == event_time(s, F(1, 90), None, F(1, 77), F(1, 33))
    s = local_op_p2()                     # a local op between flows: the vectorised timer reads it
    assert len(Prepared(s).ops) == 1
    assert fast_event_time(s, F(1, 90), F(1, 77), F(1, 33)) == event_time(s, F(1, 90), None, F(1, 77), F(1, 33))


@pytest.mark.parametrize("p,g,bandwidth", [(4, 1, S.NIC_BANDWIDTH), (16, 1, S.NIC_BANDWIDTH), (8, 2, S.NIC_BANDWIDTH),
                                         (16, 4, S.NIC_BANDWIDTH), (16, 8, S.NIC_BANDWIDTH), (32, 8, S.NIC_BANDWIDTH),
                                         (8, 8, S.NIC_BANDWIDTH), (16, 8, 2 * S.NIC_BANDWIDTH),
                                         (8, 8, 2 * S.NIC_BANDWIDTH), (16, 4, 4 * S.NIC_BANDWIDTH)])
def test_ring_event_time_is_the_baseline_schedules_event_time(p, g, bandwidth):
    """Also where NVLink at its share is slower than a NIC hop (100 GB/s NICs, g = 8: s_nv = 9/2 <
    g − 1), where the flat ring's step is its NVLink hop."""
    for model in MODELS:
        c = Cluster.build(p, g, bandwidth=bandwidth, nvlink_bandwidth=S.NVLINK_BANDWIDTH, latency_model=model)
        s = flat_ring_allreduce(c)
        assert sorted((f.src, f.dst, f.piece, f.start, f.link) for f in s.flows) == sorted(ring_flow_tuples(c))
        o, li, lat = units(c, N)
        e = event_time(s, o, None, li, lat)
        assert ring_event_time(c, o, li, lat) == e
        closed = model_time("ring", c, 1, N).time
        assert closed >= e                                   # the closed form: an upper bound
        if g == 1:
            assert closed == e                               # exact for the ring
    # the flat ring's closed form charges 2(p−1) latencies; its event time pays one (g = 8, p = 16)
    c = Cluster.build(16, 8, bandwidth=S.NIC_BANDWIDTH, nvlink_bandwidth=S.NVLINK_BANDWIDTH, latency_model="simai")
    o, li, lat = units(c, N)
    slot = F(2 * 15, 8 * 16)
    if (p, g, bandwidth) == (16, 8, S.NIC_BANDWIDTH):
        assert ring_event_time(c, o, li, lat) == slot + li + lat


# SimGrid's replay of the flat ring (a work-conserving NVLink, max-min shares),
# n/B at 8 GiB, 100 GB/s NICs, 450 GB/s NVLink, g = 8, simai
SIMGRID_FLAT_RING = {64: 0.382859, 128: 0.385897}


@pytest.mark.parametrize("p", [16, 64, 128, 1024])
def test_nvlink_bound_flat_ring_pays_one_latency(p):
    """100 GB/s NICs, g = 8 (s_nv = 9/2 < g − 1): each GPU's g − 1 NVLink hops a step are one
    batch (optcc.timing), sent one after another at the port's full rate. Derived closed form:
    T = slot + Li + L (o = 0). The port is busy from Li to slot + Li without a gap: the hop a batch
    serves first gets its data from a hop the previous GPU served no later in its batch, one
    hop time w = shard/s_nv earlier per step than needed at least ((g − 2)·w ≥ Li + L here), so
    only the first issue delay and the last landing show. It used to pay Li + L nearly every step
    (slot + 1754 (Li + L) at p = 1024, +21%; 0.387888 and 0.396002 n/B at p = 64 and 128)."""
    c = Cluster.build(p, 8, bandwidth=100e9, nvlink_bandwidth=450e9, latency_model="simai")
    o, li, lat = units(c, N)
    assert o == 0 and (8 - 2) * F(1, 8 * p) / c.nvlink_speedup >= li + lat
    t = ring_event_time(c, o, li, lat)
    assert t == flat_ring_slot_time(c) + li + lat
    if p in SIMGRID_FLAT_RING:
        assert round(float(t), 6) == SIMGRID_FLAT_RING[p]
    if p <= 16:
        s = flat_ring_allreduce(c)
        assert event_time(s, o, None, li, lat) == t


def test_nvlink_batches_do_not_depend_on_listing_order():
    """A batch is served in piece order whatever order the flows are listed in (both timers)."""
    import random
    for c in (Cluster.build(16, 8, bandwidth=100e9, nvlink_bandwidth=450e9, latency_model="simai"),
              Cluster.build(8, 4, stragglers={0: 2, 1: 2, 2: 2, 3: 2}, latency_model="alpha")):
        for build in (flat_ring_allreduce, hierarchical_ring_allreduce):
            s = build(c)
            flows = list(s.flows)
            random.Random(7).shuffle(flows)
            shuffled = Schedule(c, s.pieces, flows, meta=s.meta)
            o, li, lat = units(c, N)
            want = event_time(s, o, None, li, lat)
            assert event_time(shuffled, o, None, li, lat) == fast_event_time(shuffled, o, li, lat) == want
