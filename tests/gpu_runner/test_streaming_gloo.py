"""Streaming runner over real gloo processes: random proved schedules (int64, exact), the CLI's
--runner flag and its refusal, and a dead or hung rank under streaming."""
import json
import random
import subprocess
import sys

import pytest

pytest.importorskip("torch")

from gpu_runner.launch import launch_trusted  # noqa: E402
from optcc.algorithms import build_schedule  # noqa: E402
from optcc_app.cli import main  # noqa: E402
from optcc.cluster import Cluster  # noqa: E402
from verifier import prove_allreduce  # noqa: E402
from verifier.streaming import prove_streaming  # noqa: E402

from streaming_cases import random_schedule  # noqa: E402


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_proved_schedules_stream_exactly_on_gloo(tmp_path, seed):
    rng = random.Random(100 + seed)
    schedule = random_schedule(rng, max_p=4)
    assert prove_allreduce(schedule).proved and prove_streaming(schedule)[1] is None
    path = str(tmp_path / "s.json")
    schedule.save(path)
    count = rng.choice([7, 1000, 4099])
    runner = "streaming-ordered" if seed == 2 else "streaming"
    res = launch_trusted(path, schedule.sha256(), schedule.cluster.p, 8 * count, "int64", 60.0, iters=2,
                         runner=runner)
    assert res.ok, res.describe_failure()
    row = res.result["rows"][0]
    assert res.result["runner"] == runner
    assert row["count"] == count and row["wrong"] == 0 and row["max_abs_error"] == 0.0


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "optcc", *args], capture_output=True, text=True, timeout=180)


def test_cli_runner_flag_step_and_streaming(tmp_path):
    path = str(tmp_path / "o.json")
    build_schedule("optcc", Cluster.build(3, stragglers={0: 2}), 2).save(path)
    for runner in ("step", "streaming", "streaming-ordered"):
        out = _cli("run", "--nproc", "3", "--schedule", path, "--size", "4004", "--dtype", "int32",
                   "--json", "--timeout", "30", "--runner", runner)
        assert out.returncode == 0, out.stderr
        data = json.loads(out.stdout)
        assert data["runner"] == runner and data["correct"] is True and data["wrong"] == 0


def test_streaming_is_refused_when_not_proved(tmp_path, monkeypatch, capsys):
    """A schedule whose streaming program the verifier refutes never starts a process (exit 2)."""
    import verifier.streaming
    path = str(tmp_path / "r.json")
    build_schedule("ring", Cluster.build(3), 1).save(path)

    def refuted(schedule, window=4, recv_order=False):
        return None, {"property": "streaming", "kind": "deadlock", "rank": 0, "message": "a cycle"}
    monkeypatch.setattr(verifier.streaming, "prove_streaming", refuted)
    monkeypatch.setattr("gpu_runner.launch.launch", lambda *a, **k: pytest.fail("a process was started"))
    assert main(["run", "--nproc", "3", "--schedule", path]) == 2
    err = capsys.readouterr().err
    assert "--runner" in err and "not proved safe" in err and "deadlock: a cycle" in err and "--runner step" in err


@pytest.mark.parametrize("kind", ["die", "hang"])
def test_dead_or_hung_rank_ends_every_streaming_rank(tmp_path, kind):
    schedule = build_schedule("optcc", Cluster.build(3, stragglers={0: 2}), 2)
    path = str(tmp_path / "o.json")
    schedule.save(path)
    timeout = 5.0
    res = launch_trusted(path, schedule.sha256(), 3, 4 * 1000, "float32", timeout,
                         runner="streaming", extra=["--inject-fault", f"{kind}:1"])
    assert not res.ok
    text = res.describe_failure()
    for r in (0, 2):
        assert res.returncodes[r] not in (0, None) and f"rank {r}:" in text
    assert "streaming" in text or "timed out" in text.lower()
    if kind == "die":
        assert max(res.exit_s[r] for r in (0, 2)) - res.exit_s[1] <= timeout + 1.5
    else:
        assert res.returncodes[1] < 0
        assert max(res.exit_s[r] for r in (0, 2)) - min(res.exit_s[r] for r in (0, 2)) <= timeout
