"""optcc.algorithms.rails.layout: optcc_rails' NVLink plan on numpy arrays is the loop it replaced.

- every plan's lead, end and tasks (server, rail, piece, start, rate, kind, in emission order)
  are those of tests/rails_reference.py's loop, on clusters covering every branch: equal and
  proportional NVLink rates, the bisected lead, the reduce-scatter and all-gather rate switches,
  direct, ring, swap and ArrayRail rails, pipelined latency, slow NVLink, grids beyond int64
  (Python ints); a built schedule's NVLink flows are those tasks for every rail;
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
from rails_reference import plan_loop


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


def _laid(monkeypatch):
    """Every call of rails_layout.layout: its inputs and its result."""
    calls = []
    real = rails_layout.layout

    def recorded(*args, **kw):
        out = real(*args, **kw)
        calls.append((args, out))
        return out
    monkeypatch.setattr(rails_layout, "layout", recorded)
    return calls


def _reference(args, which):
    """plan_loop on a layout call's inputs, rail l laid out as representative which[l]."""
    touches, mults, durf, durh, nic, proportional, steps = args
    pick = lambda xs: [xs[i] for i in which]                # noqa: E731
    return plan_loop([ft for ft, _ in pick(touches)], [lw for _, lw in pick(touches)], pick(mults),
                     pick(durf), pick(durh), nic, proportional, steps)


def _tasks(cols):
    return list(zip(*(c.tolist() for c in cols)))


@pytest.mark.parametrize("cluster", CLUSTERS, ids=lambda c: c.describe())
def test_every_plan_is_the_loop_task_by_task(cluster, monkeypatch):
    """Lead, end and every NVLink task of each plan `_best_plan` weighs (with and without
    direct, both rate rules) are the reference loop's."""
    laid = _laid(monkeypatch)
    seen = 0
    for k in (1, 3, 16):
        for direct in (False, True):
            rails = optcc_rails._rails(cluster, k, direct)
            for rates in ("equal", "proportional"):
                plan = optcc_rails._Plan(cluster, k, materialize="records", rates=rates, rails=rails)
                args, (D, end, _) = laid[-1]
                reps = sorted(set(plan.rep))
                ref_D, ref_end, ref_tasks = _reference(args, range(len(reps)))
                assert (plan.lead, plan.end) == (F(ref_D, plan.grid), F(ref_end, plan.grid)) == \
                       (F(D, plan.grid), F(end, plan.grid)), (k, direct, rates)
                assert _tasks(plan.records) == [(s, reps[r], *rest) for s, r, *rest in ref_tasks], (k, direct, rates)
                times = optcc_rails._Plan(cluster, k, materialize=False, rates=rates, rails=rails)
                assert (times.lead, times.end, times.grid, times.nvlink_work) == \
                       (plan.lead, plan.end, plan.grid, plan.nvlink_work)
                assert plan.end >= plan.nic_time + plan.lead
                seen += 1
    assert seen == 12


@pytest.mark.parametrize("cluster", [CLUSTERS[1], CLUSTERS[6], CLUSTERS[12]], ids=lambda c: c.describe())
def test_a_built_schedules_nvlink_flows_are_the_loops_tasks_for_every_rail(cluster, monkeypatch):
    laid = _laid(monkeypatch)
    plan = optcc_rails._best_plan(cluster, 3, materialize=True)
    args, _ = laid[-1]
    reps = sorted(set(plan.rep))
    _, _, tasks = _reference(args, [reps.index(m) for m in plan.rep])
    g, want = cluster.g, []
    for s, l, pi, st, half, add in tasks:
        rate = plan.half_rates[l] if half else plan.full_rates[l]
        for j in range(g):
            if j != l:
                ends = (s * g + j, s * g + l) if add else (s * g + l, s * g + j)
                want.append((*ends, plan.offsets[l] + pi, "add" if add else "copy", F(st, plan.grid), rate))
    assert [(f.src, f.dst, f.piece, f.op, f.start, f.rate) for f in plan.nvlink] == want
    assert len(set(plan.rep)) < g or cluster is CLUSTERS[1]      # classes of equal rails repeated


