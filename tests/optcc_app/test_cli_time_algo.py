"""`optcc time --algo NAME --p …` (issue 24 item 1): times a construction built in memory, with
the same JSON keys and the same numbers as `optcc schedule … -o F` then `optcc time F` (both
build for the cluster with its latency model: optcc_multi reads the latency when it builds)."""
from __future__ import annotations

import json
from fractions import Fraction

import pytest

CASES = [
    ("optcc", ["--p", "8", "--straggler", "0:2"], "4", "simai", "64M"),
    ("optcc", ["--p", "8", "--straggler", "0:8/7", "--straggler", "3:2"], "3", "nccl", "1G"),
    ("optcc", ["--p", "16", "--g", "4", "--straggler", "0:2"], "2", "alpha", "8M"),
    ("optcc", ["--p", "16", "--g", "4"] + [x for r in range(4, 8) for x in ("--straggler", f"{r}:2")], "3", "simai",
     "1G"),                                                     # one straggler server: optcc_servers
    ("optcc", ["--p", "16", "--g", "4"] + [x for r in range(8) for x in ("--straggler", f"{r}:{2 if r < 4 else '3/2'}")],
     "2", "nccl", "8G"),                                       # two straggler servers: optcc_rails
    ("optcc_multi", ["--p", "9", "--straggler", "0:2", "--straggler", "5:4/3"], "4", "alpha", "64M"),
    ("ring", ["--p", "6"], "1", "simai", "1M"),
    ("direct", ["--p", "5", "--straggler", "1:3/2"], "2", "nccl", "4M"),
]


@pytest.mark.parametrize("algo,cluster,k,model,n", CASES)
def test_time_algo_equals_time_of_the_written_schedule(run_optcc, tmp_path, algo, cluster, k, model, n):
    path = tmp_path / "s.json"
    made = run_optcc("schedule", "--algo", algo, *cluster, "--segments", k, "--latency-model", model, "-o", path)
    assert made.returncode == 0, made.stderr
    from_file = run_optcc("time", path, "--latency-model", model, "--n", n, "--json")
    direct = run_optcc("time", "--algo", algo, *cluster, "--segments", k, "--latency-model", model, "--n", n,
                       "--json")
    assert from_file.returncode == 0 and direct.returncode == 0, (from_file.stderr, direct.stderr)
    a, b = json.loads(from_file.stdout), json.loads(direct.stdout)
    assert a == b
    assert b["event_time"] > 0 and b["slot_time"] > 0 and b["capacity_ok"]


def test_time_algo_event_time_is_the_event_model_exactly(run_optcc):
    """The vectorised timer behind `optcc time` equals optcc.timing.event_time here (as a float
    of the same Fraction), and the event time exceeds the slot time by the latency it charges."""
    from optcc.algorithms import build_schedule
    from optcc.cluster import Cluster
    from optcc.latency import units
    from optcc.timing import event_time
    c = Cluster.build(8, stragglers={0: Fraction(2)}, latency_model="simai")
    o, li, lat = units(c, 64 << 20)
    exact = event_time(build_schedule("optcc", c, 4), o, None, li, lat)
    res = run_optcc("time", "--algo", "optcc", "--p", "8", "--straggler", "0:2", "--segments", "4",
                    "--latency-model", "simai", "--n", "64M", "--json")
    assert json.loads(res.stdout)["event_time"] == float(exact)


@pytest.mark.parametrize("args,flag", [
    ((), "FILE"),
    (("s.json", "--algo", "ring"), "--algo"),
    (("s.json", "--p", "4"), "--p"),
    (("s.json", "--segments", "3"), "--segments"),
    (("--algo", "rnig", "--p", "4"), "--algo"),
    (("--algo", "ring"), "--p"),
    (("--algo", "optcc", "--p", "8", "--segments", "0"), "--segments"),
    (("--algo", "optcc", "--p", "8", "--straggler", "0:1/2"), "--straggler"),
])
def test_time_bad_input_exits_2_naming_the_flag(run_optcc, tmp_path, args, flag):
    made = run_optcc("schedule", "--algo", "ring", "--p", "4", "-o", tmp_path / "s.json")
    assert made.returncode == 0
    res = run_optcc("time", *args, cwd=tmp_path)
    assert res.returncode == 2, res
    assert res.stderr.startswith(f"optcc: error: {flag}"), res.stderr
    assert res.stdout == ""


def test_time_algo_beyond_the_build_limit_times_the_arrays(run_optcc, tmp_path):
    """p²·k = 300²·50 is over the flow-list build limit (4·10⁶, `optcc schedule --form flows`
    exits 2; the default form writes the generated schedule instead) yet `optcc time --algo`
    and `optcc time` of the generated file time it from the array form, alike: the slot time is
    the construction's exact closed form (optcc_single.optcc_slot_time), every port exclusive."""
    from optcc.algorithms.single.build import optcc_slot_time
    from optcc.cluster import Cluster
    refused = run_optcc("schedule", "--algo", "optcc", "--p", "300", "--straggler", "7:3/2", "--segments", "50",
                        "--form", "flows", "-o", tmp_path / "never.json")
    assert refused.returncode == 2 and "--segments" in refused.stderr
    assert not (tmp_path / "never.json").exists()
    made = run_optcc("schedule", "--algo", "optcc", "--p", "300", "--straggler", "7:3/2", "--segments", "50",
                     "-o", tmp_path / "g.json")
    assert made.returncode == 0 and "generated schedule" in made.stderr
    res = run_optcc("time", "--algo", "optcc", "--p", "300", "--straggler", "7:3/2", "--segments", "50",
                    "--latency-model", "nccl", "--n", "1G", "--json", timeout=300)
    assert res.returncode == 0, res.stderr
    of_file = run_optcc("time", tmp_path / "g.json", "--latency-model", "nccl", "--n", "1G", "--json", timeout=300)
    assert of_file.returncode == 0, of_file.stderr
    assert json.loads(of_file.stdout) == json.loads(res.stdout)
    out = json.loads(res.stdout)
    exact = optcc_slot_time(Cluster.build(300, stragglers={7: Fraction(3, 2)}), 50)
    assert out["slot_time"] == float(exact) and out["capacity_ok"]
    assert out["event_time"] > out["lower_bound"]
