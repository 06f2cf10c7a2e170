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
# `alone`: the tests measure shaped link rates and RTTs (and compare the machine's namespaces
# before and after), so under xdist no other test runs beside them.
pytestmark = [pytest.mark.skipif(not ROOT, reason="the testbed needs root (network namespaces, tc)"),
              pytest.mark.alone, pytest.mark.xdist_group("testbed")]


@pytest.fixture(autouse=True, scope="module")
def _no_stale_namespaces():
    """Leftovers of an earlier killed run of these tests (their tags start with o14b) go first and last."""
    from gpu_runner.testbed import remove_stale
    remove_stale("o14b")
    yield
    remove_stale("o14b")


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
    res = run_testbed(3, 0, Fraction(2), 40, 1 << 20, 2, iters=1, warmup=0, with_ring=False, plot=png,
                      runner="step")               # the CLI tests below run the default, streaming
    assert res["runner"] == "step"
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


# ---- delay emulation (TAP devices + gpu_runner/tap_forwarder.py; the kernel has no netem) ----

def _forwarders():
    out = subprocess.run(["pgrep", "-f", "gpu_runner.tap_forwarder .*o14b"], capture_output=True, text=True).stdout
    return out.split()


def test_delay_emulation_rtt_and_rates():
    """ping RTT within 10% of 2·D (best of 15); TCP throughput within 10% of the shaped rate, both ways.
    16/8 Mbit/s: 40/20 Mbit/s passes on a quiet machine but not reliably with 2 loaded cores."""
    from gpu_runner.netcheck import measure_link
    from gpu_runner.testbed import Testbed
    before_ns, before_links = _namespaces(), _links()
    delay_ms = 2.0
    with Testbed(3, tag="o14bemu", delay_ms=delay_ms) as tb:
        tb.shape([16, 16, 8])
        healthy = measure_link(tb, 0, 1, seconds=2.0, count=15)
        into_slow = measure_link(tb, 1, 2, seconds=2.0, count=5)      # paced by the forwarder
        out_of_slow = measure_link(tb, 2, 0, seconds=2.0, count=5)    # shaped by tbf on the TAP
        stats = tb.forwarder_stats()
    # the emulated round trip: never below 2·D, at best within 20% of it (the minimum: a loaded
    # machine only adds its own scheduling delays, seen in the median, on top). 20%, not 10%:
    # on this project's 2-core machine the best of 15 pings was 4.53–4.57 ms at 2·D = 4 ms with
    # one other job running, at 658f3c3 as after it (the userspace TAP forwarder's own hops)
    rtt = 2 * delay_ms / 1000
    assert rtt <= min(healthy["rtt_s"]) <= 1.2 * rtt, healthy["rtt_s"]
    assert healthy["rtt_median_s"] <= 3 * rtt, healthy["rtt_s"]
    for got, mbit in ((healthy, 16), (into_slow, 8), (out_of_slow, 8)):
        rate = got["throughput_bytes_per_s"] * 8 / 1e6
        assert abs(rate - mbit) <= 0.1 * mbit, (rate, mbit, got)
    assert stats["frames"] > 500 and stats["write_errors"] == 0
    assert _namespaces() == before_ns and _links() == before_links
    assert not _forwarders()


def test_delay_testbed_failure_stops_forwarder_and_removes_everything():
    from gpu_runner.testbed import Testbed
    before_ns, before_links = _namespaces(), _links()
    with pytest.raises(RuntimeError, match="boom"):
        with Testbed(2, tag="o14bfail", delay_ms=1.0) as tb:
            tb.shape([10, 5])
            assert tb.forwarder.poll() is None and _forwarders()
            raise RuntimeError("boom")
    assert tb.forwarder is None and not _forwarders()
    assert _namespaces() == before_ns and _links() == before_links


def test_dead_forwarder_is_a_clear_error_and_cleaned_up():
    from gpu_runner.testbed import Testbed
    from optcc.errors import OptccError
    before_ns = _namespaces()
    with pytest.raises(OptccError, match="forwarder is not running"):
        with Testbed(2, tag="o14bdead", delay_ms=1.0) as tb:
            os.killpg(tb.forwarder.pid, signal.SIGKILL)
            tb.forwarder.wait(timeout=10)
            tb.shape([10, 10])
    assert _namespaces() == before_ns and not _forwarders()


def test_remove_stale_clears_a_killed_runs_namespaces():
    import os

    from gpu_runner.testbed import remove_stale
    prefix = f"o14bstale{os.getpid()}x"       # this process's own: a concurrent run of this test has another
    names = [prefix + "h", prefix + "r0"]
    for ns in names:
        subprocess.run(["ip", "netns", "add", ns], check=True)
    assert sorted(remove_stale(prefix)) == names
    assert not any(n.startswith(prefix) for n in _namespaces())