def test_grids_beyond_int64_run_on_python_ints(monkeypatch):
    """Mixed ℓ inside a server can put what the passes form past int64: they then run on
    Python ints (dtype object), and still give the loop's tasks."""
    laid = _laid(monkeypatch)
    c = CLUSTERS[10]
    plan = optcc_rails._Plan(c, 16, materialize="records", rails=optcc_rails._rails(c, 16, False))
    args, _ = laid[-1]
    assert plan.records[3].dtype == object
    assert _tasks(plan.records) == _reference(args, range(len(args[0])))[2]


@pytest.mark.parametrize("cluster", [CLUSTERS[1], CLUSTERS[4], CLUSTERS[8]], ids=lambda c: c.describe())
def test_the_bisected_lead(cluster, monkeypatch):
    laid = _laid(monkeypatch)
    bisected = []
    real = rails_layout._smallest_lead
    monkeypatch.setattr(rails_layout, "_smallest_lead", lambda *a: bisected.append(1) or real(*a))
    plan = optcc_rails._Plan(cluster, 1, materialize=False, rates="proportional")
    args, _ = laid[-1]
    D, end, _ = _reference(args, range(len(args[0])))
    assert bisected
    assert (plan.lead, plan.end) == (F(D, plan.grid), F(end, plan.grid))


def test_the_rate_switches_are_exercised():
    """The rate switches the passes vectorize (each a prefix, rails_layout's docstring) happen in
    the cases above: a server has reduce-scatter tasks at both rates, and all-gathers at both."""
    plan = optcc_rails._Plan(CLUSTERS[0], 16, materialize="records", rates="proportional")
    server, _, _, _, both, add = plan.records
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


def test_the_paper_scale_plan_is_the_loop(monkeypatch):
    """Figure 21's g = 8 setting at p = 1024 (q = 128 ArrayRails), small k so the loop stays quick."""
    c = Cluster.build(1024, 8, _servers(8, [F(2), F(3, 2)]), latency_model="simai")
    rails = optcc_rails._rails(c, 2)
    assert all(isinstance(s, ArrayRail) for s, _, _ in rails[0])
    laid = _laid(monkeypatch)
    plan = optcc_rails._Plan(c, 2, materialize=False, rails=rails)
    D, end, _ = _reference(laid[-1][0], range(len(laid[-1][0][0])))
    assert (plan.lead, plan.end) == (F(D, plan.grid), F(end, plan.grid)) and plan.end == optcc_rails.slot_time(c, 2)


def test_touch_matrices_mark_untouched_pairs_and_the_layout_refuses_them():
    ft, lw = touch_matrices([0], [1], [1], [5], [9], 3, 2)
    assert ft.tolist() == [[-1, 5], [-1, 5], [-1, -1]] and lw.tolist() == [[-1, -1], [-1, 9], [-1, -1]]
    one = np.ones(2, dtype=np.int64)
    with pytest.raises(ValueError, match="untouched"):
        rails_layout.layout([(ft, lw)], [1], [one], [one], 1, False, 0)


def test_layout_is_the_loop_on_random_small_integers():
    """Ties and boundary equalities are common on small integers; a multiplier of 2^61 puts the
    same cases on Python ints."""
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
        big = case % 4 == 0
        mults = [2**61 if big else 1] * reps
        if big:
            dfs, dhs, nic = [d.astype(object) * 2**61 for d in dfs], [d.astype(object) * 2**61 for d in dhs], nic * 2**61
        for proportional in (False, True):
            D, end, rails = rails_layout.layout(list(zip(fts, lws)), mults, dfs, dhs, nic, proportional, steps,
                                                starts=True)
            got = (D, end, _tasks(rails_layout.records(D, rails, [(r, r) for r in range(reps)])))
            assert got == plan_loop(fts, lws, mults, dfs, dhs, nic, proportional, steps), (case, proportional)
            assert (rails[0].ft.dtype == object) == big
