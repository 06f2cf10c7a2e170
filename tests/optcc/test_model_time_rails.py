"""optcc_rails' closed-form counts (optcc.algorithms.rails.counts, derived) against the event model on
generated schedules: p ∈ {8, 16, 32}, g ∈ {2, 4, 8}, two degraded servers (uniform ℓ per server,
and mixed ℓ inside one), k ∈ {1, 2, 4, 8, 16}; tested, not proved."""
import importlib.util
from fractions import Fraction as F
from pathlib import Path

import pytest

from optcc.algorithms import build_schedule
from optcc.cluster import Cluster
from optcc.latency import units as latency_units
from optcc.model_time import knee, latency_count, model_time, overhead_count, served_by, slot
from optcc.algorithms.rails.counts import counts
from optcc.timing import IntegerTimes, event_time, slot_time

MIB = 2**20


# the grid benchmarks/rails_latency_counts.py measures (its one definition)
_spec = importlib.util.spec_from_file_location(
    "rails_latency_counts", Path(__file__).resolve().parents[2] / "benchmarks" / "rails_latency_counts.py")
RLC = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(RLC)
CLUSTERS = list(RLC.clusters())
KS = RLC.KS


def _schedule(slow, p, g, k, **lat):
    c = Cluster.build(p, g, slow, **lat)
    assert served_by("optcc", c) == "optcc_rails"
    s = build_schedule("optcc", c, k)
    grid = IntegerTimes(s)
    assert slot_time(s, grid) == slot("optcc", c, k)          # the closed form is the slot time
    return c, s, grid


@pytest.mark.parametrize("name,slow,p,g", CLUSTERS, ids=[c[0] for c in CLUSTERS])
def test_latency_count_bounds_the_event_model_below_the_knee(name, slow, p, g):
    """event_time(Li + L = λ) ≤ slot + B·λ for λ ∈ {1/8, 1/2, 1}·knee (knee = KNEE_rails/(k·p))."""
    for k in KS:
        c, s, grid = _schedule(slow, p, g, k)
        b, lim = latency_count("optcc", c, k), knee("optcc", c, k)
        assert 0 < lim <= F(1, k * p)
        for x in (F(1, 8), F(1, 2), F(1)):
            lam = x * lim
            assert event_time(s, F(0), grid, F(0), lam) <= slot("optcc", c, k) + b * lam
            assert event_time(s, F(0), grid, lam, F(0)) <= slot("optcc", c, k) + b * lam   # Li alone


@pytest.mark.parametrize("name,slow,p,g", CLUSTERS[::2] + CLUSTERS[1::4], ids=lambda v: v if isinstance(v, str) else "")
def test_preset_model_time_bounds_the_event_model(name, slow, p, g):
    """Under each preset (o, Li, L) and message size where model_time says valid, the event
    model is within it; both o and Li + L present (alpha has o only)."""
    checked = 0
    for k in (1, 4, 16):
        for model in ("alpha", "simai", "nccl"):
            c, s, grid = _schedule(slow, p, g, k, latency_model=model)
            for n in (64 * MIB, 1024 * MIB, 8192 * MIB):
                mt = model_time("optcc", c, k, n)
                if not mt.valid:
                    continue
                o, li, lat = latency_units(c, n)
                assert event_time(s, o, grid, li, lat) <= mt.time
                checked += 1
    assert checked >= 15


@pytest.mark.parametrize("name,slow,p,g", CLUSTERS[::3] + CLUSTERS[1::6] + [c for c in CLUSTERS if c[0] == 'mixed-p32-g4'], ids=lambda v: v if isinstance(v, str) else "")
def test_overhead_count_bounds_the_event_model(name, slow, p, g):
    for k in (1, 4, 16):
        c, s, grid = _schedule(slow, p, g, k)
        a = overhead_count("optcc", c, k)
        for o in (F(1, 1000), F(1, 100), F(1, 30)):
            assert event_time(s, o, grid) <= slot("optcc", c, k) + a * o


def test_rail_kinds_and_counts():
    """The counts follow the schedule each rail runs: direct k + 1, the q = 2 swap 1, OptCC's own."""
    two = {**{i: F(2) for i in range(2)}, **{2 + i: F(3, 2) for i in range(2)}}
    c = Cluster.build(16, 2, two)                                # q = 8: direct rails at k = 4
    rc = counts(c, 4)
    assert {r[0] for r in rc.rails} == {"direct"} and rc.latencies == 4 + 1 + 2
    assert rc.knee == 1                                           # equal shares, no rail knee
    c = Cluster.build(8, 4, {**{i: F(2) for i in range(4)}, **{4 + i: F(3, 2) for i in range(4)}})
    assert {r[0] for r in counts(c, 8).rails} == {"swap"} and counts(c, 8).latencies == 3
    c = Cluster.build(32, 2, two)                                 # q = 16: optcc_multi rails (spread 1)
    rc = counts(c, 4)
    assert {r[0] for r in rc.rails} == {"optcc"}
    assert rc.latencies == 2 * 15 + F(15 * 5, 2) + 16 + 2 and rc.knee == F(1, 2)


