"""Runner faults with real signals on a real `python -m optcc run` (gloo, p = 4): SIGTERM and
SIGKILL of the launcher leave no worker and no temporary folder; a SIGSTOPped rank ends the run
within --timeout + 5 s, named first. Linux only (/proc)."""
import os
import signal
import subprocess
import sys
import time

import pytest

pytest.importorskip("torch")
if not os.path.isdir("/proc/self"):
    pytest.skip("needs /proc (Linux)", allow_module_level=True)

from optcc.algorithms import build_schedule  # noqa: E402
from optcc.cluster import Cluster  # noqa: E402

P = 4
TIMEOUT = 15.0     # generous: the rendezvous of 4 ranks on a loaded 2-core machine takes seconds


def _stat(pid: int):
    """(state, ppid) from /proc/PID/stat, None when the process is gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return fields[0], int(fields[1])


def _alive(pid: int) -> bool:
    st = _stat(pid)
    return st is not None and st[0] not in ("Z", "X")


def _children(pid: int) -> list[int]:
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = _stat(int(name))
            if st is not None and st[1] == pid:
                out.append(int(name))
    return out


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _descendants(pid: int) -> list[int]:
    """Children, and theirs: ranks forked by the launcher's zygote (gpu_runner.zygote) are grandchildren."""
    out, todo = [], [pid]
    while todo:
        kids = _children(todo.pop())
        out += kids
        todo += kids
    return out


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as fh:
            return fh.read().strip()
    except OSError:
        return ""


def _rank_of(pid: int):
    """A rank's number: its name optcc-rankR (forked by the zygote), or RANK in the environment of
    a `python -m gpu_runner` process (started as its own interpreter)."""
    comm = _comm(pid)
    if comm.startswith("optcc-rank") and comm[len("optcc-rank"):].isdigit():
        return int(comm[len("optcc-rank"):])
    if "-m gpu_runner" not in _cmdline(pid) or "gpu_runner.zygote" in _cmdline(pid):
        return None
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            env = dict(kv.split(b"=", 1) for kv in fh.read().split(b"\0") if b"=" in kv)
    except OSError:
        return None
    return int(env[b"RANK"]) if b"RANK" in env else None


