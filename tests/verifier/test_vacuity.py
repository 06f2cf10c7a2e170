"""prove-all reports the obligations it proves vacuously (premise never holds) apart, and each is
of a kind docs/parametric.md ("Vacuous premises") justifies."""
from __future__ import annotations

import json
import re

import pytest

from optcc_app.cli import main
from verifier.parametric.obligations import Obligation, discharge

KINDS = (re.compile(r": order: \S+ before a later \S+$"),
         re.compile(r"(^|: )\S+ vs \S+: (one send port|one receive port|read during a write|two writes at once)$"))


@pytest.mark.parametrize("algo,count", [("ring", 3), ("optcc", 61), ("servers", 61)])
def test_prove_all_lists_vacuous_obligations_and_each_is_a_justified_kind(algo, count, capsys):
    if algo == "ring":                       # as the CLI prints it; the others through the same function
        assert main(["prove-all", "--algo", algo, "--json"]) == 0
        vac = json.loads(capsys.readouterr().out)["premise_never_holds"]
    else:
        from verifier.parametric import prove_all
        vac = prove_all(algo)["premise_never_holds"]
    assert len(vac) == count
    for v in vac:
        assert v["property"] in ("sum", "ports", "causality", "instance"), v
        assert any(k.search(v["obligation"]) for k in KINDS), v


def test_the_table_counts_them_and_verbose_names_them(capsys):
    assert main(["prove-all", "--algo", "ring"]) == 0
    out = capsys.readouterr().out
    assert "3 obligations hold because their premise never holds" in out and "--verbose lists them" in out
    assert main(["prove-all", "--algo", "ring", "--verbose"]) == 0
    out = capsys.readouterr().out
    assert "  causality: ring.all_gather vs ring.all_gather: two writes at once" in out


def test_discharge_tells_a_vacuous_premise_from_a_real_one():
    import z3
    x = z3.Int("x")
    vac = discharge(Obligation("ports", "never", [x >= 0], x >= 5, premise=[x < 0]))
    real = discharge(Obligation("ports", "sometimes", [x >= 0], x >= 0, premise=[x < 3]))
    assert vac["status"] == real["status"] == "proved"
    assert vac.get("premise") == "never holds" and "premise" not in real
