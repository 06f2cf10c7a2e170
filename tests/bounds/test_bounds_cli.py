"""`optcc bound`: JSON keys and values, the g > 1 straggler interpretation, --derive, errors."""
import json
from fractions import Fraction as F

import pytest

from bounds import closed_form as CF
from optcc_app.cli import main


def run_json(capsys, *argv):
    assert main(["bound", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_single_straggler_json(capsys):
    out = run_json(capsys, "--p", "16", "--straggler", "3:2", "--n", "1000")
    assert set(out) >= {"lower_bound", "t0", "ratio_to_t0", "binding", "seconds", "latex"}
    assert out["lower_bound"] == 2.0 and out["t0"] == 15 / 8 and out["binding"] == "cut"
    assert out["ratio_to_t0"] == pytest.approx(16 / 15)
    assert out["seconds"] == pytest.approx(2 * 1000 / 50e9)
    assert "\\ell" in out["latex"] and out["case"].startswith("Theorem 1 (paper)")


def test_volume_binds_below_crossing(capsys):
    out = run_json(capsys, "--p", "16", "--straggler", "0:3/2")
    assert out["binding"] == "volume"
    assert F(out["lower_bound_exact"]) == CF.lower_bound_single_straggler(16, F(3, 2)) == F(90, 47)


def test_straggler_server_is_theorem3(capsys):
    out = run_json(capsys, "--p", "16", "--g", "4", *sum((["--straggler", f"{r}:2"] for r in range(4, 8)), []))
    assert out["case"].startswith("Theorem 3 (paper)")
    assert F(out["lower_bound_exact"]) == CF.lower_bound_straggler_server(16, 4, 2)


def test_partial_server_uses_derived_bound(capsys):
    out = run_json(capsys, "--p", "16", "--g", "4", "--straggler", "4:2")
    assert "derived" in out["case"] and F(out["lower_bound_exact"]) == F(12, 31)


def test_multi_straggler_and_derive(capsys):
    out = run_json(capsys, "--p", "8", "--straggler", "1:2", "--straggler", "5:4/3", "--derive")
    assert "derived" in out["case"]
    assert F(out["lower_bound_exact"]) == CF.lower_bound_multi_straggler(8, [2, F(4, 3)])
    assert [s["step"] for s in out["derivation"]][0] == "Model"


def test_derive_text_has_proof_and_crossing(capsys):
    assert main(["bound", "--p", "8", "--straggler", "0:2", "--derive"]) == 0
    text = capsys.readouterr().out
    assert "Crossing point" in text and "PROVED" in text and "LaTeX:" in text


def test_bad_input_exits_2(capsys):
    assert main(["bound", "--p", "8", "--straggler", "9:2"]) == 2
    assert main(["bound", "--p", "8", "--n", "0"]) == 2


def test_derive_has_the_fluid_lp_certificate(capsys):
    """--derive ends with the closed-form LP certificate, proved for every p, evaluated here."""
    out = run_json(capsys, "--p", "8", "--straggler", "0:3/2", "--derive")
    lp = [s for s in out["derivation"] if s["step"].startswith("Fluid LP certificate")]
    assert len(lp) == 2 and all(s["proved"] is True for s in lp)
    assert "optimum 42/23" in lp[0]["text"] and "π = (2/23, 21/23)" in lp[0]["text"]
    assert "optimum 21/11" in lp[1]["text"] and "T_ex" in lp[1]["step"]
    out = run_json(capsys, "--p", "8", "--straggler", "1:2", "--straggler", "5:4/3", "--derive")
    lp = [s for s in out["derivation"] if s["step"].startswith("Fluid LP certificate")]
    assert len(lp) == 1 and "at instances only" in lp[0]["text"]