def _sockets(pid: int) -> int:
    try:
        return sum(os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:") for fd in os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def _errors(err: str) -> list[str]:
    """stderr without `optcc run`'s progress lines (what it is doing, not what went wrong)."""
    return [line for line in err.strip().splitlines() if not line.startswith("optcc run: ")]


def _leftovers(tmp) -> list[str]:
    return sorted(n for n in os.listdir(tmp) if n.startswith("optcc-"))


@pytest.fixture
def running(tmp_path):
    """A long `optcc run` on P gloo ranks, once every rank has joined the process group:
    (launcher Popen, {rank: worker pid}, the reaper's pids, its TMPDIR)."""
    path = str(tmp_path / "ring.json")
    build_schedule("ring", Cluster.build(P), 1).save(path)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = dict(os.environ, TMPDIR=str(tmp))
    proc = subprocess.Popen([sys.executable, "-m", "optcc", "run", "--nproc", str(P), "--schedule", path,
                             "--size", str(4 * 1000), "--dtype", "int32", "--iters", "10000000", "--warmup", "0",
                             "--backend", "gloo", "--timeout", str(TIMEOUT)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 180
    workers, others = {}, []
    while time.monotonic() < deadline and proc.poll() is None:
        kids = _descendants(proc.pid)
        workers = {_rank_of(k): k for k in kids if _rank_of(k) is not None}
        others = [k for k in _children(proc.pid) if k not in workers.values()]   # the reaper, the zygote
        # past the rendezvous: each rank holds sockets to the store and to its P - 1 peers
        if len(workers) == P and all(_sockets(pid) >= P for pid in workers.values()):
            break
        time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail(f"the ranks did not start: {proc.communicate()[1][-2000:]}")
    time.sleep(0.5)
    yield proc, workers, others, tmp
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    for pid in workers.values():
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def _wait_gone(pids, seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.1)
    return [p for p in pids if _alive(p)]


def _wait_clean(tmp, seconds: float) -> list[str]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and _leftovers(tmp):
        time.sleep(0.1)
    return _leftovers(tmp)


def test_sigterm_stops_every_worker_and_removes_the_temporary_folders(running):
    proc, workers, others, tmp = running
    assert sorted(workers) == list(range(P)) and _leftovers(tmp)      # the run's folders exist while it runs
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGTERM
    assert _errors(err) == ["optcc: terminated by SIGTERM"]
    assert _wait_gone(list(workers.values()) + others, 5) == []
    assert _wait_clean(tmp, 5) == []


def test_sigkill_of_the_launcher_takes_the_workers_and_folders_with_it(running):
    proc, workers, others, tmp = running
    assert others, "the reaper runs beside the workers"
    proc.kill()
    proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    assert _wait_gone(list(workers.values()), 5) == []       # parent-death signal / the reaper
    assert _wait_clean(tmp, 10) == []                         # the reaper removed them
    assert _wait_gone(others, 5) == []                        # and then exited itself


def test_a_stopped_rank_ends_the_run_within_the_timeout_and_is_named_first(running):
    proc, workers, others, tmp = running
    os.kill(workers[2], signal.SIGSTOP)
    stopped_at = time.monotonic()
    ended = None                     # when the last rank was gone: the run is over
    while proc.poll() is None and time.monotonic() - stopped_at < 4 * TIMEOUT + 30:
        if ended is None and not any(_alive(pid) for pid in workers.values()):
            ended = time.monotonic() - stopped_at
        time.sleep(0.1)
    if ended is None and not any(_alive(pid) for pid in workers.values()):
        ended = time.monotonic() - stopped_at    # the ranks and the launcher ended within one poll
    _, err = proc.communicate(timeout=30)
    exited = time.monotonic() - stopped_at
    assert proc.returncode == 3
    lines = _errors(err)
    assert len(lines) == 1, err
    assert lines[0].startswith("optcc: error: run: the run failed: rank 2: stopped"), lines[0]
    assert ended is not None and ended <= TIMEOUT + 5, ended
    # the launcher's own exit follows (interpreter teardown with torch loaded: seconds on a loaded machine)
    assert exited <= TIMEOUT + 15, exited
    assert _wait_gone(list(workers.values()) + others, 5) == []
    assert _wait_clean(tmp, 5) == []


def test_failure_lines_name_the_likeliest_cause_first(tmp_path):
    """Killed as stopped, then self-inflicted failures by exit time (a silent os._exit too), then
    killed as hung, then the peers that timed out waiting."""
    from gpu_runner.launch import _rank_errors
    err = {0: "optcc-runner rank 0: error: timed out after 5.8 s (timeout 5 s) waiting for x; a peer rank is dead or hung\n",
           1: "optcc-runner rank 1: error: RuntimeError: [gloo] Timed out waiting 5000ms for recv\n",
           2: "", 3: "", 4: "optcc-runner rank 4: error: RuntimeError: Connection closed by peer\n", 5: ""}
    for r, text in err.items():
        (tmp_path / f"rank{r}.err").write_text(text)
    codes = [124, 3, 17, -9, 3, -9]
    exit_s = [6.0, 5.5, 2.0, 6.5, 2.5, 9.0]
    killed = {3: ("stopped", "stopped (state T)"), 5: ("hung", "hung: still running")}
    lines = _rank_errors(str(tmp_path), codes, exit_s, killed)
    assert [ln.split(":", 1)[0] for ln in lines] == ["rank 3", "rank 2", "rank 4", "rank 5", "rank 1", "rank 0"]
    assert lines[1] == "rank 2: exited with code 17"
