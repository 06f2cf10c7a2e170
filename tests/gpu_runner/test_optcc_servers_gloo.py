"""Multi-GPU-server OptCC executed by the runner on gloo (ranks grouped into servers by the
cluster's g), proved first by `optcc run`, result compared with the reference sum, timed."""
from fractions import Fraction as F

import pytest

pytest.importorskip("torch", reason="the runner needs torch (the 'runner' extra)")

from gloo_run import run_on_gloo  # noqa: E402

from optcc.algorithms.servers.build import optcc_server_allreduce  # noqa: E402
from optcc.cluster import Cluster  # noqa: E402


@pytest.mark.parametrize("p,g,server,ell,dtype", [(8, 4, 1, F(2), "int64"),
                                                  (8, 2, 2, F(8, 7), "float32")])
def test_server_schedule_runs_on_gloo(tmp_path, p, g, server, ell, dtype):
    cluster = Cluster.build(p, g, {r: ell for r in range(server * g, server * g + g)})
    path = str(tmp_path / "s.json")
    optcc_server_allreduce(cluster, 2).save(path)
    elem = 8 if dtype == "int64" else 4
    data = run_on_gloo(path, p, dtype, elem * 10007)   # not a multiple of the piece count
    assert data["correct"] is True and data["wrong"] == 0, data
    assert data["backend"] == "gloo" and data["world_size"] == p
    assert data["proof"] and data["seconds"] > 0
