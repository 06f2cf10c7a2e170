"""optcc_rails with borrowing sub-rails on gloo: p = 8, g = 2, GPU 0 at ℓ = 3, k = 8 (the
borrowing plan wins there: fractional rates on NICs shared by two sub-rails, NVLink endpoints on
the borrowed GPU), run by `optcc run` and compared with the reference sum."""
import json
import subprocess
import sys

import pytest

pytest.importorskip("torch", reason="the runner needs torch (the 'runner' extra)")

from optcc.algorithms import build_schedule  # noqa: E402
from optcc.cluster import Cluster  # noqa: E402


def test_borrowing_subrails_run_on_gloo(tmp_path):
    cluster = Cluster.build(8, 2, {0: 3})
    s = build_schedule("optcc", cluster, 8)
    assert s.meta["subrails"] == [[0, 2, 4, 6], [1, 3, 5, 7], [1, 2, 4, 6]]
    path = str(tmp_path / "b.json")
    s.save(path)
    out = subprocess.run([sys.executable, "-m", "optcc", "run", "--nproc", "8", "--schedule", path,
                          "--size", str(4 * 10007), "--dtype", "float32", "--json", "--timeout", "60",
                          "--backend", "gloo", "--iters", "1", "--warmup", "0"],
                         capture_output=True, text=True, timeout=240)
    if out.returncode != 0 and "Address already in use" in out.stderr:
        pytest.skip("gloo could not bind a local port on this machine: " + out.stderr[-200:])
    assert out.returncode == 0, out.stderr[-2000:]
    data = json.loads(out.stdout)
    assert data["correct"] is True and data["wrong"] == 0, data
    assert data["backend"] == "gloo" and data["world_size"] == 8 and data["proof"]
