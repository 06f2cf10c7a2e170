"""optcc.algorithms.rails.layout: optcc_rails' times on numpy arrays are the Python loop's integers.

- the numpy passes (`_Plan(materialize=False)`) give the same lead, end and grid as the loop that
  lays out the flows (`layout="python"`), on clusters covering every branch: equal and
  proportional NVLink rates, the bisected lead, the reduce-scatter and all-gather rate switches,
  direct, ring, swap and ArrayRail rails, pipelined latency, slow NVLink;
- an ArrayRail's touches and slot time are its built schedule's;
- a cluster with ArrayRails (q > RING_MAX_Q) still builds a schedule whose slot time is slot_time.
"""
from fractions import Fraction as F

import numpy as np
import pytest

from optcc.algorithms import build_schedule
from optcc.algorithms.rails import build as optcc_rails
from optcc.algorithms.rails import layout as rails_layout
from optcc.algorithms.rails.layout import ArrayRail, touch_matrices
from optcc.cluster import Cluster
from optcc.timing import IntegerTimes, slot_time


def _servers(g, ells):
    return {s * g + j: F(e) for s, e in enumerate(ells) for j in range(g)}


CLUSTERS = [
    Cluster.build(16, 4, {0: F(2)}),
    Cluster.build(16, 4, {0: F(2), 1: F(4, 3), 6: F(8, 7)}),
    Cluster.build(24, 4, {0: F(2), 1: F(4, 3), 2: F(8, 7), 3: F(3)}),
    Cluster.build(16, 4, failed_nics=[(1, 1), (2, 2)], pxn=False),              # ring rails
    Cluster.build(8, 4, {0: F(2), 5: F(3)}),                                    # two servers: swap rails
    Cluster.build(16, 8, failed_nics=[(1, 1)], pxn=False),                      # NVLink-limited
    Cluster.build(32, 8, _servers(8, [F(3, 2), F(2)])),
    Cluster.build(32, 8, _servers(8, [F(3, 2), F(2)]), latency_model="simai"),  # the latency-robust pattern
    Cluster.build(80, 8, _servers(8, [F(2), F(3, 2)]), latency_model="simai"),  # q = 10: ArrayRails
    Cluster.build(40, 4, {0: F(2), 1: F(3, 2), 6: F(4, 3), 9: F(2)}),            # q = 10, unequal shares
    Cluster.build(36, 2, {0: F(2), 3: F(3, 2), 4: F(3, 2)}),                     # q = 18
    Cluster.build(32, 4, {0: F(2), 5: F(3)}),
    Cluster.build(64, 8, _servers(8, [F(3, 2), F(2)]), nvlink_bandwidth=100 * 10**9),   # slow NVLink
]


def _counting(monkeypatch, name):
    calls = []
    real = getattr(rails_layout, name)

    def counted(*a, **kw):
        calls.append(1)
        return real(*a, **kw)
    monkeypatch.setattr(rails_layout, name, counted)
    return calls


@pytest.mark.parametrize("cluster", CLUSTERS, ids=lambda c: c.describe())
def test_numpy_passes_are_the_loop(cluster, monkeypatch):
    """Mixed-ℓ grids beyond INT64_SAFE take the loop (fits() is False): the fast path must still
    run on most of each cluster's plans."""
    laid = _counting(monkeypatch, "layout")
    seen = 0
    for k in (1, 3, 16):
        for direct in (False, True):
            rails = optcc_rails._rails(cluster, k, direct)
            for rates in ("equal", "proportional"):
                fast = optcc_rails._Plan(cluster, k, materialize=False, rates=rates, rails=rails)
                ref = optcc_rails._Plan(cluster, k, materialize=False, rates=rates, rails=rails, layout="python")
                assert (fast.lead, fast.end, fast.grid, fast.nvlink_work) == \
                       (ref.lead, ref.end, ref.grid, ref.nvlink_work), (k, direct, rates)
                assert fast.end >= fast.nic_time + fast.lead
                seen += 1
    assert seen == 12 and len(laid) >= 8


@pytest.mark.parametrize("cluster", [CLUSTERS[1], CLUSTERS[4], CLUSTERS[8]], ids=lambda c: c.describe())
def test_the_bisected_lead_on_the_fast_path(cluster, monkeypatch):
    bisected = _counting(monkeypatch, "_smallest_lead")
    fast = optcc_rails._Plan(cluster, 1, materialize=False, rates="proportional")
    ref = optcc_rails._Plan(cluster, 1, materialize=False, rates="proportional", layout="python")
    assert bisected and (fast.lead, fast.end) == (ref.lead, ref.end)


def test_the_rate_switches_are_exercised():
    """The rate switches the passes vectorize (each a prefix, rails_layout's docstring) happen in
    the cases above: a server has reduce-scatter tasks at both rates, and all-gathers at both."""
    plan = optcc_rails._Plan(CLUSTERS[0], 16, materialize="records", rates="proportional")
    server, _, _, _, both, add = (np.frombuffer(col, dtype=np.int64) for col in plan.records)
    mixed = lambda sel: any(len(set(both[sel & (server == s)])) == 2 for s in set(server))  # noqa: E731
    assert mixed(add == 1) and mixed(add == 0)


@pytest.mark.parametrize("cluster", [c for c in CLUSTERS if c.servers > optcc_rails.RING_MAX_Q],
                         ids=lambda c: c.describe())
