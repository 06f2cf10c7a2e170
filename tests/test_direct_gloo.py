"""optcc_rails with direct rails on gloo: two degraded servers at k = 3 (both rails [1, 2, 2, 1]
take the direct AllReduce: fractional rates, several adds landing in one piece at once), run by
`optcc run` and compared with the reference sum."""
import json
import subprocess
import sys

import pytest

pytest.importorskip("torch", reason="the runner needs torch (the 'runner' extra)")

from optcc.algorithms import build_schedule, optcc_rails  # noqa: E402
from optcc.cluster import Cluster  # noqa: E402


def test_direct_rails_run_on_gloo(tmp_path):
    cluster = Cluster.build(8, 2, {6: "3/2"}, failed_nics=[(1, 1), (2, 1)])
    plan = optcc_rails._best_plan(cluster, 3, materialize=False)
    assert [sched.meta["algorithm"] for sched, _, _ in plan.rails] == ["direct", "direct"]
    s = build_schedule("optcc", cluster, 3)
    path = str(tmp_path / "d.json")
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
