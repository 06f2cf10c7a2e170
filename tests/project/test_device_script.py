"""The one prepared device script (benchmarks/device/): outside the installed package, runs its
CPU sections as a code check, and skips every CUDA section with its reason where there is no GPU."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_the_device_script_is_not_in_the_installed_package():
    assert not (ROOT / "gpu_runner" / "gpu_checks.py").exists()
    assert (ROOT / "benchmarks" / "device" / "gpu_checks.py").is_file() and (ROOT / "benchmarks" / "device" / "run.sh").is_file()


def test_cpu_dry_run_checks_every_virtual_case_and_skips_cuda_sections(tmp_path):
    torch = pytest.importorskip("torch")
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    res = subprocess.run([sys.executable, "benchmarks/device/gpu_checks.py", "--cpu-dry-run", "--out", str(tmp_path)],
                         capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    got = json.loads((tmp_path / "gpu_results.json").read_text())
    assert got["device"] == "cpu" and got["summary"] == {"virtual_cases": 80, "virtual_wrong_cases": 0,
                                                         "graph_cases": 6, "graph_wrong_cases": 0}
    graph = got["sections"]["graph"]["result"]
    assert [(r["algo"], r["p"], r["dtype"]) for r in graph["rows"]] == [
        (a, p, d) for a, p in (("ring", 4), ("optcc", 4), ("optcc", 8)) for d in ("float32", "bfloat16")]
    for r in graph["rows"]:
        assert r["device_ops"] > 0 and r["us_per_allreduce"] > 0 and r["GBps"] > 0
    assert graph["table"][0].split() == ["algo", "p", "dtype", "bytes", "build_s", "us/allreduce", "ops", "us/op",
                                         "GB/s", "max_rel_err", "wrong"]
    assert "\n".join(graph["table"]) in res.stdout          # the table is printed, not only written
    if not torch.cuda.is_available():
        for name in ("nccl1", "gloo_cuda"):      # graph runs on CPU under --cpu-dry-run
            assert got["sections"][name] == {"skipped": "no CUDA device"}


def test_without_a_gpu_every_cuda_section_is_skipped_with_its_reason(tmp_path):
    """The plain run (what run.sh starts) on a machine without CUDA: exit 0, each section but env
    recorded as skipped, the graph section included; no figure is made up."""
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the sections run")
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    res = subprocess.run([sys.executable, "benchmarks/device/gpu_checks.py", "--out", str(tmp_path)],
                         capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    got = json.loads((tmp_path / "gpu_results.json").read_text())
    assert got["device"] == "cuda" and got["sections"]["env"]["result"]["cuda_available"] is False
    for name in ("virtual", "graph", "add", "nccl1", "gloo_cuda"):
        assert got["sections"][name] == {"skipped": "no CUDA device"}
    assert got["summary"] == {"virtual_cases": 0, "virtual_wrong_cases": 0, "graph_cases": 0, "graph_wrong_cases": 0}