def test_array_rails_are_their_schedules(cluster):
    rails, touches = optcc_rails._rails(cluster, 3)
    assert any(isinstance(s, ArrayRail) for s, _, _ in rails)
    for (rail, _, slot), (ft, lw, scale) in zip(rails, touches):
        if not isinstance(rail, ArrayRail):
            continue
        sched = build_schedule("optcc", rail.cluster, 3)
        grid = IntegerTimes(sched)
        assert slot == slot_time(sched) == F(max(grid.ends), grid.scale)
        want_ft, want_lw = touch_matrices([f.src for f in sched.flows], [f.dst for f in sched.flows],
                                          [f.piece for f in sched.flows], grid.starts, grid.ends,
                                          rail.cluster.p, len(sched.pieces))
        # the same times, each on its own grid
        assert (ft * grid.scale == want_ft * scale).all() and (lw * grid.scale == want_lw * scale).all()
        assert rail.pieces == sched.pieces and rail.meta == sched.meta


@pytest.mark.parametrize("cluster", [c for c in CLUSTERS if c.servers > optcc_rails.RING_MAX_Q],
                         ids=lambda c: c.describe())
def test_a_cluster_of_array_rails_builds_its_slot_time(cluster):
    s = build_schedule("optcc", cluster, 2)
    assert "optcc_rails" in s.meta["construction"]
    assert slot_time(s) == optcc_rails.slot_time(cluster, 2)


def test_the_paper_scale_plan_is_the_loop():
    """Figure 21's g = 8 setting at p = 1024 (q = 128 ArrayRails), small k so the loop stays quick."""
    c = Cluster.build(1024, 8, _servers(8, [F(2), F(3, 2)]), latency_model="simai")
    rails = optcc_rails._rails(c, 2)
    assert all(isinstance(s, ArrayRail) for s, _, _ in rails[0])
    fast = optcc_rails._Plan(c, 2, materialize=False, rails=rails)
    ref = optcc_rails._Plan(c, 2, materialize=False, rails=rails, layout="python")
    assert (fast.lead, fast.end) == (ref.lead, ref.end) and fast.end == optcc_rails.slot_time(c, 2)


def test_touch_matrices_mark_untouched_pairs():
    ft, lw = touch_matrices([0], [1], [1], [5], [9], 3, 2)
    assert ft.tolist() == [[-1, 5], [-1, 5], [-1, -1]] and lw.tolist() == [[-1, -1], [-1, 9], [-1, -1]]
    assert not rails_layout.fits([(ft, lw)], [1], [np.ones(2, dtype=np.int64)], [np.ones(2, dtype=np.int64)], 1)


def _loop(fts, lws, dfs, dhs, nic, proportional, steps):
    """The loop of optcc_rails._Plan on plain lists (one entry per representative rail), the
    reference for `layout` on small random integers, where ties and boundary equalities are common."""
    q = fts[0].shape[0]
    R = range(len(fts))
    order = [sorted((int(fts[r][s, pi]), r, pi) for r in R for pi in range(fts[r].shape[1])) for s in range(q)]

    def rs_pass(D):
        worst, last = 0, []
        for s in range(q):
            first_ag = D + min(int(lws[r][s].min()) for r in R)
            free = [0] * len(fts)
            for t, r, pi in order[s]:
                d = int(dfs[r][pi])
                free[r] += d if free[r] + d <= first_ag else int(dhs[r][pi])
                worst = max(worst, free[r] - t)
            last.append(max(free))
        return worst, last
    D = 0
    for s in range(q):
        free = [0] * len(fts)
        for t, r, pi in order[s]:
            free[r] += int(dhs[r][pi])
            D = max(D, free[r] - t)
    if proportional and 50 * D > nic:
        lo, hi = 0, D
        for _ in range(steps):
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if rs_pass(mid)[0] <= mid else (mid, hi)
        D = hi
    _, last_rs = rs_pass(D)
    end = D + nic
    for s in range(q):
        free = [0] * len(fts)
        for rel, r, pi in sorted((D + int(lws[r][s, pi]), r, pi) for r in R for pi in range(lws[r].shape[1])):
            st = max(rel, free[r])
            free[r] = st + int(dhs[r][pi] if st < last_rs[s] else dfs[r][pi])
            end = max(end, free[r])
    return D, end


def test_layout_is_the_loop_on_random_small_integers():
    rng = np.random.default_rng(7)
    for case in range(400):
        q, reps, P = int(rng.integers(1, 4)), int(rng.integers(1, 3)), int(rng.integers(1, 6))
        steps = int(rng.integers(0, 4))
        unit = 1 << steps                  # the lead's bisection halves exactly (the grid holds 2^steps)
        fts = [rng.integers(0, 6, (q, P)) * unit for _ in range(reps)]
        lws = [rng.integers(0, 6, (q, P)) * unit for _ in range(reps)]
        dfs = [rng.integers(1, 4, P) * unit for _ in range(reps)]
        dhs = [d + rng.integers(0, 3, P) * unit for d in dfs]          # half rate: never shorter
        nic = int(rng.integers(0, 20)) * unit
        for proportional in (False, True):
            got = rails_layout.layout(list(zip(fts, lws)), [1] * reps, dfs, dhs, nic, proportional, steps)
            assert got == _loop(fts, lws, dfs, dhs, nic, proportional, steps), (case, proportional)
