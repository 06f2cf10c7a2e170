"""An attestation is trusted only from the launcher that proved the schedule: `optcc run` hands
its key to each worker on an inherited pipe; a torchrun worker holds none, so an attestation
signed with a key the user put in OPTCC_LAUNCH_KEY (the old hand-over) is refused and nothing runs."""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import subprocess
from fractions import Fraction as F

import pytest

from gpu_runner.proof import ATTESTATION_FORMAT, LAUNCH_KEY_ENV
from optcc.cluster import Cluster
from optcc.schedule import Flow, Schedule
from verifier import prove_allreduce


def _refuted(path):
    """p = 2: rank 1 copies x0 over its own input, then sends it back: every rank ends with x0."""
    s = Schedule(Cluster.build(2), [F(1)], [Flow(0, 1, 0, "copy", F(0)), Flow(1, 0, 0, "copy", F(1))],
                 meta={"algorithm": "hand-refuted"})
    assert not prove_allreduce(s).proved
    s.save(str(path))
    return s


def _forge(schedule, path, key: bytes):
    body = {"format": ATTESTATION_FORMAT, "schedule_sha256": schedule.sha256(),
            "accepted": "proved by the verifier", "numerics": None, "programs": []}
    mac = hmac.new(key, json.dumps(body, sort_keys=True, separators=(",", ":")).encode(), hashlib.sha256).hexdigest()
    path.write_text(json.dumps({**body, "hmac_sha256": mac}))


def test_a_self_signed_attestation_under_torchrun_runs_nothing(tmp_path):
    from conftest import torchrun_path
    torchrun = torchrun_path()
    from gpu_runner.launch import free_port
    schedule = _refuted(tmp_path / "s.json")
    key = secrets.token_bytes(32)
    _forge(schedule, tmp_path / "a.json", key)
    env = dict(os.environ, OMP_NUM_THREADS="1", **{LAUNCH_KEY_ENV: key.hex()})
    ran = subprocess.run([torchrun, "--nproc-per-node", "2", "--master-addr", "127.0.0.1", "--master-port",
                          str(free_port()), "-m", "gpu_runner", "--schedule", "s.json", "--attestation", "a.json",
                          "--runner", "step", "--size", "4096", "--timeout", "30"],
                         capture_output=True, text=True, cwd=tmp_path, env=env, timeout=180)
    out = ran.stdout + ran.stderr
    assert ran.returncode != 0, out
    assert "an attestation is trusted only from the launcher that started this process" in out, out[-3000:]
    assert "is not a launcher's key and is ignored" in out
    assert "correct" not in ran.stdout and "WRONG" not in ran.stdout


def test_optcc_run_still_hands_its_workers_the_key(tmp_path, capsys):
    """The launcher's own workers (forked by the zygote, or started as fresh interpreters) read
    the key from their pipe and accept its attestation: a proved schedule runs exactly."""
    pytest.importorskip("torch")
    from optcc.algorithms import build_schedule
    from optcc_app.cli import main
    path = tmp_path / "r.json"
    build_schedule("ring", Cluster.build(3, stragglers={1: 2}), 2).save(str(path))
    for zygote in ("1", "0"):
        os.environ["OPTCC_ZYGOTE"] = zygote
        try:
            assert main(["run", "--nproc", "3", "--schedule", str(path), "--size", "64K"]) == 0
        finally:
            os.environ.pop("OPTCC_ZYGOTE", None)
        assert "correct (0 wrong elements" in capsys.readouterr().out
