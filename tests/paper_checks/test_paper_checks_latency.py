"""Paper checks per latency preset (paper_checks.per_model): verdicts, points refuted by the bound."""
from fractions import Fraction as F

import pytest

from optcc.algorithms.single.build import optcc_slot_time
from optcc.cluster import Cluster
from paper_checks import claims as C
from paper_checks import event_checks as E
from paper_checks import per_model as P
from paper_checks import settings as S

N = S.MESSAGE_BYTES


def lam_units(model):
    """(o, Li + L) of a preset in units of n/B at 8 GiB, written out from the preset values."""
    us = F(1, 10**6)
    o, lam = {"alpha": (5 * us, 0), "simai": (0, 4 * us), "nccl": (0, 14 * us)}[model]
    scale = S.NIC_BANDWIDTH / N
    return o * scale, lam * scale


@pytest.fixture()
def rows(paper_report):            # tests/conftest.py: computed once per session
    return {r["id"]: r for r in paper_report["rows"]}


@pytest.fixture()
def fig8(rows):
    return rows["within-6pct-fig8"]


def test_fig8_row_has_three_verdicts_and_the_simai_one_rules(fig8):
    assert set(fig8["verdicts"]) == {"alpha", "simai", "nccl"}
    assert fig8["verdict"] == fig8["verdicts"]["simai"]
    models = fig8["details"]["latency_models"]
    for m, r in models.items():
        counted = r["points"]
        fails = [k for k, pt in counted.items() if pt["verdict"] == C.FAIL]
        for k in fails:      # FAIL by a complete event search, or refuted by the lower bound alone
            pt = counted[k]
            assert (pt["decided_by"] == "event time" and pt["event_complete"]) or \
                (pt["decided_by"] == E.REFUTED_BY_BOUND and pt["bound_overhead"] > 0.065
                 and pt["overhead"] == pt["bound_overhead"] and k in r["refuted_by_bound"])
        for k, pt in counted.items():
            if pt["verdict"] == C.UNDECIDED:      # only an upper bound, over the tolerance
                assert pt["decided_by"] != "event time" or not pt["event_complete"]
                assert pt["overhead"] > 0.065
        undecided = [k for k, pt in counted.items() if pt["verdict"] == C.UNDECIDED]
        assert r["verdict"] == (C.FAIL if fails else C.UNDECIDED if undecided else C.PASS)
    assert fig8["our_value"] == pytest.approx(100 * models["simai"]["worst"])
    assert fig8["verdicts_by_bandwidth"]["50"] == fig8["verdicts"]
    assert set(fig8["verdicts_by_bandwidth"]["100"]) == {"alpha", "simai", "nccl"}
    for m, r in fig8["details"]["latency_models_100GBps"].items():   # upper bounds only: FAIL only by the lower bound
        assert r["verdict"] in (C.PASS, C.UNDECIDED) or r["failed"] == r["refuted_by_bound"] != []


@pytest.mark.parametrize("model", ["alpha", "simai", "nccl"])
def test_fig8_points_recomputed_by_hand(fig8, model):
    r = fig8["details"]["latency_models"][model]
    o, lam = lam_units(model)
    for key in ("2@16", "8/7@256", "2@800"):
        ell, p = F(key.split("@")[0]), int(key.split("@")[1])
        ring = 2 * (p - 1) * (F(1, p) + o + lam)        # fault-free ring's event time: every step pays o + λ
        pt = r["points"][key]
        assert pt["nccl_event"] == pytest.approx(float(ring))
        k = pt["k_closed_form"]
        t = optcc_slot_time(Cluster.build(p, stragglers={0: ell}), k) + 2 * (p - 1) * (k + 1) * o \
            + (2 * (p - 1) + 4 * k) * lam
        assert pt["closed_form_overhead"] == pytest.approx(float(t / ring - 1))
        bound = max(ell, 2 * ell * (p - 1) / (ell * (p - 1) + 1)) + o + lam   # Theorem 1 + one o + Li + L
        assert r["bound_overhead_vs_nccl"][key] == pytest.approx(float(bound / ring - 1))
        assert (key in r["refuted_by_bound"]) == (float(bound / ring - 1) > 0.065)
        if key in r["refuted_by_bound"]:
            assert pt["verdict"] == C.FAIL and pt["decided_by"] == E.REFUTED_BY_BOUND
        if p > 64:                                       # no event time there: the closed form, PASS or undecided
            assert pt["decided_by"] == "upper bound" and pt["verdict"] in (C.PASS, C.UNDECIDED)
    # p = 16, ℓ = 2: Theorem 1 alone is 16/15 of T0, over the tolerance under every preset: the
    # claim is refuted there by the bound, so the row FAILs whatever OptCC does elsewhere.
    assert "2@16" in r["refuted_by_bound"] and r["verdict"] == C.FAIL


