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


def test_cvc5_refutes_a_false_obligation_on_its_own():
    """The export is not trivially unsat: a false claim comes back sat from cvc5."""
    import z3
    x, y = z3.Ints("x y")
    true = Obligation("sum", "x ≥ 1, y ≥ 1 ⇒ x·y ≥ 1", [x >= 1, y >= 1], x * y >= 1)
    false = Obligation("sum", "x ≥ 1, y ≥ 1 ⇒ x·y ≥ 2", [x >= 1, y >= 1], x * y >= 2)
    assert [R.solve(s)[0] for _, _, s in R.queries(true)] == ["sat", "unsat"]
    assert [R.solve(s)[0] for _, _, s in R.queries(false)] == ["sat", "sat"]


def test_a_disagreement_fails_the_run_and_is_printed(capsys, monkeypatch):
    real = R.solve
    calls = []

    def lying(script, timeout_ms=R.DEFAULT_TIMEOUT_MS, proof=False):
        calls.append(script)
        return ("sat", None) if len(calls) == 2 else real(script, timeout_ms, proof)   # the first obligation's claim
    monkeypatch.setattr(R, "solve", lying)
    assert main(["prove-all", "--algo", "ring", "--recheck", "cvc5"]) == 1
    out = capsys.readouterr().out
    assert "re-checked by cvc5: 123 of 124 queries agree with Z3, 1 disagree" in out
    assert "DISAGREE: lemmas:" in out and "NOT PROVED" in out


def test_ring_every_obligation_agrees_with_cvc5_with_a_checked_proof_each(tmp_path, capsys):
    """All 124 queries agree; with `--proofs DIR` every one of the ring's 62 claims comes with a
    CPC proof that cvc5's proof checker accepted (check-proofs), one file each, none with an
    unjustified step."""
    d = tmp_path / "proofs"
    assert main(["prove-all", "--algo", "ring", "--recheck", "cvc5", "--proofs", str(d), "--json"]) == 0
    rc = json.loads(capsys.readouterr().out)["recheck"]
    assert rc["solver"] == "cvc5" and rc["queries"] == 124
    assert rc["agree"] == 124 and rc["disagree"] == [] and rc["unknown"] == []
    pr = rc["proofs"]
    files = sorted(d.iterdir())
    assert pr["written"] == len(files) == 62 and pr["checker"] == "cvc5 check-proofs"
    assert pr["bytes"] == sum(f.stat().st_size for f in files) > 0
    assert all(f.suffix == ".cpc" and "(assume " in f.read_text() for f in files)
    assert pr["with_holes"] == [] and not any(":rule trust" in f.read_text() for f in files)


def test_a_proof_of_a_false_claim_is_not_written(tmp_path):
    """A claim cvc5 answers sat has no proof: nothing is written for it."""
    import z3
    x, y = z3.Ints("x y")
    false = Obligation("sum", "x ≥ 1, y ≥ 1 ⇒ x·y ≥ 2", [x >= 1, y >= 1], x * y >= 2)
    rc = R.recheck([false], proofs_dir=str(tmp_path))
    assert rc["disagree"] and rc["proofs"]["written"] == 0 and list(tmp_path.iterdir()) == []


def test_proofs_needs_recheck(capsys, tmp_path):
    assert main(["prove-all", "--algo", "ring", "--proofs", str(tmp_path / "p")]) == 2
    assert "--proofs" in capsys.readouterr().err
