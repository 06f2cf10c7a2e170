"""Paper checks per latency preset (paper_checks.per_model): verdicts, bound-limited points."""
from fractions import Fraction as F

import pytest

from optcc.algorithms.optcc_single import optcc_slot_time
from optcc.cluster import Cluster
from paper_checks import claims as C
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
        counted = {k: pt for k, pt in r["points"].items() if k not in r["bound_limited"]}
        fails = [k for k, pt in counted.items() if pt["verdict"] == C.FAIL]
        assert all(counted[k]["decided_by"] == "event time" and counted[k]["event_complete"] for k in fails)
        for k, pt in counted.items():
            if pt["verdict"] == C.UNDECIDED:      # only an upper bound, over the tolerance
                assert pt["decided_by"] != "event time" or not pt["event_complete"]
                assert pt["overhead"] > 0.065
        undecided = [k for k, pt in counted.items() if pt["verdict"] == C.UNDECIDED]
        assert r["verdict"] == (C.FAIL if fails else C.UNDECIDED if undecided else C.PASS)
    assert fig8["our_value"] == pytest.approx(100 * models["simai"]["worst"])
    assert fig8["verdicts_by_bandwidth"]["50"] == fig8["verdicts"]
    assert set(fig8["verdicts_by_bandwidth"]["100"]) == {"alpha", "simai", "nccl"}
    for m, r in fig8["details"]["latency_models_100GBps"].items():   # bounds only there: never FAIL
        assert r["verdict"] in (C.PASS, C.UNDECIDED)


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
        assert (key in r["bound_limited"]) == (float(bound / ring - 1) > 0.065)
        if p > 64:                                       # no event time there: the closed form, PASS or undecided
            assert pt["decided_by"] == "upper bound" and pt["verdict"] in (C.PASS, C.UNDECIDED)
    # p = 16, ℓ = 2: Theorem 1 alone is 16/15 of T0, over the tolerance under every preset.
    assert "2@16" in r["bound_limited"]


def test_fig8_event_time_point_is_the_schedules_event_time(fig8):
    """8/7@16 under simai: decided by event time; rebuilt and timed by optcc.timing.event_time."""
    from optcc.algorithms.optcc_single import optcc_allreduce
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
