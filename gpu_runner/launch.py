"""Start P local worker processes (like torchrun), wait for them, never hang, clean up.

Each worker is `python -m gpu_runner ...` with the env:// variables set. Its stdout/stderr go
to files in a private temporary folder. When one worker fails, the others get `timeout_s` plus
a grace period to finish (they exit by themselves: watchdog.py); whatever is still running then
is killed by its process group (each worker runs in its own session). A rank that cannot exit
by itself is killed as soon as that is known: one stopped (SIGSTOP, a debugger; state T in
/proc) once a peer has failed or after `timeout_s` stopped, and one still running GRACE_S after every other rank has exited
with a failure; it is named first. Any exception (Ctrl-C, the CLI's SIGTERM) kills every worker
before it propagates. Workers also die with the launcher however it ends: each sets the Linux
parent-death signal (watchdog.die_with_launcher), and gpu_runner/reaper.py, a small process that
outlives the launcher, kills the worker groups and removes the temporary folders that are left.
`prefix(rank)` may wrap the command (the testbed runs each rank inside its own network namespace).
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field

from gpu_runner.proof import LAUNCH_KEY_ENV, LAUNCH_KEY_FD_ENV, key_pipe, launch_key_hex
from gpu_runner.runners import DEFAULT_RUNNER
from gpu_runner.watchdog import EXIT_TIMEOUT, EXIT_WRONG, LAUNCHER_PID_ENV
from optcc.errors import OptccError
from optcc.schedule import Schedule

GRACE_S = 3.0
STOPPED_S = 0.5      # a rank seen stopped this long, once a peer failed, is killed at once


@dataclass
class LaunchResult:
    result: dict | None                  # rank 0's JSON (None if it did not finish)
    returncodes: list
    errors: list = field(default_factory=list)   # "rank R: ..." lines, first failure first
    wall_s: float = 0.0
    exit_s: list = field(default_factory=list)   # seconds from launch to each rank's exit

    @property
    def ok(self) -> bool:
        """Every rank finished and rank 0 reported; a wrong result (exit EXIT_WRONG on every rank,
        `result` saying which rows are wrong) is a finished run, not a failed one."""
        if self.result is None:
            return False
        rows = self.result.get("rows") or []
        allowed = (0,) if all(r.get("correct") for r in rows) else (0, EXIT_WRONG)
        return all(rc in allowed for rc in self.returncodes)

    def describe_failure(self) -> str:
        parts = list(self.errors)
        for r, rc in enumerate(self.returncodes):
            if rc != 0 and not any(e.startswith(f"rank {r}:") for e in parts):
                parts.append(f"rank {r}: {_exit_words(rc)}")
        return "; ".join(parts) if parts else "no result from rank 0"


def _exit_words(rc) -> str:
    if rc is not None and rc < 0:
        try:
            return f"killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"killed by signal {-rc}"
    return f"exited with code {rc}"


class _Reaper:
    """The launcher's side of gpu_runner/reaper.py: started on first use, one per process."""

    def __init__(self):
        self._proc = None
        self._pid = None
        self._lock = threading.Lock()

    def tell(self, verb: str, arg) -> None:
        line = f"{verb} {arg}\n"
        with self._lock:
            try:
                if self._proc is None or self._pid != os.getpid() or self._proc.poll() is not None:
                    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "reaper.py")
                    self._proc = subprocess.Popen([sys.executable, "-I", "-S", script], stdin=subprocess.PIPE,
                                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                                  start_new_session=True, text=True)
                    self._pid = os.getpid()
                self._proc.stdin.write(line)
                self._proc.stdin.flush()
            except OSError:
                pass          # best effort: the launcher's own cleanup still runs


_REAPER = _Reaper()
ZYGOTE_ENV = "OPTCC_ZYGOTE"          # "0": every local rank is a fresh interpreter (gpu_runner.zygote)
_ZYGOTES: dict = {}                  # (launcher pid, interpreter, PYTHONPATH, OMP_NUM_THREADS) -> Zygote


