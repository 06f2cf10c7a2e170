"""paper_checks.event_checks' deep pass: a point left undecided by the normal search (schedules
over FLOW_CAP) is searched again with larger schedules and at most DEEP_EVALUATIONS event timings;
it reports the best k found (not the first within the tolerance), PASSes if that is within the
tolerance, FAILs only when that search is complete, and is never run where k is capped.
p = 8, (ℓ1, ℓ2) = (4/3, 8/7), simai, 8 GiB: bound 4.90%, closed form 13.67% (k = 316), every
event time ≥ 12% over NCCLNoFailure; FLOW_CAP is lowered so the normal search stays incomplete."""
from fractions import Fraction as F

import pytest

from paper_checks import event_checks as E
from paper_checks import settings as S

ELLS = (F(4, 3), F(8, 7))


@pytest.fixture
def small_cap(monkeypatch):
    monkeypatch.setattr(E, "FLOW_CAP", 500)
    E.SCHEDULES.cache.clear()
    yield
    E.SCHEDULES.cache.clear()


def _point(tol, **kw):
    return E.point(8, 1, ELLS, "simai", S.MESSAGE_BYTES, tol, S.NIC_BANDWIDTH, **kw)


def test_without_the_deep_pass_the_point_is_undecided(small_cap):
    pt = _point(0.08)
    assert pt["verdict"] == E.UNDECIDED and pt["event_complete"] is False and "deep_cap" not in pt


def test_a_complete_deep_search_over_the_tolerance_fails(small_cap, monkeypatch):
    monkeypatch.setattr(E, "DEEP_EVALUATIONS", 50)        # budget enough to end the walk
    pt = _point(0.08, deep_cap=200_000)
    assert pt["verdict"] == E.FAIL and pt["decided_by"] == "event time (deep search)"
    assert pt["deep_complete"] is True and 0.08 < pt["overhead"] < pt["closed_form_overhead"]


def test_the_deep_search_reports_the_best_k_within_its_budget(small_cap, monkeypatch):
    """Not the first k within the tolerance (k = 632, 12.26%, the 4th timing of the walk): the same
    walk whatever the tolerance, its best k in a budget of 5 timings (k = 894, 12.18%)."""
    monkeypatch.setattr(E, "DEEP_EVALUATIONS", 5)
    pt = _point(0.123, deep_cap=200_000)
    assert pt["verdict"] == E.PASS and pt["decided_by"] == "event time (deep search)"
    assert (pt["deep_k"], pt["deep_evaluated"], pt["deep_complete"]) == (894, 5, False)
    assert pt["overhead"] == pt["deep_overhead"] == pytest.approx(0.1218, abs=1e-4) and pt["k"] == 894


def test_the_deep_search_stops_after_its_evaluation_budget(small_cap, monkeypatch):
    monkeypatch.setattr(E, "DEEP_EVALUATIONS", 2)
    pt = _point(0.08, deep_cap=200_000)
    assert pt["deep_evaluated"] == 2 and pt["deep_complete"] is False and pt["verdict"] == E.UNDECIDED


def test_no_deep_pass_and_no_fail_where_k_is_capped(small_cap, monkeypatch):
    """k ≤ 128 (the rails row's cost rule): the search ends at the cap, so it is not complete and
    cannot FAIL (it used to: 13.34% at k = 128, 'complete'), and the deep pass is not run."""
    monkeypatch.setattr(E, "FLOW_CAP", 70_000)
    pt = _point(0.08, deep_cap=200_000, k_max=128)
    assert pt["event_k"] == 128 and pt["event_complete"] is False
    assert pt["verdict"] == E.UNDECIDED and "deep_cap" not in pt


def test_search_k_with_a_target_reports_an_incomplete_search():
    c = E.cluster(8, 1, ELLS, "simai")
    ring = E.nccl_event(8, 1, "simai", S.MESSAGE_BYTES)
    full = E.search_k(c, S.MESSAGE_BYTES, 64, cap=200_000)
    assert full["complete"] is True
    early = E.search_k(c, S.MESSAGE_BYTES, 64, cap=200_000, target=full["time"] * 2)
    assert early["complete"] is False and early["evaluated"] == 1
    assert early["time"] >= full["time"] >= ring


def test_the_search_from_k_1_steps_up():
    """×√2 from k = 1 rounds back to 1: the walk now steps at least ±1, so a point whose closed form
    is missing (k_start = 1) is still searched (fig22 at 100 GB/s, p = 32, used to evaluate no k)."""
    c = E.cluster(8, 1, ELLS, "simai")
    ev = E.search_k(c, S.MESSAGE_BYTES, 1, cap=200_000)
    assert ev["evaluated"] > 2 and ev["k"] > 1 and ev["complete"] is True


def test_a_point_without_a_closed_form_is_event_searched():
    """g = 8 at 100 GB/s NICs (s_nv = 9/2 < g − 1): optcc_servers has no closed form; the point is
    decided by event time even where the column does not search (event=False), against the
    NVLink-bound flat ring (baselines_rings.flat_ring_step)."""
    pt = E.point(32, 8, 2, "simai", S.MESSAGE_BYTES, 0.065, 2 * S.NIC_BANDWIDTH, event=False)
    assert pt["closed_form_overhead"] is None and pt["decided_by"] == "event time"
    assert pt["verdict"] == E.PASS and pt["event_complete"] is True and 0 < pt["overhead"] < 0.065


@pytest.mark.parametrize("model,verdict", [("simai", E.PASS), ("alpha", E.FAIL)])
def test_points_without_a_closed_form_are_searched_beyond_the_flow_cap(model, verdict):
    """fig22 at 100 GB/s, p = 256: every schedule is over FLOW_CAP (126,480 flows at k = 1), so the
    point had no value; it now gets the deep pass with schedules up to NO_CLOSED_FORM_CAP flows
    (not only in the verdict column). simai passes at the best k within the budget; alpha (o
    per message) FAILs only because its deep search is complete (no k over the cap, the event time
    worse on both sides of the best k)."""
    from optcc.algorithms.registry import choose
    from optcc.event_timer import Prepared
    from optcc.latency import units
    bw = 2 * S.NIC_BANDWIDTH
    pt = E.point(256, 8, 2, model, S.MESSAGE_BYTES, 0.065, bw, event=False)
    c = E.cluster(256, 8, 2, model, bw)
    assert pt["closed_form_overhead"] is None and len(choose(c).arrays(c, 1)) > E.FLOW_CAP
    assert (pt["verdict"], pt["decided_by"], pt["deep_complete"]) == (verdict, "event time (deep search)", True)
    assert pt["event_evaluated"] >= 1 and pt["event_overhead"] is None and pt["deep_cap"] == E.NO_CLOSED_FORM_CAP
    k = pt["k"]
    t = Prepared.from_arrays(c, choose(c).arrays(c, k)).event_time(*units(c, S.MESSAGE_BYTES))
    assert pt["overhead"] == pytest.approx(float(t / E.nccl_event(256, 8, model, S.MESSAGE_BYTES, bw) - 1), abs=1e-12)
    assert (pt["overhead"] <= 0.065) == (verdict == E.PASS)
