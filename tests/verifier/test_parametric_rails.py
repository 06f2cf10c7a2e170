"""The rails composition theorem's steps for every q, g (verifier.parametric.rails): every
obligation proved, every false control refuted on its goal, and the status says "proved" only
when both hold."""
from __future__ import annotations

import pytest

from verifier.parametric import rails as R
from verifier.parametric.obligations import discharge


def test_every_step_proved_and_every_control_refuted():
    R.composition_theorem.cache_clear()
    th = R.composition_theorem()
    assert th["proved"] is True and th["status"] == "proved (Z3, all q, g)"
    assert len(th["obligations"]) == 11 and all(r["status"] == "proved" for r in th["obligations"])
    assert len(th["controls"]) == 4 and all(r["status"] == "refuted" for r in th["controls"])
    assert "q ≥ 2" in th["for_all"] and "g ≥ 2" in th["for_all"] and len(th["argued"]) == 3


@pytest.mark.parametrize("i", range(4))
def test_control_refuted_on_its_goal_not_by_vacuity(i):
    r = discharge(R.controls()[i])
    assert r["status"] == "refuted" and r["why"] == "goal fails"


def test_status_is_not_proved_when_a_control_holds(monkeypatch):
    """A control that Z3 proves (here: a true step passed off as a control) makes the theorem NOT proved."""
    monkeypatch.setattr(R, "controls", lambda: R.obligations()[:1])
    R.composition_theorem.cache_clear()
    try:
        th = R.composition_theorem()
        assert th["proved"] is False and th["status"] == "NOT proved"
    finally:
        R.composition_theorem.cache_clear()


def test_bracket_missing_a_gpu_breaks_the_server_sum():
    """The refuted control's counterexample: the skipped GPU is the input whose coefficient is lost."""
    import z3
    ob = R.value_obligations(skip=z3.Int("skipped"))[1]
    s = z3.Solver()
    s.add(*ob.assumptions, z3.Not(ob.goal))
    assert s.check() == z3.sat
    m = s.model()
    assert m.eval(z3.Int("n")).as_long() == m.eval(z3.Int("skipped")).as_long() == m.eval(z3.Int("j0")).as_long()
