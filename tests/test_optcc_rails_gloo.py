"""optcc_rails on gloo: several straggler servers with g > 1 (and a mixed server), proved by
`optcc run`, result compared with the reference sum."""
import json
import subprocess
import sys

import pytest

pytest.importorskip("torch", reason="the runner needs torch (the 'runner' extra)")

from optcc.algorithms import build_schedule  # noqa: E402
from optcc.cluster import Cluster  # noqa: E402


def test_two_degraded_servers_run_on_gloo(tmp_path):
    # servers 1 and 2 each lost 1 of 2 NICs (PXN: ℓ = 2 on both GPUs); server 3 is mixed
    # (one GPU at ℓ = 3/2): two straggler servers and a partial one
    cluster = Cluster.build(8, 2, {6: "3/2"}, failed_nics=[(1, 1), (2, 1)])
    s = build_schedule("optcc", cluster, 2)
    assert "optcc_rails" in s.meta["construction"]
    path = str(tmp_path / "r.json")
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