def _zygote(env: dict):
    """The zygote that forks local ranks with this environment's interpreter settings, started on
    first use (gpu_runner.zygote), or None where ranks start as fresh interpreters."""
    if os.environ.get(ZYGOTE_ENV, "1") == "0" or not sys.platform.startswith("linux"):
        return None
    key = (os.getpid(), sys.executable, env.get("PYTHONPATH"), env.get("OMP_NUM_THREADS"))
    zygote = _ZYGOTES.get(key)
    if zygote is None or not zygote.alive():
        from gpu_runner.zygote import Zygote
        base = {k: v for k, v in env.items() if k not in ("RANK", "LOCAL_RANK", "MASTER_PORT")}
        try:
            zygote = _ZYGOTES[key] = Zygote(base)
        except OSError:
            return None
        _REAPER.tell("group", zygote.proc.pid)
    return zygote


@contextmanager
def private_tempdir(prefix: str):
    """A temporary folder removed on exit, on any exception, and by the reaper if this process is killed."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        _REAPER.tell("dir", tmp)
        try:
            yield tmp
        finally:
            _REAPER.tell("undir", tmp)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_envs(nproc: int, master_addr: str, port, env_extra=None) -> list[dict]:
    """The environment of each local rank (env:// variables, then `env_extra`, per rank if callable)."""
    envs = []
    for r in range(nproc):
        env = {k: v for k, v in os.environ.items() if k not in (LAUNCH_KEY_ENV, LAUNCH_KEY_FD_ENV)}
        env.update({"RANK": str(r), "WORLD_SIZE": str(nproc), "LOCAL_RANK": str(r),
                    "LOCAL_WORLD_SIZE": str(nproc), "MASTER_ADDR": master_addr,
                    "MASTER_PORT": str(port), "OMP_NUM_THREADS": "1", LAUNCHER_PID_ENV: str(os.getpid())})
        env.update(env_extra(r) if callable(env_extra) else (env_extra or {}))
        envs.append(env)
    return envs


def check_placement(schedule: Schedule, envs: list[dict]) -> None:
    """A cluster that names hosts, checked against the local ranks' host names (OPTCC_HOSTNAME or
    this machine's) and LOCAL_RANK / LOCAL_WORLD_SIZE before any rank starts: OptccError("hosts")."""
    if not schedule.cluster.hosts:
        return
    from gpu_runner.hosts import HOSTNAME_ENV, host_name
    from optcc.hosts import place_processes

    def num(env, key):
        try:
            return int(env[key])
        except (KeyError, ValueError):
            return None
    names = [env.get(HOSTNAME_ENV) or host_name() for env in envs]
    place_processes(schedule.cluster, names, [num(e, "LOCAL_RANK") for e in envs],
                    [num(e, "LOCAL_WORLD_SIZE") for e in envs])


def launch(nproc: int, worker_args: list, timeout_s: float, master_addr: str = "127.0.0.1",
           master_port: int | None = None, prefix=None, env_extra: dict | None = None,
           wall_limit_s: float | None = None, schedule: Schedule | None = None, progress=None) -> LaunchResult:
    """Run `python -m gpu_runner worker_args` on `nproc` local ranks; rank 0's JSON comes back.
    `progress(event)`, when given, hears rank 0's events while the ranks run: {"event": "group",
    "backend", "world_size"} once the process group formed, {"event": "ready"} once the executor
    is built, {"event": "row", "row"} after each size (gpu_runner.worker).
    With `schedule` (and no `prefix`, which may change the host), a cluster that names hosts is
    checked against the ranks before any starts (check_placement)."""
    port = master_port or free_port()
    envs = rank_envs(nproc, master_addr, port, env_extra)
    if schedule is not None and prefix is None:
        check_placement(schedule, envs)
    start = time.monotonic()
    with private_tempdir("optcc-run-") as tmp:
        result_path = os.path.join(tmp, "result.json")
        events = _EventTail(os.path.join(tmp, "progress.jsonl"), progress)
        procs = []
        logs = []
        try:
            for r in range(nproc):
                env = envs[r]
                cmd = [sys.executable, "-m", "gpu_runner", *worker_args, "--timeout", str(timeout_s)]
                if r == 0:
                    cmd += ["--result", result_path] + (["--progress", events.path] if progress else [])
                if prefix is not None:
                    cmd = list(prefix(r)) + cmd
                out_path, err_path = os.path.join(tmp, f"rank{r}.out"), os.path.join(tmp, f"rank{r}.err")
                zygote = _zygote(env) if prefix is None else None
                if zygote is not None:      # forked from a process that imported torch once
                    proc = zygote.spawn(cmd[3:], env, out_path, err_path, launch_key=launch_key_hex())
                else:                       # the attestation key on an inherited pipe, not in env
                    out, err = open(out_path, "w"), open(err_path, "w")
                    logs.append((out, err))
                    fd = key_pipe(launch_key_hex())
                    try:
                        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env={**env, LAUNCH_KEY_FD_ENV: str(fd)},
                                                start_new_session=True, pass_fds=(fd,))
                    finally:
                        os.close(fd)
                procs.append(proc)
                _REAPER.tell("group", proc.pid)
            codes, exit_s, killed = _wait_all(procs, timeout_s, wall_limit_s, start, events.poll)
            events.poll()
        except BaseException:
            _kill(procs)
            raise
        finally:
            for proc in procs:
                if proc.returncode is not None:
                    _REAPER.tell("ungroup", proc.pid)
            for out, err in logs:
                out.close()
                err.close()
        errors = _rank_errors(tmp, codes, exit_s, killed)
        result = None
        if os.path.exists(result_path):
            with open(result_path) as fh:
                result = json.load(fh)
        return LaunchResult(result, codes, errors, time.monotonic() - start, exit_s)


