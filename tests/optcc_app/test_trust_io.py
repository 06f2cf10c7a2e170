"""Output files: atomic, only over regular files or new paths, umask honoured; crashes exit 3."""
import os
import stat
from fractions import Fraction

import pytest

from optcc_app import cli
from optcc.errors import OptccError
from optcc.files import read_json, write_text_atomic


def test_new_file_honours_the_umask(tmp_path):
    path = str(tmp_path / "a.json")
    old = os.umask(0o027)
    try:
        write_text_atomic(path, "{}", "output")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640
    assert read_json(path, "x") == {}


def test_replacing_a_regular_file_keeps_its_mode(tmp_path):
    path = str(tmp_path / "a.json")
    with open(path, "w") as fh:
        fh.write("old")
    os.chmod(path, 0o604)
    write_text_atomic(path, "[1]", "output")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o604 and read_json(path, "x") == [1]


@pytest.mark.parametrize("kind", ["symlink", "fifo", "directory", "device"])
def test_non_regular_paths_are_refused_and_left_alone(tmp_path, kind):
    target = tmp_path / "target.json"
    target.write_text("keep")
    path = str(tmp_path / "p")
    if kind == "symlink":
        os.symlink(target, path)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        os.mkdir(path)
    else:
        path = "/dev/null"
    before = os.lstat(path)
    with pytest.raises(OptccError) as e:
        write_text_atomic(path, "x", "output")
    assert e.value.field == "output"
    after = os.lstat(path)
    assert stat.S_IFMT(after.st_mode) == stat.S_IFMT(before.st_mode)
    assert target.read_text() == "keep"
    assert [n for n in os.listdir(tmp_path) if n.startswith(".optcc-")] == []


def test_reading_a_fifo_is_refused_not_waited_on(tmp_path):
    path = str(tmp_path / "f")
    os.mkfifo(path)
    with pytest.raises(OptccError, match="not a regular file"):
        read_json(path, "schedule")


def test_an_internal_error_exits_3_not_1(monkeypatch, capsys):
    import optcc_app.commands.bound as bound

    def boom(args):
        raise ZeroDivisionError("a bug")
    monkeypatch.setattr(bound, "run", boom)
    assert cli.main(["bound", "--p", "3"]) == cli.EXIT_INTERNAL == 3
    err = capsys.readouterr().err
    assert err.startswith("optcc: internal error: ZeroDivisionError: a bug") and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_one_server_flat_ring_passes_its_own_capacity_proof(tmp_path, capsys):
    """--p 4 --g 4: the ring closes inside the server, so each GPU serves g NVLink hops (rate 1/g)."""
    from optcc.algorithms import build_schedule
    from optcc.cluster import Cluster
    from verifier import prove_allreduce
    for p, g in [(4, 4), (8, 8), (2, 2)]:
        s = build_schedule("ring", Cluster.build(p, g=g), 1)
        assert {f.rate for f in s.flows} == {Fraction(1, g)}
        assert prove_allreduce(s).proved, (p, g)
    s = build_schedule("ring", Cluster.build(8, g=4), 1)            # two servers: 1/(g−1) as before
    assert prove_allreduce(s).proved and max(f.rate for f in s.flows if f.link == "nvlink") == Fraction(1, 3)
    path = str(tmp_path / "r.json")
    assert cli.main(["schedule", "--algo", "ring", "--p", "4", "--g", "4", "-o", path]) == 0
    assert cli.main(["verify", path]) == 0


def test_demo_prints_a_refutation_as_a_sentence(monkeypatch, capsys):
    import optcc_app.compose.demo as demo            # run_demo lives in the composition layer
    from verifier.proof import Proof
    cx = {"property": "capacity", "message": "nvlink send port of rank 0 carries 4/3"}
    monkeypatch.setattr(demo, "prove_allreduce", lambda s: Proof(False, {"capacity": False}, cx, 0.0))
    assert cli.main(["demo", "--p", "4", "--no-run", "--segments", "2"]) == 1
    out = capsys.readouterr().out
    assert "NOT PROVED: capacity: nvlink send port of rank 0 carries 4/3" in out and "{'property'" not in out


def test_a_run_that_cannot_finish_exits_3(tmp_path, monkeypatch, capsys):
    pytest.importorskip("torch")
    import gpu_runner.launch as launch_mod
    from gpu_runner.launch import LaunchResult
    from optcc.algorithms import build_schedule
    from optcc.cluster import Cluster
    path = str(tmp_path / "r.json")
    build_schedule("ring", Cluster.build(3), 1).save(path)
    monkeypatch.setattr(launch_mod, "launch", lambda *a, **k: LaunchResult(None, [17, 3, 3], ["rank 0: died"]))
    assert cli.main(["run", "--nproc", "3", "--schedule", path]) == 3
    err = capsys.readouterr().err.splitlines()[-1]          # after run's progress lines: the error
    assert err.startswith("optcc: error: run: the run failed: rank 0: died") and "Traceback" not in err
