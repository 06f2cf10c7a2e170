"""Start P local worker processes (like torchrun), wait for them, never hang, clean up.

Each worker is `python -m gpu_runner ...` with the env:// variables set. Its stdout/stderr go
to files in a private temporary folder. When one worker fails, the others get `timeout_s` plus
a grace period to finish (they exit by themselves: watchdog.py); whatever is still running then
is killed by its process id (each worker runs in its own session). On Ctrl-C every worker is
killed before the KeyboardInterrupt propagates. `prefix(rank)` may wrap the command (the
testbed runs each rank inside its own network namespace).
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

from gpu_runner.watchdog import EXIT_WRONG
from optcc.errors import OptccError
from optcc.schedule import Schedule

GRACE_S = 3.0


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
                parts.append(f"rank {r}: exited with code {rc}" + (" (killed)" if rc is not None and rc < 0 else ""))
        return "; ".join(parts) if parts else "no result from rank 0"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(nproc: int, worker_args: list, timeout_s: float, master_addr: str = "127.0.0.1",
           master_port: int | None = None, prefix=None, env_extra: dict | None = None,
           wall_limit_s: float | None = None) -> LaunchResult:
    """Run `python -m gpu_runner worker_args` on `nproc` local ranks; rank 0's JSON comes back."""
    port = master_port or free_port()
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="optcc-run-") as tmp:
        result_path = os.path.join(tmp, "result.json")
        procs = []
        logs = []
        try:
            for r in range(nproc):
                env = dict(os.environ)
                env.update({"RANK": str(r), "WORLD_SIZE": str(nproc), "LOCAL_RANK": str(r),
                            "LOCAL_WORLD_SIZE": str(nproc), "MASTER_ADDR": master_addr,
                            "MASTER_PORT": str(port), "OMP_NUM_THREADS": "1"})
                env.update(env_extra(r) if callable(env_extra) else (env_extra or {}))   # per rank if callable
                cmd = [sys.executable, "-m", "gpu_runner", *worker_args, "--timeout", str(timeout_s)]
                if r == 0:
                    cmd += ["--result", result_path]
                if prefix is not None:
                    cmd = list(prefix(r)) + cmd
                out = open(os.path.join(tmp, f"rank{r}.out"), "w")
                err = open(os.path.join(tmp, f"rank{r}.err"), "w")
                logs.append((out, err))
                procs.append(subprocess.Popen(cmd, stdout=out, stderr=err, env=env,
                                              start_new_session=True))
            codes, exit_s = _wait_all(procs, timeout_s, wall_limit_s, start)
        except BaseException:
            _kill(procs)
            raise
        finally:
            for out, err in logs:
                out.close()
                err.close()
        errors = []
        order = sorted(range(nproc), key=lambda r: (codes[r] == 0, r))
        for r in order:
            with open(os.path.join(tmp, f"rank{r}.err")) as fh:
                lines = [ln.strip() for ln in fh if "error" in ln.lower() and ln.strip()]
            mine = [ln for ln in lines if ln.startswith("optcc-runner rank")]
            pick = mine[:1] or lines[-1:]
            if codes[r] != 0 and pick:
                errors.append(f"rank {r}: " + pick[0].split(": error: ", 1)[-1])
        result = None
        if os.path.exists(result_path):
            with open(result_path) as fh:
                result = json.load(fh)
        return LaunchResult(result, codes, errors, time.monotonic() - start, exit_s)


def _wait_all(procs, timeout_s, wall_limit_s, start):
    first_failure = None
    exit_s = [None] * len(procs)
    while True:
        codes = [p.poll() for p in procs]
        now = time.monotonic()
        for r, c in enumerate(codes):
            if c is not None and exit_s[r] is None:
                exit_s[r] = now - start
        if all(c is not None for c in codes):
            return codes, exit_s
        if first_failure is None and any(c not in (None, 0) for c in codes):
            first_failure = now
        late = first_failure is not None and now - first_failure > timeout_s + GRACE_S
        if late or (wall_limit_s is not None and now - start > wall_limit_s):
            _kill([p for p, c in zip(procs, codes) if c is None])
            codes = [p.wait() for p in procs]
            now = time.monotonic()
            return codes, [e if e is not None else now - start for e in exit_s]
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
                     allow_worse_numerics: bool = False) -> tuple[Schedule, str]:
    """Load and prove a schedule BEFORE any process starts; returns (schedule, proof note).
    With `dtype`, also refuse it when its numerics are worse than the ring's (gpu_runner.proof)."""
    from gpu_runner.proof import require_numerics, require_proof
    schedule = Schedule.load(path)
    if nproc is not None and nproc != schedule.cluster.p:
        raise OptccError("nproc", f"the schedule is for p = {schedule.cluster.p} ranks, got {nproc} processes")
    note = require_proof(schedule, certificate)
    if dtype is not None:
        note += "; " + require_numerics(schedule, dtype, allow_worse_numerics)
    return schedule, note


def check_runner(schedule: Schedule, runner: str) -> str:
    """Refuse `--runner streaming` for a schedule whose streaming execution is not proved safe."""
    if runner == "step":
        return "step runner"
    from gpu_runner.streaming import StreamingRefused, require_streaming
    try:
        program = require_streaming(schedule, recv_order=runner == "streaming-ordered")
    except StreamingRefused as e:
        raise OptccError("runner", str(e)) from None
    order = ", receives in port order" if program.recv_order else ""
    return f"streaming runner (proved safe, window {program.window}{order})"


def run_schedule_file(path: str, nproc: int, size: int, dtype: str, timeout_s: float,
                      certificate: str | None = None, iters: int = 1, warmup: int = 1,
                      backend: str = "auto", extra=()) -> LaunchResult:
    """What `optcc run` does: prove, then launch the workers with a certificate of that proof."""
    schedule, _ = prepare_schedule(path, nproc, certificate, dtype)
    return launch_trusted(path, schedule.sha256(), nproc, size, dtype, timeout_s, iters, warmup,
                          backend, extra, certificate=certificate)


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


def launch_trusted(path, sha256, nproc, size, dtype, timeout_s, iters=1, warmup=1, backend="auto",
                   extra=(), certificate=None, allow_worse_numerics=False, **kw) -> LaunchResult:
    """Launch workers on the schedule at `path`, which must still have `sha256`. There is no
    bypass: every worker re-checks a certificate (the caller's, or one of this process's proof,
    proving the schedule now if it was not proved yet) before it runs anything."""
    schedule = Schedule.load(path)
    if schedule.sha256() != sha256:
        raise OptccError("schedule", f"{path} changed after it was proved (sha256 differs); refusing")
    with tempfile.TemporaryDirectory(prefix="optcc-cert-") as tmp:
        cert = worker_certificate(schedule, tmp, certificate)
        args = ["--schedule", path, "--certificate", cert, "--size", str(size), "--dtype", dtype,
                "--iters", str(iters), "--warmup", str(warmup), "--backend", backend, *extra]
        if allow_worse_numerics:
            args.append("--allow-worse-numerics")
        return launch(nproc, args, timeout_s, **kw)