def _rank_errors(tmp: str, codes: list, exit_s: list, killed: dict) -> list[str]:
    """One "rank R: ..." line per failed rank, the likeliest cause first: a rank the launcher
    killed as stopped, then ranks that failed by themselves other than by a timeout (earliest
    first), then ranks killed as hung, then ranks that timed out waiting for a peer."""
    lines = {}
    for r, rc in enumerate(codes):
        if rc == 0:
            continue
        with open(os.path.join(tmp, f"rank{r}.err")) as fh:
            found = [ln.strip() for ln in fh if "error" in ln.lower() and ln.strip()]
        mine = [ln for ln in found if ln.startswith(("optcc-runner rank", "optcc-probe rank"))]
        pick = mine[:1] or found[-1:]
        if r in killed:
            lines[r] = killed[r][1]
        elif pick:
            lines[r] = pick[0].split(": error: ", 1)[-1]
        else:                        # it said nothing: died abruptly (os._exit, a signal)
            lines[r] = _exit_words(rc)

    def blame(r):
        if r in killed:
            return (0 if killed[r][0] == "stopped" else 2, exit_s[r] or 0.0, r)
        timed_out = codes[r] == EXIT_TIMEOUT or "timed out" in lines[r].lower()
        return (3 if timed_out else 1, exit_s[r] or 0.0, r)
    return [f"rank {r}: {lines[r]}" for r in sorted(lines, key=blame)]


def is_stopped(pid: int) -> bool:
    """The process is stopped (SIGSTOP, SIGTSTP, a debugger): state T or t in /proc/PID/stat."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state in ("T", "t")


class _EventTail:
    """Rank 0's progress file, read as it grows: each complete JSON line goes to `progress`."""

    def __init__(self, path: str, progress):
        self.path, self.progress, self.offset = path, progress, 0

    def poll(self) -> None:
        if self.progress is None or not os.path.exists(self.path):
            return
        with open(self.path, "rb") as fh:
            fh.seek(self.offset)
            data = fh.read()
        end = data.rfind(b"\n") + 1               # a line still being written waits for the next poll
        self.offset += end
        for line in data[:end].splitlines():
            self.progress(json.loads(line))


