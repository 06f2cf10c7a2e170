"""Run a test file as the ranks of one local process group: each rank is `python SCRIPT ARGS`
with RANK, LOCAL_RANK, WORLD_SIZE and MASTER_ADDR/PORT set (the DDP hook tests' launcher)."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

TESTS = os.path.dirname(os.path.abspath(__file__))


def launch_script_ranks(script: str, args: list[str], world: int, timeout: float = 120
                        ) -> tuple[list[int], list[str], float]:
    """(each rank's exit status, each rank's output, seconds); every rank is killed and the test
    fails, naming what they printed, when they have not all ended within `timeout` seconds."""
    from gpu_runner.launch import free_port
    port = free_port()
    procs = []
    for r in range(world):
        env = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), OMP_NUM_THREADS="1")
        # the shared helpers, and the checkout: its packages, not tests/' folders of the same names
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.path.dirname(TESTS), TESTS, env.get("PYTHONPATH", "")]))
        procs.append(subprocess.Popen([sys.executable, script, *args], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    logs = []
    t0 = time.monotonic()
    for p in procs:
        try:
            logs.append(p.communicate(timeout=max(1, timeout - (time.monotonic() - t0)))[0])
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail(f"the ranks did not finish in {timeout} s (a hang):\n" + "\n".join(logs))
    return [p.returncode for p in procs], logs, time.monotonic() - t0


def run_script_ranks(script: str, args: list[str], world: int, timeout: float = 120) -> None:
    """launch_script_ranks, and every rank must exit 0."""
    codes, logs, _ = launch_script_ranks(script, args, world, timeout)
    assert all(c == 0 for c in codes), "\n".join(logs)
