"""Local ranks forked from a zygote that imported torch once (gpu_runner.zygote): the same results
as fresh interpreters, each rank its own environment, and a zygote that dies takes its ranks
with it and is replaced at the next launch."""
import os
import signal
import time

import pytest

pytest.importorskip("torch")

import gpu_runner.launch as launch_mod  # noqa: E402
from gpu_runner.launch import attested_worker_args, launch, prepare_schedule  # noqa: E402
from optcc.algorithms import build_schedule  # noqa: E402
from optcc.cluster import Cluster  # noqa: E402


@pytest.fixture
def proved(tmp_path):
    schedule = build_schedule("optcc", Cluster.build(3, stragglers={0: 2}), 2)
    path = str(tmp_path / "s.json")
    schedule.save(path)
    prepare_schedule(path, 3)
    return schedule, path


def _run(schedule, path, tmp_path, **kw):
    args = [*attested_worker_args(schedule, path, str(tmp_path)), "--size", str(8 * 1001), "--dtype", "int64"]
    res = launch(3, args, 60, **kw)
    assert res.ok, res.describe_failure()
    return res.result


def test_forked_and_fresh_ranks_compute_the_same(proved, tmp_path, monkeypatch):
    schedule, path = proved
    forked = _run(schedule, path, tmp_path)
    assert any(z.alive() for z in launch_mod._ZYGOTES.values())
    monkeypatch.setenv(launch_mod.ZYGOTE_ENV, "0")
    fresh = _run(schedule, path, tmp_path)
    for key in ("correct", "world_size", "backend"):
        assert forked[key] == fresh[key]
    assert forked["rows"][0]["wrong"] == fresh["rows"][0]["wrong"] == 0


def test_each_forked_rank_gets_its_own_environment(proved, tmp_path):
    """The hosts of a cluster are read per rank from OPTCC_HOSTNAME: ranks see their own value."""
    schedule, path = proved
    names = {0: "alpha", 1: "beta", 2: "gamma"}
    result = _run(schedule, path, tmp_path, env_extra=lambda r: {"OPTCC_HOSTNAME": names[r]})
    assert result["correct"] is True


def test_a_dead_zygote_takes_its_ranks_and_is_replaced(proved, tmp_path):
    schedule, path = proved
    _run(schedule, path, tmp_path)
    zygote = next(z for z in launch_mod._ZYGOTES.values() if z.alive())
    rank = zygote.spawn(["--algo", "torch", "--size", "8", "--timeout", "60"], dict(os.environ, RANK="0",
                        WORLD_SIZE="2", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT="1"),
                        str(tmp_path / "o"), str(tmp_path / "e"))
    os.kill(zygote.proc.pid, signal.SIGKILL)
    zygote.proc.wait(timeout=10)
    assert rank.wait(timeout=10) == -signal.SIGKILL          # gone with it (parent-death signal)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and os.path.exists(f"/proc/{rank.pid}") and \
            open(f"/proc/{rank.pid}/stat").read().rsplit(")", 1)[1].split()[0] not in ("Z", "X"):
        time.sleep(0.1)
    assert not os.path.exists(f"/proc/{rank.pid}") or \
        open(f"/proc/{rank.pid}/stat").read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    assert _run(schedule, path, tmp_path)["correct"] is True   # a new zygote serves the next launch
    assert any(z.alive() and z is not zygote for z in launch_mod._ZYGOTES.values())


def test_a_file_changed_after_its_proof_is_refused_by_every_worker(proved, tmp_path):
    """The launcher does not read the file again; each worker compares what it loads with the
    attested sha256, so a schedule swapped in after the proof never runs."""
    schedule, path = proved
    from gpu_runner.launch import launch_trusted
    build_schedule("ring", Cluster.build(3), 1).save(path)          # proved, valid, but not the attested one
    res = launch_trusted(path, schedule.sha256(), 3, 8 * 1001, "int64", 30, schedule=schedule)
    assert not res.ok
    assert "attests another schedule" in res.describe_failure()


def test_optcc_run_reads_the_schedule_once_in_the_launcher(proved, monkeypatch):
    import optcc.generated
    from optcc.schedule import Schedule
    from optcc_app.cli import main
    _, path = proved
    loads = []
    plain, plain_any = Schedule.load.__func__, optcc.generated.load_any

    def counting(cls, p):
        loads.append(p)
        return plain(cls, p)

    def counting_any(p, field="schedule"):
        loads.append(p)
        return plain_any(p, field)
    monkeypatch.setattr(Schedule, "load", classmethod(counting))
    monkeypatch.setattr(optcc.generated, "load_any", counting_any)   # either form: a flow list or parameters
    assert main(["run", "--nproc", "3", "--schedule", path, "--size", "4004", "--dtype", "int32"]) == 0
    assert loads == [path]