def test_knee_shrinks_with_a_small_share():
    """Mixed ℓ: the slow rail carries w_l < 1/g of the data, its λ scales by 1/w_l: knee g·w_l·KNEE."""
    c = Cluster.build(16, 4, {0: F(2), 1: F(2), 2: F(4, 3), 3: F(4, 3), 5: F(3, 2)})
    rc = counts(c, 4)
    assert rc.knee == min(4 * w * kf for _, w, _, kf in rc.rails) < 1
    assert knee("optcc", c, 4) == rc.knee / (4 * 16)


def test_proportional_rates_add_a_piece_stream_to_the_overhead_count():
    """Mixed ℓ, p = 32, g = 4, k = 16 (proportional NVLink rates): the rails' OptCC count + 4
    alone is below the event model's slope at o = 1/100; with P_max it bounds it."""
    from optcc.algorithms.rails.build import _best_plan
    c = Cluster.build(32, 4, {0: F(2), 1: F(2), 2: F(4, 3), 3: F(4, 3), 5: F(3, 2)})
    plan = _best_plan(c, 16, materialize=False)
    assert plan.rates == "proportional"
    p_max = max(len(s.pieces) for s, _, _ in plan.rails)
    a = overhead_count("optcc", c, 16)
    s = build_schedule("optcc", c, 16)
    grid = IntegerTimes(s)
    o = F(1, 100)
    t = event_time(s, o, grid)
    assert slot("optcc", c, 16) + (a - p_max) * o < t <= slot("optcc", c, 16) + a * o


def test_borrowing_plans_are_modelled_at_zero_latency_only():
    """Where optcc_rails builds the borrowing sub-rails (a GPU at ℓ > 2 with a faster GPU on its
    server), model_time's slot is that schedule's and no latency count is claimed for it."""
    from fractions import Fraction as F

    from optcc.algorithms.rails import build as optcc_rails
    from optcc.cluster import Cluster
    from optcc.model_time import model_time
    base = Cluster.build(16, 4, {0: F(4)})
    k = 64
    assert optcc_rails._borrow_time(base, k) < optcc_rails._best_plan(base, k, materialize=False).end
    m0 = model_time("optcc", base, k, 1 << 30)
    assert m0.valid and m0.time == optcc_rails.slot_time(base, k)
    with_latency = Cluster.build(16, 4, {0: F(4)}, latency=F(1, 10**6))
    assert not model_time("optcc", with_latency, k, 1 << 30).valid


PIPELINED = [c for c in CLUSTERS if c[0] in ("uniform-p32-g2", "mixed-p32-g2", "uniform-p16-g2")]


@pytest.mark.parametrize("name,slow,p,g", PIPELINED, ids=[c[0] for c in PIPELINED])
def test_rails_built_under_pipelined_latency_take_the_latency_robust_pattern(name, slow, p, g):
    """Under Li + L > 0 a rail of several stragglers on q ≥ 3 nodes runs optcc_multi's hop spread 3
    (its own cluster carries the latencies), and the closed form still bounds the event model
    below the knee; the λ = 0 schedule (spread 1) is another one."""
    from optcc.algorithms.rails import build as optcc_rails
    for k in (2, 8):
        c, s, grid = _schedule(slow, p, g, k, latency=F(1, 10**9))
        multi = [r for r in (optcc_rails.rail_cluster(c, l) for l in range(g)) if len(r.stragglers) >= 2]
        assert multi and all(r.issue_delay + r.latency > 0 for r in multi)
        plan = optcc_rails._best_plan(c, k, materialize=False)
        spreads = {sched.meta.get("hop_spread") for sched, _, _ in plan.rails if "stragglers" in sched.meta}
        assert spreads == {3} or p // g <= optcc_rails.RING_MAX_Q
        zero = build_schedule("optcc", Cluster.build(p, g, slow), k)
        if spreads == {3}:
            assert zero.sha256() != s.sha256()
        b, lim = latency_count("optcc", c, k), knee("optcc", c, k)
        for x in (F(1, 8), F(1, 2), F(1)):
            lam = x * lim
            assert event_time(s, F(0), grid, F(0), lam) <= slot("optcc", c, k) + b * lam
            assert event_time(s, F(0), grid, lam, F(0)) <= slot("optcc", c, k) + b * lam