def test_sizes_sweep_with_delay_cli_json(tmp_path):
    """`optcc testbed --delay-ms --sizes --segments auto --json`: one row per size, all correct,
    shaping visible; k per size is optcc.segments' choice for the measured delay and overhead."""
    import json

    from gpu_runner.testbed_sizes import COLUMNS
    before_ns = _namespaces()
    png = tmp_path / "sizes.png"
    res = subprocess.run([sys.executable, "-m", "optcc", "testbed", "--p", "3", "--straggler", "0:2",
                          "--rate", "40", "--delay-ms", "2", "--sizes", "64K,512K", "--segments", "auto",
                          "--iters", "1", "--warmup", "1", "--plot", str(png), "--json"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    rows = out["rows"]
    assert [r["size"] for r in rows] == [64 << 10, 512 << 10]
    assert all(set(COLUMNS) <= set(r) and r["correct"] for r in rows)
    from fractions import Fraction

    from optcc.cluster import Cluster
    from optcc.segments import resolve_segments
    assert out["measured_fixed_cost_s"] >= out["measured_overhead_s"] >= 0
    model = Cluster.build(3, stragglers={0: 2}, bandwidth=5 * 10**6,
                          latency=Fraction(str(round(out["measured_rtt_min_s"] / 2, 9))),
                          overhead=Fraction(str(round(out["measured_overhead_s"], 9))))
    assert [r["segments"] for r in rows] == [resolve_segments("auto", "optcc", model, r["size"]) for r in rows]
    assert all(r["torch_fault_free_s"] > 0 and r["optcc_step_s"] > 0 for r in rows)
    # 512 KiB through a 20 Mbit/s straggler link: the ring is clearly slower than fault-free
    assert rows[1]["torch_straggler_s"] > 1.3 * rows[1]["torch_fault_free_s"], rows
    assert all(r["optcc_streaming_s"] > 0 and r["predicted_s"] > 0 for r in rows)
    assert 0.004 <= out["measured_rtt_min_s"] <= 0.0048 and out["measured_rtt_s"] <= 0.012
    assert png.stat().st_size > 1000
    assert _namespaces() == before_ns and not _forwarders()


def test_probe_on_testbed_recovers_each_shaped_ell(tmp_path):
    """`optcc probe --testbed`: two stragglers among 5 ranks, 2 ms delay; each ℓ within 10%.
    16 Mbit/s: at 40 Mbit/s the healthy ranks read up to 30% low when the 2 cores are loaded
    (load average ~17: the forwarder, the kernel's TCP work and the ranks fall behind)."""
    import json

    from optcc.cluster import Cluster
    before_ns = _namespaces()
    out = tmp_path / "cluster.json"
    res = subprocess.run([sys.executable, "-m", "optcc", "probe", "--testbed", "--p", "5", "--straggler", "0:2",
                          "--straggler", "3:1.5", "--rate", "16", "--delay-ms", "2", "--size", "524288",
                          "--repeats", "3", "-o", str(out), "--json"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    shaped = [2, 1, 1, 1.5, 1]
    for r in got["ranks"]:
        assert abs(r["ell"] - shaped[r["rank"]]) <= 0.1 * shaped[r["rank"]], got["ranks"]
        assert r["host"] == f"otb{got['ranks'][0]['host'][3:].split('r')[0]}r{r['rank']}"   # namespace names
    cluster = Cluster.from_json(json.loads(out.read_text()))
    assert set(cluster.stragglers) == {0, 3}
    assert abs(float(cluster.bandwidth) - 16e6 / 8) <= 0.1 * 16e6 / 8
    assert _namespaces() == before_ns and not _forwarders()


def test_probe_on_testbed_dead_rank_is_a_clear_error_and_everything_goes(tmp_path):
    before_ns, before_links = _namespaces(), _links()
    out = tmp_path / "cluster.json"
    res = subprocess.run([sys.executable, "-m", "optcc", "probe", "--testbed", "--p", "3", "--rate", "16",
                          "--delay-ms", "1", "--size", "65536", "--repeats", "1", "--timeout", "5",
                          "--inject-fault", "die:1", "-o", str(out)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 2, res.stderr
    assert not out.exists()                    # nothing half-written
    assert res.stderr.startswith("optcc: error: probe: the probe failed: "), res.stderr
    assert "rank 1: exited with code 17" in res.stderr
    assert _namespaces() == before_ns and _links() == before_links and not _forwarders()
