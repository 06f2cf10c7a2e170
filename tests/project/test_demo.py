"""`optcc demo`: the main job's numbers on a small cluster, and its JSON twin."""
import json

import pytest

from optcc_app.cli import main


def test_demo_json(capsys):
    assert main(["demo", "--p", "8", "--straggler", "0:2", "-k", "8", "--no-run", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    rows = out["rows"]
    assert out["ok"] is True
    assert out["lower_bound"] == pytest.approx(2.0) and out["t0"] == pytest.approx(14 / 8)
    assert rows["ring, straggler (PXN)"]["time"] == pytest.approx(2 * 14 / 8)      # ℓ·T0
    assert rows["ring, no straggler"]["time"] == pytest.approx(14 / 8)             # T0
    optcc = rows["OptCC"]
    assert optcc["correct"] is True and optcc["proved"] is True
    assert optcc["ratio_to_lower_bound"] == pytest.approx(1 + 1 / 8)              # ℓ = 2: 1 + 1/k
    assert rows["LP optimum, shared ports"]["time"] == pytest.approx(2.0, rel=1e-9)


def test_demo_table_defaults(capsys):
    assert main(["demo", "--p", "5", "-k", "2", "--no-run"]) == 0
    out = capsys.readouterr().out
    assert "straggler 0:ℓ=2" in out and "OptCC" in out and "NOT PROVED" not in out


def test_demo_real_run_matches_all_reduce(capsys):
    pytest.importorskip("torch", reason="the real run needs the runner extra (torch)")
    assert main(["demo", "--p", "6", "--straggler", "0:3/2", "-k", "4", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    run = out["rows"]["real run"]
    assert run["correct"] is True and run["seconds"] > 0


def test_demo_without_torch_skips_the_real_run(monkeypatch, capsys):
    import importlib.util
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))
    assert main(["demo", "--p", "4", "-k", "2"]) == 0
    out = capsys.readouterr().out
    assert "real run skipped: torch is not installed" in out and "OptCC" in out