def _wait_all(procs, timeout_s, wall_limit_s, start, poll=lambda: None):
    """(return codes, seconds to each exit, {rank: (why, message)} of the ranks killed here);
    `poll()` runs on every round (the progress tail)."""
    first_failure = None
    all_others_done = {}                 # rank -> when every other rank had exited, one failing
    stopped_since = {}                   # rank -> when it was first seen stopped
    exit_s = [None] * len(procs)
    killed: dict[int, tuple[str, str]] = {}
    while True:
        poll()
        codes = [p.poll() for p in procs]
        now = time.monotonic()
        for r, c in enumerate(codes):
            if c is not None and exit_s[r] is None:
                exit_s[r] = now - start
        if all(c is not None for c in codes):
            return codes, exit_s, killed
        failed = any(c not in (None, 0, EXIT_WRONG) for c in codes)
        if first_failure is None and any(c not in (None, 0) for c in codes):
            first_failure = now
        running = [r for r, c in enumerate(codes) if c is None]
        doomed = {}
        for r in running:             # stopped for STOPPED_S on end (a tracer's stops are brief)
            if not is_stopped(procs[r].pid):
                stopped_since.pop(r, None)
            elif (now - stopped_since.setdefault(r, now) >= (STOPPED_S if failed else timeout_s)):
                doomed[r] = ("stopped", f"stopped (state T: SIGSTOP or a debugger) while its peers waited "
                                        f"for it; killed after {now - start:.1f} s")
        if failed:
            if len(running) == 1:
                since = all_others_done.setdefault(running[0], now)
                if now - since > GRACE_S and running[0] not in doomed:
                    doomed[running[0]] = ("hung", f"hung: still running {GRACE_S:g} s after every other rank "
                                                  f"had exited; killed after {now - start:.1f} s")
        late = first_failure is not None and now - first_failure > timeout_s + GRACE_S
        if late or (wall_limit_s is not None and now - start > wall_limit_s):
            why = (f"still running {now - first_failure:.1f} s after the first failure" if late
                   else f"still running at the wall limit of {wall_limit_s:g} s")
            for r in running:
                doomed.setdefault(r, ("hung", f"hung: {why}; killed"))
        if doomed:
            _kill([procs[r] for r in doomed])
            killed.update(doomed)
            continue
        time.sleep(0.05)


def _kill(procs) -> None:
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)   # the worker's own session (start_new_session)
            except (ProcessLookupError, PermissionError):
                p.kill()
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


def prepare_schedule(path: str, nproc: int | None, certificate: str | None = None, dtype: str | None = None,
                     allow_worse_numerics: bool = False, per_rank: bool | None = None) -> tuple[Schedule, str]:
    """Load and prove a schedule BEFORE any process starts; returns (schedule, proof note).
    With `dtype`, also refuse it when its numerics are worse than the ring's (gpu_runner.proof).
    A generated schedule (flows_of) comes back as its flow list, proved as an instance, or, with
    `per_rank` (default: where the instance is over the build limit), as the GeneratedSchedule,
    accepted by its generator's proof, its streaming programs checked by each worker."""
    from gpu_runner.admission import admission_of
    schedule = flows_of(path, per_rank)
    if nproc is not None and nproc != schedule.cluster.p:
        raise OptccError("nproc", f"the schedule is for p = {schedule.cluster.p} ranks, got {nproc} processes")
    return schedule, admission_of(schedule).before_launch(schedule, certificate, dtype, allow_worse_numerics)


def flows_of(path: str, per_rank: bool | None = False):
    """The flow list at `path`, or a generated schedule's (optcc.generated), built here once:
    the launcher proves the instance; its workers build only their own part. With `per_rank`
    (None: where the instance is over the build limit) a generated schedule is returned as it is."""
    from optcc.generated import load_any
    got = load_any(path, "schedule")
    if got.form == "flows":
        return got
    from optcc.algorithms import check_work
    try:
        check_work(got.cluster, got.segments)
        buildable = True
    except OptccError as e:
        buildable, why = False, e.message
    if per_rank or (per_rank is None and not buildable):
        return got
    if not buildable:
        raise OptccError("schedule", f"{path}: its instance is over the build limit ({why}); it runs with "
                                     f"the per-rank check (optcc run does that by default)")
    full = got.materialize()
    full.generated = got            # the form the workers load (attested_worker_args)
    return full


