"""`optcc probe`: the estimator on synthetic timings, local runs, bad input and dead/hung ranks."""
import json
import os
import subprocess
import sys

import pytest

from gpu_runner.probe import estimate, flow_rates
from optcc.cluster import Cluster


def _rates(send, recv, reps=3, jitter=()):
    """rates[rep][src][dst] = min(send_src, recv_dst) (scaled by 1/(1 + jitter[rep]))."""
    p = len(send)
    out = []
    for k in range(reps):
        f = 1 + (jitter[k] if k < len(jitter) else 0.0)
        out.append([[0.0 if s == d else min(send[s], recv[d]) / f for d in range(p)] for s in range(p)])
    return out


def test_flow_rates_cancel_the_fixed_cost_and_resist_one_noisy_flow():
    size, c = 1 << 20, 0.025
    rate = [[0, 5e6, 5e6], [2.5e6, 0, 2.5e6], [5e6, 5e6, 0]]           # rank 1 sends at half rate
    t = lambda x, s, d: c + x / rate[s][d]   # noqa: E731
    t_small = [[[t(size // 4, s, d) if s != d else 0.0 for d in range(3)] for s in range(3)]] * 2
    t_full = [[[t(size, s, d) if s != d else 0.0 for d in range(3)] for s in range(3)] for _ in range(2)]
    got = flow_rates(t_small, t_full, size)
    assert got[0] == [[0.0, pytest.approx(5e6), pytest.approx(5e6)], [pytest.approx(2.5e6), 0.0,
                      pytest.approx(2.5e6)], [pytest.approx(5e6), pytest.approx(5e6), 0.0]]
    t_small[1] = [row[:] for row in t_small[1]]
    t_small[1][0][1] += 0.1                  # one flow's small transfer was descheduled for 100 ms
    got = flow_rates(t_small, t_full, size)
    assert got[1][0][1] == pytest.approx(5e6) and got[0][1][2] == pytest.approx(2.5e6)


def test_estimate_names_the_slow_rank_not_its_partners():
    B = 5e6
    send = [B / 2, B, B, B, B]            # rank 0: slow both ways; rank 3 only receives slowly
    recv = [B / 2, B, B, B / 4 * 3, B]
    res = estimate(_rates(send, recv), 1 << 20, [f"h{r}" for r in range(5)])
    got = {r["rank"]: r for r in res["ranks"]}
    assert [r["send_bytes_per_s"] for r in res["ranks"]] == pytest.approx(send)
    assert [r["recv_bytes_per_s"] for r in res["ranks"]] == pytest.approx(recv)
    assert got[0]["ell"] == pytest.approx(2.0) and got[3]["ell"] == pytest.approx(4 / 3)
    assert all(got[r]["ell"] == pytest.approx(1.0) for r in (1, 2, 4))   # partners of 0 not blamed
    assert res["healthy_bytes_per_s"] == pytest.approx(B)
    cluster = Cluster.from_json(res["cluster"])
    assert cluster.stragglers == {0: 2, 3: pytest.approx(1.33)} and cluster.bandwidth == B
    assert got[2]["host"] == "h2"


def test_estimate_best_repetition_spread_given_bandwidth_and_threshold():
    B = 1e6
    send = recv = [B, B, B / 1.05]
    res = estimate(_rates(send, recv, reps=3, jitter=(0.0, 0.1, -0.1)), 1000, ["a", "b", "c"],
                   bandwidth=2 * B, min_ell=1.1)
    # the best repetition counts (rates B/0.9, B, B/1.1 -> B/0.9); spread = (max − min) / max
    assert res["ranks"][0]["send_bytes_per_s"] == pytest.approx(B / 0.9)
    assert res["ranks"][0]["send_spread"] == pytest.approx((1 / 0.9 - 1 / 1.1) * 0.9)
    assert [r["ell"] for r in res["ranks"]] == pytest.approx([1.8, 1.8, 1.89])
    assert Cluster.from_json(res["cluster"]).bandwidth == 2 * B
    res = estimate(_rates(send, recv), 1000, ["a", "b", "c"])
    assert res["cluster"]["stragglers"] == []        # ℓ = 1.05 < 1.1: noise, not a straggler


def _optcc(*args, timeout=120, cwd=None, env=None):
    return subprocess.run([sys.executable, "-m", "optcc", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env=env)


def test_local_probe_json_and_cluster_file_feed_schedule(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "c.json"
    env = dict(os.environ, OPTCC_HOSTNAME="node-a")         # names the host, as the testbed does
    res = _optcc("probe", "--nproc", "3", "--size", "65536", "--repeats", "2", "-o", str(out), "--json", env=env)
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    assert [r["rank"] for r in got["ranks"]] == [0, 1, 2]
    for r in got["ranks"]:
        assert {"rank", "host", "send_bytes_per_s", "recv_bytes_per_s", "ell"} <= set(r)
        assert r["send_bytes_per_s"] > 0 and r["recv_bytes_per_s"] > 0 and r["ell"] >= 1
        assert r["host"] == "node-a"
    assert json.loads(out.read_text()) == got["cluster"]
    sched = _optcc("schedule", "--algo", "optcc", "--cluster", str(out), "--segments", "2",   # no --p needed
                   "-o", str(tmp_path / "s.json"))
    assert sched.returncode == 0, sched.stderr


@pytest.mark.parametrize("fault", ["die:1", "hang:2"])
def test_dead_or_hung_rank_ends_every_rank_with_a_clear_error(tmp_path, fault):
    pytest.importorskip("torch")
    out = tmp_path / "c.json"
    res = _optcc("probe", "--nproc", "3", "--size", "65536", "--repeats", "1", "--timeout", "5",
                 "--inject-fault", fault, "-o", str(out), timeout=90)
    assert res.returncode == 2, res.stderr
    assert res.stderr.startswith("optcc: error: probe: the probe failed: "), res.stderr
    assert "rank" in res.stderr and not out.exists()
    assert not subprocess.run(["pgrep", "-f", f"gpu_runner probe .*--inject-fault {fault}"],
                              capture_output=True).stdout


@pytest.mark.parametrize("args, field", [
    (["--nproc", "1"], "--nproc"),
    (["--nproc", "3", "--size", "0"], "--size"),
    (["--nproc", "3", "--straggler", "0:2"], "--testbed"),
    (["--testbed", "--p", "3"], "--rate"),
    (["--nproc", "3", "--min-ell", "0.5"], "--min-ell"),
])
def test_bad_input(args, field, tmp_path):
    res = _optcc("probe", *args, cwd=tmp_path)
    assert res.returncode == 2 and res.stderr.startswith(f"optcc: error: {field}:"), res.stderr
    assert not list(tmp_path.iterdir())


def test_probe_under_torchrun(tmp_path):
    pytest.importorskip("torch")
    import shutil
    torchrun = shutil.which("torchrun") or os.path.join(os.path.dirname(sys.executable), "torchrun")
    if not os.path.exists(torchrun):
        pytest.skip("torchrun is not installed")
    out = tmp_path / "c.json"
    res = subprocess.run([torchrun, "--standalone", "--nproc-per-node", "3", "-m", "gpu_runner.probe",
                          "--size", "65536", "--repeats", "1", "--out", str(out), "--json"],
                         capture_output=True, text=True, timeout=180)
    assert res.returncode == 0, res.stderr[-2000:]
    got = json.loads(res.stdout.strip().splitlines()[-1])
    assert [r["rank"] for r in got["ranks"]] == [0, 1, 2]
    assert Cluster.from_json(json.loads(out.read_text())).p == 3


def test_fixed_cost_is_the_common_intercept():
    """Flows timed at S/4 and S with T(x) = c + x/rate: fixed_cost gives c back (the testbed's
    per-message overhead is computed from it)."""
    from gpu_runner.probe import fixed_cost
    size, c = 1 << 20, 0.0065
    rate = [[0, 5e6, 4e6], [5e6, 0, 5e6], [2.5e6, 2.5e6, 0]]
    t_small = [[[c + size / 4 / rate[s][d] if s != d else 0 for d in range(3)] for s in range(3)]]
    t_full = [[[c + size / rate[s][d] if s != d else 0 for d in range(3)] for s in range(3)]]
    assert abs(fixed_cost(t_small, t_full, size) - c) < 1e-12
