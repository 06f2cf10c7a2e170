"""Workers of `optcc run` prove nothing (the launcher attests), so they import no solver: no z3,
sympy or ortools in any rank's sys.modules, for a flow list and a generated schedule, with each
runner. Each rank dumps its sys.modules at exit through a sitecustomize on its PYTHONPATH."""
from __future__ import annotations

import json
import os
import pathlib

import pytest

SITE = '''import atexit, json, os, sys
def _dump():
    d = os.environ.get("OPTCC_TEST_MODULES_DIR")
    if d and os.environ.get("RANK") is not None:
        with open(os.path.join(d, f"{os.getpid()}.json"), "w") as fh:
            json.dump({"rank": os.environ["RANK"], "modules": sorted(sys.modules)}, fh)
atexit.register(_dump)
'''
ROOT = pathlib.Path(__file__).resolve().parents[2]
SOLVERS = ("z3", "sympy", "ortools")


@pytest.mark.parametrize("form,runner", [("flows", "streaming"), ("flows", "step"), ("generated", "streaming")])
def test_a_worker_of_optcc_run_imports_no_solver(tmp_path, run_optcc, form, runner):
    pytest.importorskip("torch")
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITE)
    mods = tmp_path / "mods"
    mods.mkdir()
    made = run_optcc("schedule", "--algo", "optcc", "--p", "4", "--straggler", "1:2", "--segments", "2",
                     "--form", form, "-o", tmp_path / "s.json")
    assert made.returncode == 0, made.stderr
    env = dict(os.environ, OPTCC_TEST_MODULES_DIR=str(mods),
               PYTHONPATH=os.pathsep.join([str(site), str(ROOT), os.environ.get("PYTHONPATH", "")]))
    ran = run_optcc("run", "--nproc", "4", "--schedule", tmp_path / "s.json", "--runner", runner,
                    "--size", "64K", env=env)
    assert ran.returncode == 0 and "correct (0 wrong elements" in ran.stdout, ran.stdout + ran.stderr
    dumps = [json.loads(p.read_text()) for p in mods.glob("*.json")]
    assert sorted(d["rank"] for d in dumps) == ["0", "1", "2", "3"]
    for d in dumps:
        assert not [m for m in SOLVERS if m in d["modules"]], (d["rank"], [m for m in SOLVERS if m in d["modules"]])
    assert any(m.startswith("verifier") for m in dumps[0]["modules"])   # the rank did check its program
