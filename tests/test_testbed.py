"""Shaped-network testbed: p = 3 smoke run, and cleanup (also on failure and Ctrl-C). Root only."""
import os
import signal
import subprocess
import sys
import time
from fractions import Fraction

import pytest

pytest.importorskip("torch")
pytest.importorskip("matplotlib")

ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
pytestmark = pytest.mark.skipif(not ROOT, reason="the testbed needs root (network namespaces, tc)")


def _namespaces():
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def _links():
    out = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    return {line.split(":")[1].strip().split("@")[0] for line in out.splitlines()}


@pytest.mark.slow
def test_smoke_p3_measures_and_cleans_up(tmp_path):
    from gpu_runner.testbed import run_testbed
    before_ns, before_links = _namespaces(), _links()
    png = str(tmp_path / "tb.png")
    res = run_testbed(3, 0, Fraction(2), 40, 1 << 20, 2, iters=1, warmup=0, with_ring=False, plot=png)
    names = [r["name"] for r in res["rows"]]
    assert names == ["torch fault-free", "torch straggler", "optcc straggler"]
    assert all(r["correct"] and r["seconds"] > 0 for r in res["rows"])
    # the shaping is real: torch's ring slows down clearly when one link runs at half rate
    assert res["rows"][1]["seconds"] / res["rows"][0]["seconds"] > 1.3, res["rows"]
    assert res["lower_bound_seconds"] > res["t0_seconds"] > 0
    assert os.path.getsize(png) > 1000
    assert _namespaces() == before_ns and _links() == before_links


def test_failure_inside_removes_everything():
    from gpu_runner.testbed import Testbed
    before_ns, before_links = _namespaces(), _links()
    with pytest.raises(RuntimeError, match="boom"):
        with Testbed(3, tag="otbfail") as tb:
            tb.shape([40, 40, 20])
            assert {"otbfailh", "otbfailr0", "otbfailr2"} <= _namespaces()
            server = subprocess.Popen(tb.prefix(2) + [sys.executable, "-c", (
                "import socket; s = socket.socket(); s.bind(('0.0.0.0', 29999)); s.listen(1); "
                "c, _ = s.accept(); c.sendall(b'hello')")])
            client = (f"import socket, time\nfor _ in range(100):\n    try:\n"
                      f"        c = socket.create_connection(('{tb.address(2)}', 29999), timeout=2); break\n"
                      f"    except OSError: time.sleep(0.1)\nprint(c.recv(5).decode())")
            got = subprocess.run(tb.prefix(1) + [sys.executable, "-c", client], capture_output=True,
                                 text=True, timeout=30)
            server.wait(timeout=10)
            assert got.stdout.strip() == "hello", got.stderr   # rank 1 reaches rank 2 over the bridge
            raise RuntimeError("boom")
    assert _namespaces() == before_ns and _links() == before_links


def test_ctrl_c_removes_everything(tmp_path):
    before_ns = _namespaces()
    proc = subprocess.Popen([sys.executable, "-m", "optcc", "testbed", "--p", "3", "--straggler", "0:2",
                             "--rate", "40", "--size", str(1 << 20), "--plot", str(tmp_path / "x.png")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any(n.startswith(f"otb{proc.pid % 100000}") for n in _namespaces()):
        time.sleep(0.2)
    assert any(n.startswith(f"otb{proc.pid % 100000}") for n in _namespaces()), "testbed never started"
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert _namespaces() == before_ns
    # no worker outlives the testbed (the launcher kills its own workers on Ctrl-C)
    assert not subprocess.run(["pgrep", "-f", "gpu_runner .*--size 1048576 --dtype float32 --iters 2"],
                              capture_output=True).stdout


def test_refuses_without_root(monkeypatch):
    from gpu_runner import testbed
    from optcc.errors import OptccError
    monkeypatch.setattr(testbed.os, "geteuid", lambda: 1000)
    with pytest.raises(OptccError, match="root"):
        testbed.require_root()
