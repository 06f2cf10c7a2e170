"""Multi-straggler OptCC under pipelined latency (issue 13, item 4): with Li + L > 0 the
construction spreads consecutive ring hops 3 slots apart (optcc_multi.hop_spread), so its critical
path carries O(p + k) latencies instead of about (p−1)k/2. Proved, port-checked, closed form."""
from fractions import Fraction as F

import pytest

from optcc.algorithms.multi.build import hop_spread, optcc_multi_allreduce, optcc_multi_slot_time
from optcc.algorithms.multi.drain import drain_last_slot, drain_slots
from optcc.cluster import Cluster
from optcc.model_time import knee_fraction, latency_count, overhead_count, slot
from optcc.simulate import simulate
from optcc.timing import IntegerTimes, check_capacity, event_time, slot_time
from verifier import prove_allreduce

TINY = F(1, 10**9)      # seconds: any Li + L > 0 selects hop spread 3


def _cluster(p, st, lat=TINY, o=F(0)):
    return Cluster.build(p, stragglers=st, latency=lat, overhead=o)


PROOF_CASES = [
    (5, {0: F(2), 1: F(4, 3)}, 2),
    (7, {0: F(4, 3), 5: F(8, 7)}, 3),        # relay fill (no coincide rotation with spread 3)
    (6, {0: F(4, 3), 2: F(8, 7), 5: F(8, 7)}, 3),   # m = 3 chain fill
    (4, {1: F(3), 3: F(5, 2)}, 2),
]


@pytest.mark.parametrize("p,st,k", PROOF_CASES)
def test_spread3_proved_correct_and_exclusive(p, st, k):
    c = _cluster(p, st)
    assert hop_spread(c) == 3 and hop_spread(Cluster.build(p, stragglers=st)) == 1
    s = optcc_multi_allreduce(c, k)
    assert prove_allreduce(s).proved
    assert simulate(s).correct and check_capacity(s) is None
    assert all(f.rate == 1 for f in s.flows)


GRID = [(p, ells, k) for p in (3, 4, 5, 6, 8, 11, 16)
        for ells in ((F(4, 3), F(8, 7)), (F(2), F(4, 3)), (F(3), F(2)), (F(8, 7), F(8, 7)), (F(2), F(4, 3), F(8, 7)))
        for k in (1, 2, 5) if len(ells) < p]


@pytest.mark.parametrize("p,ells,k", GRID)
def test_spread3_closed_form_ports_and_sums(p, ells, k):
    c = _cluster(p, dict(enumerate(ells)))
    s = optcc_multi_allreduce(c, k)
    assert slot_time(s) == optcc_multi_slot_time(c, k) == slot("optcc", c, k)
    assert check_capacity(s) is None and simulate(s).correct


@pytest.mark.parametrize("m", [2, 3, 4])
def test_spread3_drain_last_hop_identity(m):
    for H in list(range(2, 12)) + [17, 30]:
        for k in (1, 2, 5):
            d = drain_slots(H, m, k, 3)
            assert len(d) >= H - 1
            assert max(d.values()) == drain_last_slot(H, m, k, 3)


CASES = [(p, ells, k) for p in (4, 5, 8, 11, 14, 20) for ells in ((F(4, 3), F(8, 7)), (F(2), F(4, 3)), (F(8, 7), F(8, 7)),
                                                               (F(2), F(4, 3), F(8, 7)))
         for k in (1, 2, 4, 8, 16) if len(ells) < p and p * k <= 160]


@pytest.mark.parametrize("p,ells,k", CASES)
def test_latency_count_is_p_plus_2k_below_the_knee(p, ells, k):
    """event_time(Li + L = λ) ≤ slot + (p − 1 + 2k)·λ for λ up to the knee 1/(k·p)."""
    c = _cluster(p, dict(enumerate(ells)))
    s = optcc_multi_allreduce(c, k)
    grid = IntegerTimes(s)
    b = latency_count("optcc", c, k)
    assert b == p - 1 + 2 * k and knee_fraction("optcc", c) == 1
    for x in (F(1, 8), F(1, 2), F(1)):
        lam = x / (k * p)
        assert event_time(s, F(0), grid, F(0), lam) <= slot_time(s, grid) + b * lam


@pytest.mark.parametrize("p,ells,k", CASES[::4])
def test_overhead_count_with_spread3(p, ells, k):
    c = _cluster(p, dict(enumerate(ells)))
    s = optcc_multi_allreduce(c, k)
    grid = IntegerTimes(s)
    a = overhead_count("optcc", c, k)
    assert a == 2 * (p - 1) * (k + 2) + (p - len(ells)) - 1
    for o in (F(1, 1000), F(1, 10)):
        assert event_time(s, o, grid) <= slot_time(s, grid) + a * o


@pytest.mark.parametrize("p,k", [(16, 8), (20, 8), (32, 4)])
def test_spread3_cuts_the_latency_slope(p, k):
    """The measured point of issue 13 item 4: ℓ = (2, 4/3). Spread 1's slope grows with (p−1)k
    (> (p−m−1)(k−2)/2); spread 3's stays ≤ p − 1 (at 1/(100kp), below any stall)."""
    st = {0: F(2), 1: F(4, 3)}
    lam = F(1, 100 * k * p)
    slopes = []
    for c in (Cluster.build(p, stragglers=st), _cluster(p, st)):
        s = optcc_multi_allreduce(c, k)
        grid = IntegerTimes(s)
        slopes.append((event_time(s, F(0), grid, F(0), lam) - event_time(s, F(0), grid)) / lam)
    assert slopes[0] > (p - 3) * (k - 2) / 2
    assert slopes[1] <= p - 1
