"""optcc_rails on gloo: several straggler servers with g > 1 (and a mixed server), proved by
`optcc run`, result compared with the reference sum."""

import pytest

pytest.importorskip("torch", reason="the runner needs torch (the 'runner' extra)")

from gloo_run import run_on_gloo  # noqa: E402

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
    data = run_on_gloo(path, 8)
    assert data["correct"] is True and data["wrong"] == 0, data
    assert data["backend"] == "gloo" and data["world_size"] == 8 and data["proof"]
