"""Every statement prove-all proves is pinned: its digest by part (obligations, near_optimal,
lower_bound_lp; optcc_app.compose.statements) is fixed here, so a statement that quietly weakens
fails the suite. Re-pin only after reviewing the change: `optcc prove-all --algo A --json`
prints "statements_sha256". The weakening edits that once left prove-all PROVED and the suite
green each change a pinned digest (the mutants below).

Pinned with z3 5.4.1 and sympy 1.14.0 (the digests hash their printed terms)."""
from __future__ import annotations

import inspect
import sys
import types

import pytest

from optcc_app.compose.statements import statements_sha256

PINNED = {
    "ring": {"obligations": "7a0613279a305232b99fedfc8e2059eae314203048f6dda7f189ca6dbcfd4ffd",
             "lower_bound_lp": "a2a503eef7c69e58ab0260b94e18550af3dc805834d6cfce3e7d671c3551cec3"},
    "optcc": {"obligations": "e578543eca1e28eb617aadbb7794adf2e7c66ef9f387c2d61bc8b81142adc385",
              "near_optimal": "2de41c7495e9430ee65cb70ed5cad5eb38483ca05238008f847bba401efe4732",
              "lower_bound_lp": "a2a503eef7c69e58ab0260b94e18550af3dc805834d6cfce3e7d671c3551cec3"},
    "servers": {"obligations": "d4ae1783e67bd601679664fcf2b074ff8413cb1ad66dbdb947ea314c6178b3d6",
                "near_optimal": "57de3d53accc0fa717a83024d27e7744fedf970b97054696b1e9cb64ddc306d1",
                "lower_bound_lp": "a2a503eef7c69e58ab0260b94e18550af3dc805834d6cfce3e7d671c3551cec3"},
}


def _versions_ok():
    import sympy
    import z3
    return z3.get_version_string() == "5.4.1" and sympy.__version__ == "1.14.0"


@pytest.mark.parametrize("algo", sorted(PINNED))
def test_what_prove_all_proves_is_pinned(algo):
    if not _versions_ok():
        pytest.skip("the pins hash z3 5.4.1's and sympy 1.14.0's printed terms; re-pin for these versions")
    assert statements_sha256(algo) == PINNED[algo], (
        f"a statement prove-all --algo {algo} proves changed: review it, then re-pin from "
        f"`optcc prove-all --algo {algo} --json` (statements_sha256)")


# (module, old, new, (algo, part) whose pin must change)
WEAKENINGS = {
    "servers: the all-gather round's value goal dropped": (
        "verifier.parametric.servers", "*V.well_formed(got, g), V.same(got, F, g)), A))",
        "*V.well_formed(got, g)), A))", ("servers", "obligations")),
    "LP dual feasibility relaxed to Σ ports·π ≤ 2": (
        "lp_models.duals", "cert.ports * sum(du.pi) + du.pi_nu - 1", "cert.ports * sum(du.pi) + du.pi_nu - 2",
        ("ring", "lower_bound_lp")),
    "ℓ < 2 near-optimality weakened under its old name": (
        "verifier.parametric.near_optimal", "lambda P: slot_time(P) <= (1 + 2 / k(P)) * exclusive_optimum(P)),",
        "lambda P: slot_time(P) <= (1 + 3 / k(P)) * exclusive_optimum(P)),", ("optcc", "near_optimal")),
    "streaming_order's irreflexivity goal replaced by True": (
        "verifier.parametric.streaming_order", "z3.Not(lex_less(A, A))", "z3.BoolVal(True)", ("ring", "obligations")),
}


@pytest.mark.parametrize("name", sorted(WEAKENINGS))
def test_each_known_weakening_changes_a_pinned_digest(name, monkeypatch):
    modname, old, new, (algo, part) = WEAKENINGS[name]
    __import__(modname)
    real = sys.modules[modname]
    src = inspect.getsource(real)
    assert src.count(old) == 1, old
    mutant = types.ModuleType(modname)
    mutant.__file__ = real.__file__
    exec(compile(src.replace(old, new), real.__file__, "exec"), mutant.__dict__)
    monkeypatch.setitem(sys.modules, modname, mutant)
    for mod in list(sys.modules.values()):       # every module that bound it by name (`import ... as SO`)
        for key, value in list(getattr(mod, "__dict__", {}).items()):
            if value is real:
                monkeypatch.setattr(mod, key, mutant)
    assert statements_sha256(algo, (part,))[part] != PINNED[algo][part], (name, algo)
