"""`optcc probe`: the estimator on synthetic timings, local runs, bad input and dead/hung ranks."""
import json
import os
import subprocess
import sys

import pytest

from gpu_runner.probe import decide, estimate, flow_rates
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


def test_identical_ranks_with_noisy_repetitions_give_no_straggler():
    """Identical ranks (true rate B) whose repetitions read up to 60% low, differently per rank:
    the best repetition of rank 2 is B/2 (ℓ = 2 by the best-of estimate), but the spread is 60%,
    so ℓ·(1 − s) = 0.8 < 1.1 and the cluster file gets no straggler."""
    B, p = 1e6, 3
    slow = [[1.0, 1.0, 2.5], [1.0, 1.0, 1.2], [2.0, 2.5, 2.5]]       # slow[r][rep]: rank r read B/x
    rates = [[[0.0 if s == d else B / max(slow[s][k], slow[d][k]) for d in range(p)] for s in range(p)]
             for k in range(3)]
    res = estimate(rates, 1000, ["a", "b", "c"])
    assert [r["ell"] for r in res["ranks"]] == pytest.approx([1.0, 1.0, 2.0])   # the old estimate
    assert res["spread"] == pytest.approx(0.6)
    assert res["ranks"][2]["ell_low"] == pytest.approx(0.8) and not res["ranks"][2]["straggler"]
    assert res["cluster"]["stragglers"] == []
    assert res["decision"] == ("no straggler: no rank's ℓ·(1 − spread) reaches 1.1 at spread 60.0%; a rank as slow "
                               "as ℓ = 2.75 would have been named, below that this run cannot tell")
    assert res["smallest_named_ell"] == pytest.approx(1.1 / 0.4)


# `optcc probe --nproc N --json` on this machine (2 shared cores, load average ~15), identical
# ranks: (ℓ, send spread, recv spread) per rank. The best-of estimate alone named stragglers in
# three of these four runs (ℓ = 2.23 and 1.165, 1.128, 2.034).
MEASURED_IDENTICAL = [
    [(2.230, 0.413, 0.790), (1.000, 0.751, 0.433), (1.000, 0.405, 0.712), (1.165, 0.245, 0.430)],
    [(1.128, 0.472, 0.321), (1.000, 0.550, 0.864), (1.000, 0.788, 0.550)],
    [(1.000, 0.845, 0.571), (2.034, 0.537, 0.566), (1.000, 0.758, 0.867)],
    [(1.021, 0.555, 0.499), (1.021, 0.583, 0.621), (1.000, 0.602, 0.912)],
]
# `sudo optcc probe --testbed --p 8 --straggler 0:2 --rate 40 ...` (docs/gpu_runner.md): rank 0
# shaped to half rate, the others healthy
MEASURED_SHAPED = [(1.975, 0.005, 0.012), (1.013, 0.063, 0.010), (1.018, 0.035, 0.032), (1.001, 0.025, 0.023),
                   (1.001, 0.026, 0.037), (1.014, 0.017, 0.021), (1.000, 0.012, 0.062), (1.026, 0.040, 0.028)]


def _ranks(rows):
    return [{"rank": r, "ell": e, "send_spread": a, "recv_spread": b} for r, (e, a, b) in enumerate(rows)]


@pytest.mark.parametrize("rows", MEASURED_IDENTICAL)
def test_decide_names_no_straggler_on_measured_identical_ranks(rows):
    ranks = _ranks(rows)
    out = decide(ranks, 3, 1.1)
    assert not any(r["straggler"] for r in ranks), ranks
    assert out["spread"] == max(max(a, b) for _, a, b in rows)
    assert out["decision"].startswith("no straggler")


def test_decide_finds_the_measured_shaped_straggler():
    ranks = _ranks(MEASURED_SHAPED)
    out = decide(ranks, 3, 1.1)
    assert [r["rank"] for r in ranks if r["straggler"]] == [0]
    assert out["spread"] == pytest.approx(0.063)
    assert ranks[0]["ell_low"] == pytest.approx(1.975 * (1 - 0.063))
    assert out["decision"] == "stragglers 0: ℓ·(1 − spread) ≥ 1.1 at spread 6.3%"


def test_shaped_2x_rank_is_found_through_the_estimator():
    """Rank 0 at half rate both ways, repetitions within 5%: named, ℓ = 2 in the cluster file."""
    B = 4e6
    res = estimate(_rates([B / 2, B, B, B], [B / 2, B, B, B], reps=3, jitter=(0.0, 0.05, 0.02)), 1 << 20,
                   ["a", "b", "c", "d"])
    assert res["spread"] == pytest.approx(1 - 1 / 1.05)
    assert [r["straggler"] for r in res["ranks"]] == [True, False, False, False]
    assert Cluster.from_json(res["cluster"]).stragglers == {0: 2}


def test_one_repetition_names_no_straggler():
    B = 4e6
    res = estimate(_rates([B / 2, B, B], [B / 2, B, B], reps=1), 1 << 20, ["a", "b", "c"])
    assert res["ranks"][0]["ell"] == pytest.approx(2.0) and res["cluster"]["stragglers"] == []
    assert "one repetition" in res["decision"]


