"""Closed-form model time (optcc.model_time) against the event model on generated schedules."""
from fractions import Fraction as F

import pytest

from optcc.algorithms import build_schedule
from optcc.cluster import Cluster
from optcc.model_time import knee_fraction, latency_count, model_time, overhead_count, slot
from optcc.timing import IntegerTimes, event_time, slot_time

N = 50 * 10**9          # n/B = 1 s at the default B, so seconds = units of n/B


def _cluster(p, g=1, ells=(2,), lam=F(0), o=F(0)):
    strag = {i: F(e) for i, e in enumerate(ells)} if g == 1 else {i: F(ells[0]) for i in range(g)}
    return Cluster.build(p, g, strag, overhead=o, latency=lam)


def _event(algo, c, k, o, lam):
    s = build_schedule(algo, c, k)
    grid = IntegerTimes(s)
    assert slot_time(s, grid) == slot(algo, c, k)          # the closed form is the slot time
    return event_time(s, o, grid, F(0), lam)


CASES = ([(p, 1, (ell,), k) for p in (3, 4, 5, 7, 9, 12, 17) for ell in (F(8, 7), F(4, 3), 2, 3)
          for k in (1, 2, 3, 5, 8, 16)]
         + [(p, 1, ells, k) for p in (5, 6, 8, 11, 14) for ells in ((F(4, 3), F(8, 7)), (2, F(4, 3)), (2, 2, F(4, 3)))
            for k in (1, 2, 4, 8)]
         + [(q * g, g, (ell,), k) for g in (2, 4) for q in (2, 3, 4, 6) for ell in (F(8, 7), 2) for k in (1, 2, 4, 8)])


@pytest.mark.parametrize("p, g, ells, k", CASES)
def test_latency_count_bounds_the_event_model_below_the_knee(p, g, ells, k):
    """event_time(Li + L = λ) ≤ slot + B·λ for λ up to the knee KNEE/(k·p)."""
    c = _cluster(p, g, ells)
    knee = knee_fraction("optcc", c)
    b = latency_count("optcc", c, k)
    for x in (F(1, 8), F(1, 2), F(1)):
        lam = x * knee / (k * p)
        assert _event("optcc", c, k, F(0), lam) <= slot("optcc", c, k) + b * lam


@pytest.mark.parametrize("p, g, ells, k", CASES[::3])
def test_overhead_count_bounds_the_event_model(p, g, ells, k):
    c = _cluster(p, g, ells)
    a = overhead_count("optcc", c, k)
    for o in (F(1, 1000), F(1, 10)):
        assert _event("optcc", c, k, o, F(0)) <= slot("optcc", c, k) + a * o


@pytest.mark.parametrize("p, ells, k", [(33, (2,), 4), (33, (F(4, 3),), 8), (64, (2,), 4), (64, (F(8, 7),), 2),
                                        (33, (2, F(4, 3)), 2), (64, (F(4, 3), F(8, 7)), 1)])
def test_counts_hold_up_to_p_64(p, ells, k):
    c = _cluster(p, 1, ells)
    lam = knee_fraction("optcc", c) / (k * p)
    assert _event("optcc", c, k, F(0), lam) <= slot("optcc", c, k) + latency_count("optcc", c, k) * lam
    o = F(1, 1000)
    assert _event("optcc", c, k, o, F(0)) <= slot("optcc", c, k) + overhead_count("optcc", c, k) * o


def test_single_knee_holds_at_p_128():
    """At the single-straggler knee 3/(4kp), p = 128: the slope is still 2(p−1) + 3(k−1) ≤ B."""
    c = _cluster(128, 1, (2,))
    lam = knee_fraction("optcc", c) / (4 * 128)
    assert _event("optcc", c, 4, F(0), lam) == slot("optcc", c, 4) + (2 * 127 + 3 * 3) * lam


@pytest.mark.parametrize("p, k", [(9, 2), (12, 4), (17, 8), (33, 8)])
def test_single_latency_count_is_tight_at_ell_2(p, k):
    """Stated tightness: ℓ = 2, k ≤ (p−1)/2: the event slope is ≥ 2(p−1) + 3(k−1), B − (k + 3)."""
    c = _cluster(p, 1, (2,))
    lam = F(1, 100) / (k * p)
    t = _event("optcc", c, k, F(0), lam)
    assert t >= slot("optcc", c, k) + (2 * (p - 1) + 3 * (k - 1)) * lam
    assert latency_count("optcc", c, k) - (2 * (p - 1) + 3 * (k - 1)) == k + 3


@pytest.mark.parametrize("p, g", [(4, 1), (7, 1), (16, 1), (64, 1), (8, 2), (16, 4)])
def test_fault_free_ring_is_exact_for_every_latency(p, g):
    """g = 1: exact; the flat ring (g > 1): an upper bound, exact in o alone."""
    c = Cluster.build(p, g)
    for o, lam in [(F(0), F(1, 7)), (F(1, 30), F(0)), (F(1, 50), F(3, 4)), (F(2), F(5))]:
        t = _event("ring", c, 1, o, lam)
        bound = slot("ring", c, 1) + 2 * (p - 1) * (o + lam)
        assert t == bound if g == 1 else t <= bound      # g > 1: NVLink hops have slack
        assert overhead_count("ring", c, 1) == latency_count("ring", c, 1) == 2 * (p - 1)
        if lam == 0:
            assert t == bound


def test_ring_with_segments_is_bounded_for_every_latency():
    c = Cluster.build(6, stragglers={2: 2})
    for k in (1, 3):
        for o, lam in [(F(1, 9), F(0)), (F(0), F(4)), (F(1, 3), F(1, 2))]:
            t = _event("ring", c, k, o, lam)
            assert t <= slot("ring", c, k) + overhead_count("ring", c, k) * o + latency_count("ring", c, k) * lam


def test_model_time_in_seconds_and_validity():
    c = Cluster.build(16, stragglers={0: 2}, latency_model="simai")
    n = 8 * 2**30
    mt = model_time("optcc", c, 8, n)
    lam = (c.issue_delay + c.latency) * c.bandwidth / n
    assert mt.valid and mt.time == slot("optcc", c, 8) + (2 * 15 + 32) * lam
    assert mt.seconds(c, n) == pytest.approx(float(mt.time) * n / 50e9)
    assert not model_time("optcc", c, 1024, 2**20).valid          # far past the knee
