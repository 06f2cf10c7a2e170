"""`optcc prove-all --algo A --recheck cvc5`: every obligation exported as SMT-LIB2 exactly as Z3
discharges it and decided again by cvc5 (verifier.parametric.recheck). The ring's whole set runs
here (124 queries, seconds); OptCC's and servers' sets take minutes (docs/parametric.md)."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("cvc5")

from optcc_app.cli import main  # noqa: E402
from verifier.parametric import recheck as R  # noqa: E402
from verifier.parametric.obligations import Obligation  # noqa: E402


def test_ring_every_obligation_agrees_with_cvc5(capsys):
    assert main(["prove-all", "--algo", "ring", "--recheck", "cvc5", "--json"]) == 0
    rc = json.loads(capsys.readouterr().out)["recheck"]
    assert rc["solver"] == "cvc5" and rc["queries"] == 124
    assert rc["agree"] == 124 and rc["disagree"] == [] and rc["unknown"] == []


def test_cvc5_refutes_a_false_obligation_on_its_own():
    """The export is not trivially unsat: a false claim comes back sat from cvc5."""
    import z3
    x, y = z3.Ints("x y")
    true = Obligation("sum", "x ≥ 1, y ≥ 1 ⇒ x·y ≥ 1", [x >= 1, y >= 1], x * y >= 1)
    false = Obligation("sum", "x ≥ 1, y ≥ 1 ⇒ x·y ≥ 2", [x >= 1, y >= 1], x * y >= 2)
    assert [R.solve(s) for _, _, s in R.queries(true)] == ["sat", "unsat"]
    assert [R.solve(s) for _, _, s in R.queries(false)] == ["sat", "sat"]


def test_a_disagreement_fails_the_run_and_is_printed(capsys, monkeypatch):
    real = R.solve
    calls = []

    def lying(script, timeout_ms=R.DEFAULT_TIMEOUT_MS):
        calls.append(script)
        return "sat" if len(calls) == 2 else real(script, timeout_ms)   # the first obligation's claim
    monkeypatch.setattr(R, "solve", lying)
    assert main(["prove-all", "--algo", "ring", "--recheck", "cvc5"]) == 1
    out = capsys.readouterr().out
    assert "re-checked by cvc5: 123 of 124 queries agree with Z3, 1 disagree" in out
    assert "DISAGREE: lemmas:" in out and "NOT PROVED" in out
