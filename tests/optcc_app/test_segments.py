"""--segments auto (optcc.segments): its cheap search against brute force over every k ≤ 1024."""
import json
from fractions import Fraction as F

import pytest

from optcc_app.cli import main
from optcc.cluster import Cluster
from optcc.model_time import model_time
from optcc.segments import auto_segments, knee_segments, parse_segments

SIZES = (64 * 2**20, 2**30, 8 * 2**30)
MODELS = ("alpha", "simai", "nccl")


def brute_force(algo, c, n):
    best = None
    for k in range(1, 1025):
        t = model_time(algo, c, k, n)
        if t.valid and (best is None or t.time < best[0]):
            best = (t.time, k)
    return best


@pytest.mark.parametrize("p", (8, 16, 32, 64))
@pytest.mark.parametrize("ell", (F(8, 7), F(4, 3), F(2)))
def test_auto_is_within_one_percent_of_brute_force(p, ell):
    for model in MODELS:
        c = Cluster.build(p, stragglers={0: ell}, latency_model=model)
        for n in SIZES:
            k, t = auto_segments("optcc", c, n)
            found = brute_force("optcc", c, n)
            if found is None:      # Li + L beyond the knee even at k = 1: nothing is modelled
                assert (k, t.valid, knee_segments(c, n)) == (1, False, 1)
                continue
            best, k_best = found
            assert t.valid and t.time <= best * F(101, 100), (p, ell, model, n, k, k_best)
            assert k <= knee_segments(c, n)


@pytest.mark.parametrize("c", [Cluster.build(16, stragglers={0: 2, 1: F(4, 3)}, latency_model="simai"),
                               Cluster.build(32, 4, stragglers={i: 2 for i in range(4)}, latency_model="nccl"),
                               Cluster.build(32, 4, stragglers={i: F(8, 7) for i in range(4)}, latency_model="alpha")])
def test_auto_on_multi_and_servers(c):
    n = 2**30
    k, t = auto_segments("optcc", c, n)
    best, _ = brute_force("optcc", c, n)
    assert t.time <= best * F(101, 100)


def test_auto_trades_fill_against_latency():
    """More latency or a smaller message: fewer segments (the knee and the o·k term)."""
    fast = Cluster.build(32, stragglers={0: 2})
    assert auto_segments("optcc", fast, 2**30)[0] == 1024           # no latency: as many as allowed
    ks = [auto_segments("optcc", Cluster.build(32, stragglers={0: 2}, latency_model=m), 2**30)[0]
          for m in ("simai", "nccl")]
    assert ks[0] > ks[1] > 1
    assert auto_segments("optcc", Cluster.build(32, stragglers={0: 2}, latency_model="alpha"), 2**20)[0] \
        < auto_segments("optcc", Cluster.build(32, stragglers={0: 2}, latency_model="alpha"), 2**33)[0]
    assert auto_segments("ring", Cluster.build(8, latency_model="nccl"), 2**30)[0] == 1


def test_parse_segments():
    assert parse_segments("auto") == "auto" and parse_segments("7") == 7
    for bad in ("0", "-3", "x", "1.5"):
        with pytest.raises(Exception) as err:
            parse_segments(bad)
        assert err.value.field == "segments"


def test_cli_auto_reports_the_chosen_segments(tmp_path, capsys):
    path = str(tmp_path / "s.json")
    argv = ["--p", "8", "--straggler", "0:2", "--latency-model", "nccl", "-k", "auto", "--n", str(2**30)]
    k, _ = auto_segments("optcc", Cluster.build(8, stragglers={0: 2}, latency_model="nccl"), 2**30)
    assert main(["schedule", "--algo", "optcc", "-o", path] + argv) == 0
    capsys.readouterr()
    assert json.load(open(path))["meta"]["segments"] == k
    assert main(["compare", "--no-prove", "--json"] + argv) == 0
    assert json.loads(capsys.readouterr().out)["segments"] == k
    assert main(["demo", "--no-run", "--json"] + argv) == 0
    assert json.loads(capsys.readouterr().out)["segments"] == k


@pytest.mark.parametrize("p, strag, model, n", [(8, {0: 2}, "simai", 2**24), (12, {0: F(4, 3)}, "nccl", 2**27),
                                                (9, {0: 2, 1: F(8, 7)}, "simai", 2**25), (8, {0: 2}, "alpha", 2**26)])
def test_auto_k_schedule_meets_its_model_time(p, strag, model, n):
    """The schedule built at auto's k, timed by the event model, is within its model time."""
    from optcc.algorithms import build_schedule
    from optcc_app.compose.timing_report import time_schedule
    c = Cluster.build(p, stragglers=strag, latency_model=model)
    k, t = auto_segments("optcc", c, n)
    assert t.valid and 1 < k < 1024
    rep = time_schedule(build_schedule("optcc", c, k), n)
    assert rep.slot_time == t.slot and rep.event_time <= t.time