def test_fig8_event_time_point_is_the_schedules_event_time(fig8):
    """8/7@16 under simai: decided by event time; rebuilt and timed by optcc.timing.event_time."""
    from optcc.algorithms.single.build import optcc_allreduce
    from optcc.timing import event_time
    pt = fig8["details"]["latency_models"]["simai"]["points"]["8/7@16"]
    assert pt["decided_by"] == "event time"
    o, lam = lam_units("simai")
    c = Cluster.build(16, stragglers={0: F(8, 7)}, bandwidth=S.NIC_BANDWIDTH, latency_model="simai")
    li = F(2, 10**6) * S.NIC_BANDWIDTH / N
    e = event_time(optcc_allreduce(c, pt["k"]), o, None, li, lam - li)
    assert pt["overhead"] == pytest.approx(float(e / (2 * 15 * (F(1, 16) + lam)) - 1))
    assert pt["overhead"] <= pt["closed_form_overhead"] + 1e-12   # the event search is no worse than the closed form's k


def test_gap_and_fit_rows_carry_verdicts(rows):
    gap = rows["fig10-gap-p16"]
    assert gap["verdict"] == gap["verdicts"]["simai"]
    for m, r in gap["details"]["latency_models"].items():
        close = abs(r["difference_pp"]) <= C.PERCENT_ROUNDING_PP
        if r["decided_by"] == "event time" and r["point"]["event_complete"]:
            assert r["verdict"] == (C.PASS if close else C.FAIL)
        else:
            assert r["verdict"] == (C.PASS if close else C.UNDECIDED)
    fit = rows["o1p-OptCC-ell2"]
    assert set(fit["verdicts"]) == {"alpha", "simai", "nccl"} and fit["verdict"] == fit["verdicts"]["simai"]
    simai = fit["details"]["latency_models"]["simai"]
    c0, _, r2 = C.fit_inverse_p(S.P_FIT, simai["overhead"])
    assert simai["c0"] == pytest.approx(c0) and fit["our_value"] == pytest.approx(c0)
    # a fit through upper bounds (p ≥ 32: OptCC's schedules exceed the event-time cap) decides nothing
    assert simai["upper_bound_at_p"] and simai["verdict"] == C.UNDECIDED


def test_per_model_bound_is_below_optcc_everywhere():
    for model in ("alpha", "simai", "nccl"):
        for p, g, ells in [(16, 1, F(2)), (128, 1, (F(2), F(4, 3))), (64, 4, F(8, 7))]:
            assert P.bound_time(p, g, ells, model, N) <= P.optcc_time(p, g, ells, model, N)[0]


def test_a_point_whose_bound_is_over_the_tolerance_fails_refuted_by_the_bound():
    """p = 16, ℓ = 2 (g = 1): Theorem 1 + one Li + L is 6.67% over the ring, over 6% + 0.5 pp: the
    point FAILs, refuted by the bound, without a search; its overhead is the bound's."""
    pt = E.point(16, 1, F(2), "simai", N, 0.065)
    assert pt["verdict"] == C.FAIL and pt["decided_by"] == E.REFUTED_BY_BOUND
    assert pt["overhead"] == pt["bound_overhead"] > 0.065 and pt["event_evaluated"] == 0
    assert E.point(16, 1, F(2), "simai", N, 0.07)["decided_by"] != E.REFUTED_BY_BOUND


