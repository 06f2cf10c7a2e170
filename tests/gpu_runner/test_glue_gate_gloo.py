"""Every run path reads the glue of a proved generator (piece map, sizes, clock, rank map) from
the one definition prove-all proves, so a mutated copy of it is refused by the real gate before
any rank runs: `optcc run --generated-check per-rank` on gloo and a torchrun worker
(`python -m gpu_runner`) re-prove the generator and stop at the refuted obligation."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from glue_mutants import GLUE_MUTANTS, source_edits

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]
PACKAGES = ("optcc", "verifier", "bounds", "lp_models", "gpu_runner", "optcc_app", "paper_checks")
INSTANCE = {"optcc": ["--p", "5", "--straggler", "0:3", "--segments", "2"],
            "ring": ["--p", "5", "--straggler", "0:3", "--segments", "2"]}


def _mutated_tree(tmp_path, name):
    tree = tmp_path / "tree"
    for pkg in PACKAGES:
        shutil.copytree(ROOT / pkg, tree / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    rel, edits = source_edits(name)
    src = (tree / rel).read_text()
    for old, new in edits:
        assert src.count(old) == 1, old
        src = src.replace(old, new)
    (tree / rel).write_text(src)
    return tree


def _optcc(tree, cwd, *args, timeout=240):
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPTCC_")}
    env["PYTHONPATH"] = str(tree)
    return subprocess.run([sys.executable, "-m", "optcc", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=timeout)


def _generated(tree, tmp_path, algo):
    made = _optcc(tree, tmp_path, "schedule", "--algo", algo, *INSTANCE[algo], "--form", "generated", "-o", "g.json")
    assert made.returncode == 0, made.stderr
    return tmp_path / "g.json"


# every glue mutant is refuted by prove_all in tests/verifier/test_generator_certificate.py (in process);
# through the real gate here, one of each kind: clock, sizes, piece map, rank map, the ring's slot
GATE_MUTANTS = ("pipeline slot δ for every ℓ", "epilogue two slots early", "P2P piece size 2δ/ℓ",
                "ring piece index σ(p − 1) + c", "rank node r − [r < s]", "ring slot without ℓ")


@pytest.mark.parametrize("name", GATE_MUTANTS)
def test_optcc_run_per_rank_refuses_a_glue_mutant(name, tmp_path):
    tree = _mutated_tree(tmp_path, name)
    algo = GLUE_MUTANTS[name][0]
    _generated(tree, tmp_path, algo)
    ran = _optcc(tree, tmp_path, "run", "--nproc", "5", "--schedule", "g.json", "--generated-check", "per-rank")
    out = ran.stdout + ran.stderr
    assert ran.returncode == 2, out
    assert f"re-proving the {algo} generator" in out and "is refuted" in out, out
    assert "starting 5 ranks" not in out and "correct" not in out and "WRONG" not in out


def test_the_unmutated_tree_runs_the_same_commands_exactly(tmp_path):
    """The control: the same copy, unedited, runs and sums exactly (so the refusals are the mutants')."""
    tree = tmp_path / "tree"
    for pkg in PACKAGES:
        shutil.copytree(ROOT / pkg, tree / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    for algo in ("optcc", "ring"):
        _generated(tree, tmp_path, algo)
        ran = _optcc(tree, tmp_path, "run", "--nproc", "5", "--schedule", "g.json", "--generated-check", "per-rank")
        assert ran.returncode == 0 and "correct (0 wrong elements" in ran.stdout, ran.stdout + ran.stderr


def test_a_torchrun_worker_refuses_a_glue_mutant(tmp_path):
    """`torchrun ... -m gpu_runner --schedule g.json` (no launcher): each worker re-proves the
    generator from the sources it runs and stops, every rank with an error, none running."""
    from conftest import torchrun_path
    torchrun = torchrun_path()
    from gpu_runner.launch import free_port
    tree = _mutated_tree(tmp_path, "pipeline slot δ for every ℓ")
    path = _generated(tree, tmp_path, "optcc")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPTCC_")}
    env.update(PYTHONPATH=str(tree), OMP_NUM_THREADS="1")
    ran = subprocess.run([torchrun, "--nproc-per-node", "5", "--master-addr", "127.0.0.1", "--master-port",
                          str(free_port()), "-m", "gpu_runner", "--schedule", str(path), "--size", "4096",
                          "--timeout", "30"], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=240)
    out = ran.stdout + ran.stderr
    assert ran.returncode != 0, out
    assert "re-proving the optcc generator" in out and "is refuted" in out, out[-3000:]
    assert "correct" not in ran.stdout and "WRONG" not in ran.stdout


ASSEMBLY_MUTANTS = {
    "phase origins dropped": [("starts.append(box * step + base)", "starts.append(box * step)")],
    "posting order by dst before src": [("order = np.lexsort((piece, dst, src, start))",
                                         "order = np.lexsort((piece, src, dst, start))")],
}


@pytest.mark.parametrize("name", sorted(ASSEMBLY_MUTANTS))
def test_each_rank_checks_its_part_against_the_proved_terms(name, tmp_path):
    """The numpy assembly of a rank's flows (grids, start grid, sort) is no obligation's: each rank
    re-enumerates its flows one by one from the proved terms and refuses a part that differs."""
    tree = tmp_path / "tree"
    for pkg in PACKAGES:
        shutil.copytree(ROOT / pkg, tree / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    rel = tree / "optcc/algorithms/families/local.py"
    src = rel.read_text()
    for old, new in ASSEMBLY_MUTANTS[name]:
        assert src.count(old) == 1, old
        src = src.replace(old, new)
    rel.write_text(src)
    _generated(tree, tmp_path, "optcc")
    ran = _optcc(tree, tmp_path, "run", "--nproc", "5", "--schedule", "g.json", "--generated-check", "per-rank")
    out = ran.stdout + ran.stderr
    assert ran.returncode != 0, out
    assert "is not the proved families'" in out, out[-3000:]
    assert "correct" not in ran.stdout and "WRONG" not in ran.stdout