def _optcc(*args, timeout=120, cwd=None, env=None):
    return subprocess.run([sys.executable, "-m", "optcc", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env=env)


@pytest.mark.alone          # measures the ranks' rates: another test's load beside it reads as a straggler
def test_local_probe_json_and_cluster_file_feed_schedule(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "c.json"
    env = dict(os.environ, OPTCC_HOSTNAME="node-a")         # names the host, as the testbed does
    res = _optcc("probe", "--nproc", "3", "--size", "1048576", "--repeats", "3", "-o", str(out), "--json", env=env)
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    from gpu_runner.probe import report
    assert res.stdout == report(got, True) + "\n" and got["cluster_file"] == str(out)   # as torchrun --json
    assert [r["rank"] for r in got["ranks"]] == [0, 1, 2] and got["one_host"] and got["g"] == 1
    for r in got["ranks"]:
        assert {"rank", "host", "send_bytes_per_s", "recv_bytes_per_s", "ell"} <= set(r)
        assert r["send_bytes_per_s"] > 0 and r["recv_bytes_per_s"] > 0 and r["ell"] >= 1
        assert r["host"] == "node-a"
    assert json.loads(out.read_text()) == got["cluster"]
    # identical ranks on one machine: no straggler invented, whatever the noise
    assert got["cluster"]["stragglers"] == [] and got["decision"].startswith("no straggler"), got
    assert not any(r["straggler"] for r in got["ranks"]) and 0 <= got["spread"] < 1
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
    (["--nproc", "4", "--ranks-per-node", "2"], "--testbed"),
    (["--testbed", "--p", "8", "--rate", "16", "--ranks-per-node", "3"], "--ranks-per-node"),
    (["--testbed", "--p", "8", "--rate", "16", "--ranks-per-node", "2", "--straggler", "4:2"], "--straggler"),
])
def test_bad_input(args, field, tmp_path):
    res = _optcc("probe", *args, cwd=tmp_path)
    assert res.returncode == 2 and res.stderr.startswith(f"optcc: error: {field}:"), res.stderr
    assert not list(tmp_path.iterdir())


def test_probe_under_torchrun_prints_the_report_optcc_probe_prints(tmp_path):
    """Without --json the table of `report` (the one `optcc probe` prints), also when rank 0
    writes --result; the cluster file carries the measured per-message cost."""
    pytest.importorskip("torch")
    import shutil
    from gpu_runner.probe import report
    torchrun = shutil.which("torchrun") or os.path.join(os.path.dirname(sys.executable), "torchrun")
    if not os.path.exists(torchrun):
        pytest.skip("torchrun is not installed")
    out, result = tmp_path / "c.json", tmp_path / "r.json"
    res = subprocess.run([torchrun, "--standalone", "--nproc-per-node", "3", "-m", "gpu_runner.probe",
                          "--size", "65536", "--repeats", "2", "--out", str(out), "--result", str(result)],
                         capture_output=True, text=True, timeout=180)
    assert res.returncode == 0, res.stderr[-2000:]
    got = json.loads(result.read_text())
    assert res.stdout == report(got, False) + "\n"
    assert got["cluster_file"] == str(out) and json.loads(out.read_text()) == got["cluster"]
    lines = res.stdout.strip().splitlines()
    assert lines[0].startswith("# 3 ranks on one host (")                    # said, not hidden
    assert lines[1].split()[:3] == ["node", "host", "ranks"] and [x.split()[0] for x in lines[2:5]] == ["0", "1", "2"]
    assert lines[-1] == f"wrote {out}"
    cluster = Cluster.from_json(got["cluster"])
    assert cluster.p == 3 and cluster.g == 1 and cluster.overhead > 0      # the measured per-message cost, written
    shown = float(res.stdout.split("o = ")[1].split(" us")[0])
    assert shown == pytest.approx(float(cluster.overhead) * 1e6, abs=0.06)


def test_fixed_cost_is_the_common_intercept():
    """Flows timed at S/4 and S with T(x) = c + x/rate: fixed_cost gives c back (the testbed's
    per-message overhead is computed from it)."""
    from gpu_runner.probe import fixed_cost
    size, c = 1 << 20, 0.0065
    rate = [[0, 5e6, 4e6], [5e6, 0, 5e6], [2.5e6, 2.5e6, 0]]
    t_small = [[[c + size / 4 / rate[s][d] if s != d else 0 for d in range(3)] for s in range(3)]]
    t_full = [[[c + size / rate[s][d] if s != d else 0 for d in range(3)] for s in range(3)]]
    assert abs(fixed_cost(t_small, t_full, size) - c) < 1e-12


def test_the_measured_fixed_cost_is_written_as_the_overhead():
    """The cluster file carries the per-message cost the probe measured (it once wrote 0, and
    `optcc schedule --cluster` then chose k = 1024 for a 4 MB bucket)."""
    B = 4e6
    res = estimate(_rates([B / 2, B, B], [B / 2, B, B], reps=3, jitter=(0.0, 0.05, 0.02)), 1 << 20, ["a", "b", "c"],
                   fixed_cost_s=0.0065)
    from fractions import Fraction
    assert Cluster.from_json(res["cluster"]).overhead == Fraction(13, 2000) and res["fixed_cost_s"] == 0.0065