def test_intercept_range_is_the_fit_over_the_box_corners():
    """intercept_range: the least-squares c0 over every corner of [low, high] (the extremes of a
    linear function over a box are at corners), on random boxes."""
    import itertools
    import numpy as np
    rng = np.random.default_rng(7)
    ps = S.P_FIT
    for _ in range(3):
        low = rng.uniform(-0.05, 0.05, len(ps))
        high = low + rng.uniform(0, 0.05, len(ps))
        c0s = [C.fit_inverse_p(ps, [h if b else lo for b, lo, h in zip(bits, low, high)])[0]
               for bits in itertools.product((0, 1), repeat=len(ps))]
        lo, hi = C.intercept_range(ps, low, high)
        assert lo == pytest.approx(min(c0s), abs=1e-12) and hi == pytest.approx(max(c0s), abs=1e-12)


def test_o1p_rows_are_decided_where_the_intercept_range_is(rows):
    """ℓ = 3 ("the opposite"): every p above 64 is known only within [bound, upper bound], yet c0 ≥ 0.05
    over that whole box, so the row PASSes; ℓ = 2: the range straddles |c0| ≤ 0.002, undecided."""
    for rid, verdict in (("o1p-OptCC-ell3", C.PASS), ("o1p-OptCC-ell2", C.UNDECIDED)):
        for m, r in rows[rid]["details"]["latency_models"].items():
            lo, hi = C.intercept_range(S.P_FIT, r["lower_end"], r["overhead"])
            assert r["c0_range"] == pytest.approx([lo, hi]) and lo <= r["c0"] <= hi
            assert r["verdict"] == verdict, (rid, m)
        assert rows[rid]["verdict"] == verdict
    assert rows["o1p-OptCC-ell3"]["details"]["latency_models"]["simai"]["c0_range"][0] >= C.NOT_VANISHING_MIN


