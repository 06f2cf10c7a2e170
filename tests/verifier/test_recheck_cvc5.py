"""`optcc prove-all --algo A --recheck cvc5`: every obligation exported as SMT-LIB2 exactly as Z3
discharges it (a closed form through its polynomial split) and decided again by cvc5
(verifier.parametric.recheck). The ring's own set runs here (132 queries, seconds), its proof
objects for one obligation of each property; the LP certificates' claims, common to every
construction, and OptCC's and servers' sets take minutes and run by hand (docs/parametric.md
"A second solver"), so the CLI tests here leave the LP claims out (`lp_obligations`)."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("cvc5")

from optcc_app.cli import main  # noqa: E402
from optcc_app.commands import prove_all as PA  # noqa: E402
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


@pytest.fixture
def no_lp(monkeypatch):
    """The ring's own obligations only: the LP claims' re-check (248 queries) runs by hand."""
    monkeypatch.setattr(PA, "lp_obligations", lambda: [])


def _ring_set(monkeypatch, pick):
    """`--recheck` on part of the ring's set (prove-all's Z3 run stays whole): the parts cvc5
    decides with a proof each (seconds) or against a lying solver need not be all 128 queries."""
    from verifier.parametric.prove import obligations
    obs = pick(obligations("ring")[1])
    monkeypatch.setattr(PA, "recheck_obligations", lambda algo: obs)
    return obs


def test_a_disagreement_fails_the_run_and_is_printed(capsys, monkeypatch):
    """One obligation, its claim answered `sat` by a lying cvc5: exit 1, the disagreement named."""
    [ob] = _ring_set(monkeypatch, lambda obs: obs[:1])
    real = R.Cvc5.solve

    def lying(self, script, timeout_ms=R.DEFAULT_TIMEOUT_MS, proof=False):
        got = real(self, script, timeout_ms, proof)
        return ("sat", None) if got[0] == "unsat" else got       # the claim (non-vacuity is sat)
    monkeypatch.setattr(R.Cvc5, "solve", lying)
    assert main(["prove-all", "--algo", "ring", "--recheck", "cvc5"]) == 1
    out = capsys.readouterr().out
    assert "re-checked by cvc5: 1 of 2 queries agree with Z3, 1 disagree" in out
    assert f"DISAGREE: lemmas: {ob.name} (claim: cvc5 sat)" in out and "NOT PROVED" in out


def test_ring_every_obligation_agrees_with_cvc5(capsys, no_lp):
    """All 132 queries agree: the ring's 62 obligations, two of them closed forms re-checked
    through their polynomial split (3 parts each: a case or two, the positivity of the variables
    divided out, the cover; proved by Z3 too)."""
    assert main(["prove-all", "--algo", "ring", "--recheck", "cvc5", "--json"]) == 0
    rc = json.loads(capsys.readouterr().out)["recheck"]
    assert rc["solver"] == "cvc5" and rc["queries"] == 132
    assert rc["obligations"] == 62 and rc["split"] == 2 and rc["parts_proved_by_z3"] == 6
    assert rc["agree"] == 132 and rc["disagree"] == [] and rc["unknown"] == []
    slow = rc["slowest"]
    assert len(slow) == R.SLOWEST and [x["seconds"] for x in slow] == sorted((x["seconds"] for x in slow), reverse=True)


def test_a_query_past_its_limit_is_undecided_and_the_next_gets_a_fresh_worker(monkeypatch):
    """The worker answers queries in turn; one that runs past its limit is killed with it
    (cvc5's own limit does not interrupt every procedure) and the next query is answered."""
    import time

    import z3
    real = R.run_cvc5

    def hangs(script, timeout_ms, nl_cov=True, proof=False):
        if "hang" in script:
            time.sleep(30)
        return real(script, timeout_ms, nl_cov, proof)
    monkeypatch.setattr(R, "run_cvc5", hangs)          # the forked worker runs this module's run_cvc5
    x = z3.Int("x")
    ok = R.queries(Obligation("sum", "x ≥ 1 ⇒ x ≥ 0", [x >= 1], x >= 0))[1][2]
    with R.Cvc5() as w:
        assert w.solve(ok, 5000)[0] == "unsat"
        first = w._proc.pid
        t = time.perf_counter()
        assert w._ask("; hang\n" + ok, 100, False, False) == ("unknown", None)
        assert time.perf_counter() - t < 5 and w._proc is None
        assert w.solve(ok, 5000)[0] == "unsat" and w._proc.pid != first


def test_a_checked_proof_per_claim_for_one_obligation_of_each_property(tmp_path, capsys, monkeypatch):
    """With `--proofs DIR` every claim cvc5 refutes comes with a CPC proof that cvc5's proof
    checker accepted (check-proofs), one file each: here the first ring obligation of each
    property (all 66 by hand: docs/parametric.md), the Theorem 1 bound among them through its
    three parts. None has a step left unjustified (`trust`): the bound's polynomial case, its
    positive factors divided out, no longer needs cylindrical algebraic coverings, whose steps
    CPC records as `trust`."""
    from verifier.parametric.polynomial import parts
    seen: set[str] = set()
    obs = _ring_set(monkeypatch, lambda obs: [o for o in obs if not (o.prop in seen or seen.add(o.prop))])
    assert len(obs) == 10 and any("Theorem 1" in o.name and len(parts(o)) == 3 for o in obs)
    claims = sum(len(parts(o)) or 1 for o in obs)
    d = tmp_path / "proofs"
    assert main(["prove-all", "--algo", "ring", "--recheck", "cvc5", "--proofs", str(d), "--json"]) == 0
    rc = json.loads(capsys.readouterr().out)["recheck"]
    assert rc["agree"] == rc["queries"] == 2 * claims and rc["disagree"] == rc["unknown"] == []
    pr = rc["proofs"]
    files = sorted(d.iterdir())
    assert pr["written"] == len(files) == claims and pr["checker"] == "cvc5 check-proofs"
    assert pr["bytes"] == sum(f.stat().st_size for f in files) > 0
    assert all(f.suffix == ".cpc" and "(assume " in f.read_text() for f in files)
    assert sum("Theorem-1" in f.name for f in files) == 3
    assert pr["with_holes"] == [] and not any(":rule trust" in f.read_text() for f in files)


def test_a_proof_with_a_covering_step_is_counted_with_holes(tmp_path):
    """x² + y² ≥ 2xy over the reals: cvc5 decides it by cylindrical algebraic coverings, whose
    step CPC records as `trust` (ARITH_NL_COVERING_DIRECT): the proof is written and listed."""
    import z3
    x, y = z3.Reals("x y")
    rc = R.recheck([Obligation("sum", "x² + y² ≥ 2xy", [], x * x + y * y >= 2 * x * y)], 10000, proofs_dir=str(tmp_path))
    assert rc["agree"] == 2 and rc["proofs"]["written"] == 1
    [hole] = rc["proofs"]["with_holes"]
    trusts = [line for line in open(hole).read().splitlines() if line.startswith("; trust TRUST")]
    assert trusts and all("ARITH_NL_COVERING" in t for t in trusts)


def test_a_proof_of_a_false_claim_is_not_written(tmp_path):
    """A claim cvc5 answers sat has no proof: nothing is written for it."""
    import z3
    x, y = z3.Ints("x y")
    false = Obligation("sum", "x ≥ 1, y ≥ 1 ⇒ x·y ≥ 2", [x >= 1, y >= 1], x * y >= 2)
    rc = R.recheck([false], proofs_dir=str(tmp_path))
    assert rc["disagree"] and rc["proofs"]["written"] == 0 and list(tmp_path.iterdir()) == []


def test_lp_claims_are_exported_as_prove_decides_them():
    """An LP certificate's claim re-checked: the query bounds.proofs.prove decides (z3_query),
    true claims unsat for cvc5, a false one (the dual's Σ ports·π ≤ 1 made ≤ 0) sat."""
    import sympy as sp

    from lp_models.duals import CERTIFICATES, all_claims
    claim = next(c for c in all_claims(CERTIFICATES[0]()) if "Σ ports·π + π_ν ≤ 1" in c.name)
    ob = R.claim_obligation(claim)
    assert [R.solve(s, 10000)[0] for _, _, s in R.queries(ob)] == ["sat", "unsat"]
    from bounds.proofs import Claim
    false = R.claim_obligation(Claim(claim.name, claim.expr + sp.Integer(1), claim.op, claim.hypotheses))
    assert R.solve(R.queries(false)[1][2], 10000)[0] == "sat"


def test_proofs_needs_recheck(capsys, tmp_path):
    assert main(["prove-all", "--algo", "ring", "--proofs", str(tmp_path / "p")]) == 2
    assert "--proofs" in capsys.readouterr().err