def check_runner(schedule, runner: str) -> str:
    """What `runner` needs of `schedule`, checked now (gpu_runner.admission): refuses
    `--runner streaming` for a flow list whose streaming execution is not proved safe, and any
    runner but the streaming ones for a generated schedule."""
    from gpu_runner.admission import admission_of
    return admission_of(schedule).runner_note(schedule, runner)


def run_schedule_file(path: str, nproc: int, size: int, dtype: str, timeout_s: float,
                      certificate: str | None = None, iters: int = 1, warmup: int = 1,
                      backend: str = "auto", extra=()) -> LaunchResult:
    """What `optcc run` does: prove, then launch the workers with a certificate of that proof."""
    schedule, _ = prepare_schedule(path, nproc, certificate, dtype)
    return launch_trusted(path, schedule.sha256(), nproc, size, dtype, timeout_s, iters, warmup,
                          backend, extra, certificate=certificate, schedule=schedule)


def worker_certificate(schedule: Schedule, directory: str, certificate: str | None = None) -> str:
    """The certificate the workers re-check: the user's, else one written into `directory` from the
    proof made in this process (gpu_runner.proof.proof_of) or, failing that, a fresh proof."""
    if certificate:
        return certificate
    from gpu_runner.proof import proof_of, require_proof
    from verifier import write_certificate
    proof = proof_of(schedule)
    if proof is None:
        require_proof(schedule)
        proof = proof_of(schedule)
    path = os.path.join(directory, "certificate.json")
    write_certificate(proof, schedule, path)
    return path


def attested_worker_args(schedule: Schedule, path: str, directory: str, runner: str = DEFAULT_RUNNER,
                         dtype: str | None = None, allow_worse_numerics: bool = False,
                         certificate: str | None = None) -> list:
    """["--schedule", path, "--attestation", FILE]: what this process accepted of the schedule at
    `path` (proving it, or re-checking `certificate`, now if it has not yet; the runner's programs
    too), signed for the workers it starts (gpu_runner.proof.write_attestation). Each worker
    checks the signature and the sha256 of the file it loads, and compares its own program's
    digest: no worker proves or re-checks anything global."""
    from gpu_runner.admission import admission_of
    attestation = os.path.join(directory, "attestation.json")
    admission_of(schedule).attest(schedule, attestation, runner, dtype, allow_worse_numerics, certificate)
    return ["--schedule", path, "--attestation", attestation]


def launch_trusted(path, sha256, nproc, size, dtype, timeout_s, iters=1, warmup=1, backend="auto",
                   extra=(), certificate=None, allow_worse_numerics=False, runner: str = DEFAULT_RUNNER,
                   **kw) -> LaunchResult:
    """Launch workers on the schedule at `path`, which must have `sha256` when this process
    proves it (or re-checks `certificate`) and when each worker loads it. No worker runs what this
    process did not accept: each checks its signed attestation (attested_worker_args). A caller that
    holds the proved Schedule passes it as `schedule=` (the file is not read again here: the
    workers compare what they load with the attested sha256)."""
    schedule = kw.get("schedule") or flows_of(path)
    if schedule.sha256() != sha256:
        raise OptccError("schedule", f"{path} changed after it was proved (sha256 differs); refusing")
    with private_tempdir("optcc-cert-") as tmp:
        args = attested_worker_args(schedule, path, tmp, runner, dtype, allow_worse_numerics, certificate)
        args += ["--runner", runner, "--size", str(size), "--dtype", dtype, "--iters", str(iters), "--warmup", str(warmup),
                 "--backend", backend, *extra]
        if allow_worse_numerics:
            args.append("--allow-worse-numerics")
        kw.setdefault("schedule", schedule)
        return launch(nproc, args, timeout_s, **kw)