def test_fixed_k_verdicts_are_the_schedules_event_times():
    """Figure 8's 4/3@16 under simai with k fixed (no search): k = 32 FAILs by event time (6.59%),
    k = 64 PASSes (4.97%); each is optcc.timing.event_time of the built schedule over the ring's;
    piece_bytes is that schedule's smallest piece."""
    from optcc.algorithms.single.build import optcc_allreduce
    from optcc.timing import event_time
    c = Cluster.build(16, stragglers={0: F(4, 3)}, bandwidth=S.NIC_BANDWIDTH, latency_model="simai")
    o, lam = lam_units("simai")
    li = F(2, 10**6) * S.NIC_BANDWIDTH / N
    ring = 2 * 15 * (F(1, 16) + lam)
    for k, verdict in ((32, C.FAIL), (64, C.PASS)):
        r = E.fixed_k(16, 1, F(4, 3), "simai", N, 0.065, k)
        s = optcc_allreduce(c, k)
        assert (r["verdict"], r["decided_by"], r["segment_bytes"]) == (verdict, "event time", N // k)
        assert r["overhead"] == pytest.approx(float(event_time(s, o, None, li, lam - li) / ring - 1))
        assert r["piece_bytes"] == int(min(s.pieces) * N)
    assert E.fixed_k(16, 1, F(2), "simai", N, 0.065, 32)["decided_by"] == E.REFUTED_BY_BOUND


def test_rows_carry_their_fixed_k_verdicts(rows):
    """The verdict column of every "within 6%" row: each point's verdict at k = 32 and 64, and the
    row's by the usual aggregation; Figure 8 FAILs at both (4/3@16 by event time at k = 32, 2@16
    refuted by the bound at both), though its searched verdict is decided only by 2@16."""
    for rid in ("within-6pct-fig8", "within-6pct-fig10", "fig9-within-6pct-ab", "within-6pct-fig22"):
        r = rows[rid]["details"]["latency_models"]["simai"]
        for k in ("32", "64"):
            vs = {pt["fixed_k"][k]["verdict"] for pt in r["points"].values()}
            assert r["verdict_at_fixed_k"][k] == (C.FAIL if C.FAIL in vs else C.UNDECIDED if C.UNDECIDED in vs
                                                  else C.PASS)
        assert all(pt["segment_bytes"] == N // pt["k"] for pt in r["points"].values())
    fig8 = rows["within-6pct-fig8"]["details"]["latency_models"]["simai"]
    assert fig8["verdict_at_fixed_k"] == {"32": C.FAIL, "64": C.FAIL}
    assert fig8["points"]["4/3@16"]["fixed_k"]["32"]["decided_by"] == "event time"
    assert "fixed_k" not in rows["within-6pct-fig8"]["details"]["latency_models"]["nccl"]["points"]["4/3@16"]


def test_fixed_k_builds_no_schedule_beyond_the_event_range(monkeypatch):
    """Beyond P_EVENT_MAX a fixed-k verdict is the closed form's upper bound, without building a
    schedule even for its flow estimate; within it, an estimate whose k = 1 count is already over
    the cap does not build k = 2 (the counts do not fall with k)."""
    fresh = E._Schedules()
    monkeypatch.setattr(E, "SCHEDULES", fresh)
    p = 2 * E.P_EVENT_MAX
    r = E.fixed_k(p, 1, F(4, 3), "simai", N, 0.065, 32)
    assert r["decided_by"] == "upper bound" and fresh.flows == {} and fresh.cache == {}
    c = E.cluster(8, 1, F(4, 3), "simai")
    assert fresh.get(c, 3, cap=10) is None
    (f1, d), = fresh.flows.values()
    assert f1 > 10 and d is None
    assert fresh.estimate(c, 3) == f1 + 2 * fresh.flows[fresh.key(c, 0)[:-1]][1] > f1


def test_the_full_fit_times_every_p_by_event_time_and_decides_the_row(monkeypatch):
    """`optcc paper-checks --full-fit` (check_o1p_optcc(ell, full_fit=True)), on a fit shortened to
    p = 8…128: without it p = 128 (beyond P_EVENT_MAX) is only bounded, and so is every p (a fit is
    decided only with every p event-timed), and ℓ = 2's row is undecided; with it the simai fit's
    every p is a complete event search (p = 128 at k = 173, 5.6 M flows, over FLOW_CAP), c0 is
    the fit of those event times and the row is decided by the fit rule, where the other presets
    keep their bounds."""
    monkeypatch.setattr(S, "P_FIT", (8, 16, 32, 64, 128))
    bounded = C.check_o1p_optcc(F(2)).details["latency_models"]
    assert bounded["simai"]["decided_by"] == ["upper bound"] * 5 and bounded["simai"]["verdict"] == C.UNDECIDED
    row = C.check_o1p_optcc(F(2), full_fit=True)
    simai = row.details["latency_models"]["simai"]
    assert simai["full_fit"] and simai["decided_by"] == ["event time"] * 5 and simai["upper_bound_at_p"] == []
    assert simai["k"][-1] == 173 and E.SCHEDULES.estimate(E.cluster(128, 1, F(2), "simai"), 173) > E.FLOW_CAP
    c0, _, r2 = C.fit_inverse_p(S.P_FIT, simai["overhead"])
    assert simai["c0"] == c0
    want = C.PASS if abs(c0) <= C.FIT_INTERCEPT_MAX and r2 >= C.FIT_R2_MIN else C.FAIL
    assert row.verdict == simai["verdict"] == want and simai["fit_decided_by"] == "every p by event time"
    assert all(not r["full_fit"] and r["decided_by"] == ["upper bound"] * 5
               for m, r in row.details["latency_models"].items() if m != "simai")
    from paper_checks.report import _cell
    assert _cell(row.verdict, simai).endswith(f"c0 = {c0:+.4f}; every p by event time (--full-fit)")


def test_the_full_fit_says_each_point_as_it_goes(monkeypatch, caplog):
    """A full fit takes minutes a row: each p's event search is logged (logger `paper_checks`,
    which `optcc paper-checks --full-fit` prints on stderr) with its k and CPU time."""
    import logging
    monkeypatch.setattr(S, "P_FIT", (8, 16))
    with caplog.at_level(logging.INFO, logger="paper_checks"):
        P.o1p_overheads("simai", F(2), S.P_FIT, full=True)
    lines = [r.getMessage() for r in caplog.records if r.name == "paper_checks"]
    assert len(lines) == 2 and all(f"simai, ℓ = 2, p = {p}: event search at k = " in line and "(complete, " in line
                                   for p, line in zip(S.P_FIT, lines)), lines
