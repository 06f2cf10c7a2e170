"""gpu_runner over real gloo processes: ring and OptCC at p ∈ {3,4,5,8}, optcc run, refusal, faults."""
import json
import subprocess
import sys

import pytest

pytest.importorskip("torch")

from gpu_runner.launch import launch, launch_trusted, prepare_schedule, worker_certificate  # noqa: E402
from optcc.algorithms import build_schedule  # noqa: E402
from optcc.cluster import Cluster  # noqa: E402
from optcc.schedule import Schedule  # noqa: E402

from test_runner import signed_schedule, snapshot_schedule  # noqa: E402

DTYPE_FOR_P = {3: "int32", 4: "bfloat16", 5: "float16", 8: "int64"}


def _optcc_cli(*args, timeout=180):
    return subprocess.run([sys.executable, "-m", "optcc", *args], capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.parametrize("p", [3, 4, 5, pytest.param(8, marks=pytest.mark.slow)])
@pytest.mark.parametrize("algo", ["ring", "optcc"])
def test_schedule_on_gloo_matches_all_reduce(tmp_path, algo, p):
    schedule = build_schedule(algo, Cluster.build(p, stragglers={p - 1: 2}), 2)
    path = str(tmp_path / "s.json")
    schedule.save(path)
    schedule, _ = prepare_schedule(path, p)            # the real verifier proves it first
    dtype = DTYPE_FOR_P[p]
    elem = 2 if dtype in ("bfloat16", "float16") else 4 if dtype == "int32" else 8
    sizes = [elem * 1, elem * 1001, elem * 4099]      # 1 element, and lengths not multiple of pieces
    res = launch(p, ["--schedule", path, "--certificate", worker_certificate(schedule, str(tmp_path)), "--mode", "bench",
                     "--sizes", ",".join(map(str, sizes)), "--dtype", dtype, "--warmup", "0",
                     "--iters", "1"], timeout_s=60)
    assert res.ok, res.describe_failure()
    assert res.result["backend"] == "gloo" and res.result["world_size"] == p
    assert [r["count"] for r in res.result["rows"]] == [1, 1001, 4099]
    assert all(r["wrong"] == 0 and r["correct"] for r in res.result["rows"]), res.result["rows"]


def test_cli_run_json_keys(tmp_path):
    path = str(tmp_path / "ring.json")
    build_schedule("ring", Cluster.build(3), 1).save(path)
    out = _optcc_cli("run", "--nproc", "3", "--schedule", path, "--size", str(4 * 1001),
                     "--dtype", "int32", "--json", "--timeout", "30")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["correct"] is True and data["wrong"] == 0
    assert data["backend"] == "gloo" and data["world_size"] == 3
    assert 0 < data["seconds"] < 30 and data["count"] == 1001


@pytest.mark.parametrize("make,p", [(signed_schedule, 2), (snapshot_schedule, 3)])
def test_hand_made_schedules_on_gloo(tmp_path, make, p):
    """Signed coefficients, a LocalOp, and a piece modified while it is being sent."""
    path = str(tmp_path / "s.json")
    make().save(path)
    out = _optcc_cli("run", "--nproc", str(p), "--schedule", path, "--size", str(8 * 10003),
                     "--dtype", "int64", "--json", "--timeout", "30",
                     *(["--allow-worse-numerics"] if make is signed_schedule else []))   # Σ|c| = 3 > p: issue 12
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["correct"] is True


def test_unproved_schedule_is_refused_before_any_process(tmp_path, monkeypatch, capsys):
    import gpu_runner.launch as launch_mod
    from optcc_app.cli import main
    s = signed_schedule()
    broken = Schedule(s.cluster, s.pieces, s.flows[:-1], s.local_ops)   # rank 1 never gets the sum
    path = str(tmp_path / "broken.json")
    broken.save(path)
    started = []
    monkeypatch.setattr(launch_mod, "launch", lambda *a, **k: started.append(a))
    assert main(["run", "--nproc", "2", "--schedule", path]) == 2
    err = capsys.readouterr().err
    assert "did not prove" in err and "refusing" in err
    assert started == []


def test_certificate_mismatch_is_refused(tmp_path, capsys):
    from optcc_app.cli import main
    from verifier import prove_allreduce, write_certificate
    ring = build_schedule("ring", Cluster.build(3), 1)
    other = build_schedule("ring", Cluster.build(3), 2)
    cert = str(tmp_path / "cert.json")
    write_certificate(prove_allreduce(other), other, cert)
    path = str(tmp_path / "ring.json")
    ring.save(path)
    assert main(["run", "--nproc", "3", "--schedule", path, "--certificate", cert]) == 2
    assert "does not certify" in capsys.readouterr().err


def test_nproc_must_match_schedule(tmp_path, capsys):
    from optcc_app.cli import main
    path = str(tmp_path / "ring.json")
    build_schedule("ring", Cluster.build(3), 1).save(path)
    assert main(["run", "--nproc", "4", "--schedule", path]) == 2
    assert "--nproc" in capsys.readouterr().err


TIMEOUT = 5.0


@pytest.mark.parametrize("kind", ["die", "hang"])
def test_dead_or_hung_rank_makes_every_rank_exit(tmp_path, kind):
    schedule = build_schedule("ring", Cluster.build(3), 1)
    path = str(tmp_path / "ring.json")
    schedule.save(path)
    res = launch_trusted(path, schedule.sha256(), 3, 4 * 1000, "float32", TIMEOUT,
                         extra=["--inject-fault", f"{kind}:1"])
    assert not res.ok
    others = [0, 2]
    assert all(res.returncodes[r] not in (0, None) for r in others)
    text = res.describe_failure()
    for r in others:                         # each survivor says what it waited for
        assert f"rank {r}:" in text
    if kind == "die":
        assert res.returncodes[1] == 17
        # survivors leave within the timeout of the death (peer's socket closes at once)
        assert max(res.exit_s[r] for r in others) - res.exit_s[1] <= TIMEOUT + 1.5
    else:
        assert res.returncodes[1] < 0        # the hung rank was killed by the launcher
        assert "Timed out" in text or "timed out" in text
        # survivors exit within the timeout of each other's first wait; the launcher never hangs
        assert max(res.exit_s[r] for r in others) - min(res.exit_s[r] for r in others) <= TIMEOUT
        assert res.exit_s[1] - max(res.exit_s[r] for r in others) <= TIMEOUT + 4
