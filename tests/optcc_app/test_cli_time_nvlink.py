"""`optcc time … --nvlink max-min`: the event time with the rails' NVLink streams shared max-min
(optcc.event_maxmin), from a FILE or --algo alike; the default (stated rates) prints as before."""
from __future__ import annotations

import json
from fractions import Fraction

from optcc.algorithms.registry import choose
from optcc.cluster import Cluster
from optcc.latency import units
from optcc.timing import event_time

RAILS = ["--p", "24", "--g", "8", "--straggler", "0:2", "--bandwidth", "100e9", "--nvlink-bandwidth", "450e9",
         "--latency-model", "simai"]


def _api(nvlink):
    c = Cluster.build(24, 8, {0: Fraction(2)}, bandwidth=100e9, nvlink_bandwidth=450e9, latency_model="simai")
    return float(event_time(choose(c).build(c, 1), *_units(c), nvlink=nvlink))


def _units(c):
    o, li, lat = units(c, 8 * 2**30)
    return o, None, li, lat


def test_time_nvlink_max_min_from_algo_and_from_file(run_optcc, tmp_path):
    """The rails at p = 24, g = 8, 100 GB/s, k = 1: 0.5836 n/B stated, 0.5355 shared max-min, the
    Python API's numbers; a written flow list gives the same JSON."""
    shared = run_optcc("time", "--algo", "optcc", *RAILS, "--segments", "1", "--n", "8G", "--nvlink", "max-min", "--json")
    stated = run_optcc("time", "--algo", "optcc", *RAILS, "--segments", "1", "--n", "8G", "--json")
    assert shared.returncode == 0 and stated.returncode == 0, (shared.stderr, stated.stderr)
    a, b = json.loads(shared.stdout), json.loads(stated.stdout)
    assert a["nvlink"] == "max-min" and "nvlink" not in b
    assert a["event_time"] == _api("max-min") and b["event_time"] == _api("stated")
    assert round(a["event_time"], 4) == 0.5355 and round(b["event_time"], 4) == 0.5836
    path = tmp_path / "rails.json"
    assert run_optcc("schedule", "--algo", "optcc", *RAILS, "--segments", "1", "-o", path).returncode == 0
    from_file = run_optcc("time", path, "--n", "8G", "--nvlink", "max-min", "--json")
    assert from_file.returncode == 0, from_file.stderr
    assert json.loads(from_file.stdout) == a


def test_time_nvlink_table_says_the_model(run_optcc):
    out = run_optcc("time", "--algo", "optcc", *RAILS, "--segments", "1", "--n", "8G", "--nvlink", "max-min")
    assert out.returncode == 0, out.stderr
    assert "event time (simai latency, NVLink max-min)  0.5355" in out.stdout


def test_time_nvlink_bad_choice_names_the_flag(run_optcc):
    out = run_optcc("time", "--algo", "ring", "--p", "4", "--nvlink", "fair")
    assert out.returncode == 2 and "--nvlink" in out.stderr and "max-min" in out.stderr
