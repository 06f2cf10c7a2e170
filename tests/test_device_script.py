"""The one prepared device script (benchmarks/device/): outside the installed package, runs its
CPU sections as a code check, and skips every CUDA section with its reason where there is no GPU."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


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
    assert got["device"] == "cpu" and got["summary"] == {"virtual_cases": 80, "virtual_wrong_cases": 0}
    if not torch.cuda.is_available():
        for name in ("nccl1", "gloo_cuda"):
            assert got["sections"][name] == {"skipped": "no CUDA device"}
