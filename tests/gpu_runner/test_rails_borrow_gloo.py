"""optcc_rails with borrowing sub-rails on gloo: p = 8, g = 2, GPU 0 at ℓ = 3, k = 8 (the
borrowing plan wins there: fractional rates on NICs shared by two sub-rails, NVLink endpoints on
the borrowed GPU), run by `optcc run` and compared with the reference sum."""

import pytest

pytest.importorskip("torch", reason="the runner needs torch (the 'runner' extra)")

from gloo_run import run_on_gloo  # noqa: E402

from optcc.algorithms import build_schedule  # noqa: E402
from optcc.cluster import Cluster  # noqa: E402


def test_borrowing_subrails_run_on_gloo(tmp_path):
    cluster = Cluster.build(8, 2, {0: 3})
    s = build_schedule("optcc", cluster, 8)
    assert s.meta["subrails"] == [[0, 2, 4, 6], [1, 3, 5, 7], [1, 2, 4, 6]]
    path = str(tmp_path / "b.json")
    s.save(path)
    data = run_on_gloo(path, 8)
    assert data["correct"] is True and data["wrong"] == 0, data
    assert data["backend"] == "gloo" and data["world_size"] == 8 and data["proof"]
