"""optcc_rails with direct rails on gloo: two degraded servers at k = 3 (both rails [1, 2, 2, 1]
take the direct AllReduce: fractional rates, several adds landing in one piece at once), run by
`optcc run` and compared with the reference sum."""

import pytest

pytest.importorskip("torch", reason="the runner needs torch (the 'runner' extra)")

from gloo_run import run_on_gloo  # noqa: E402

from optcc.algorithms import build_schedule  # noqa: E402
from optcc.algorithms.rails import build as optcc_rails
from optcc.cluster import Cluster  # noqa: E402


def test_direct_rails_run_on_gloo(tmp_path):
    cluster = Cluster.build(8, 2, {6: "3/2"}, failed_nics=[(1, 1), (2, 1)])
    plan = optcc_rails._best_plan(cluster, 3, materialize=False)
    assert [sched.meta["algorithm"] for sched, _, _ in plan.rails] == ["direct", "direct"]
    s = build_schedule("optcc", cluster, 3)
    path = str(tmp_path / "d.json")
    s.save(path)
    data = run_on_gloo(path, 8)
    assert data["correct"] is True and data["wrong"] == 0, data
    assert data["backend"] == "gloo" and data["world_size"] == 8 and data["proof"]
