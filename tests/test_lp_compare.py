"""`optcc compare` (optcc/commands/compare.py, lp_models.comparison)."""
import json
from fractions import Fraction as F

import pytest

from lp_models.comparison import compare, lp_optimum, ring_pxn_time
from optcc.algorithms.ring import ring_allreduce
from optcc.cli import main
from optcc.cluster import Cluster
from optcc.timing import slot_time

KEYS = {"lower_bound", "t0", "lp_optimum", "lp_optimum_exclusive", "ilp_optimum", "algorithms"}
ALGO_KEYS = {"time", "ratio_to_t0", "ratio_to_lower_bound", "proved"}


def _run_json(capsys, argv):
    code = main(argv + ["--json"])
    assert code == 0
    return json.loads(capsys.readouterr().out)


def test_json_keys_and_values_small_cluster(capsys):
    pytest.importorskip("verifier")
    out = _run_json(capsys, ["compare", "--p", "8", "--straggler", "0:1.5", "--segments", "64"])
    assert KEYS <= set(out)
    assert abs(out["lp_optimum"] - 42 / 23) < 1e-9 and abs(out["lower_bound"] - 42 / 23) < 1e-12
    assert abs(out["lp_optimum_exclusive"] - 21 / 11) < 1e-9
    assert out["ilp_optimum"] is None
    algos = out["algorithms"]
    for name in ("ring_pxn", "ring_no_failure", "lp_schedule_shared", "lp_schedule_exclusive"):
        assert ALGO_KEYS <= set(algos[name]), name
    assert algos["ring_pxn"]["proved"] is True and abs(algos["ring_pxn"]["time"] - 1.5 * 1.75) < 1e-12
    shared = algos["lp_schedule_shared"]
    assert shared["proved"] is True and shared["capacity"] == "shared"
    # side by side: with shared bandwidth the schedule beats every port-exclusive schedule (ℓ < 2)
    assert out["lp_optimum"] <= shared["time"] < out["lp_optimum_exclusive"]
    if "optcc" in algos:
        assert algos["optcc"]["time"] >= out["lp_optimum_exclusive"] - 1e-12
    for a in algos.values():
        assert abs(a["ratio_to_t0"] - a["time"] / out["t0"]) < 1e-12


def test_ilp_column(capsys):
    pytest.importorskip("verifier")
    out = _run_json(capsys, ["compare", "--p", "3", "--straggler", "0:2", "--segments", "2", "--ilp"])
    assert out["ilp_optimum"] is not None and out["ilp"]["status"] == "OPTIMAL"
    assert out["ilp_optimum"] >= out["lp_optimum_exclusive"] - 1e-12
    assert out["algorithms"]["ilp_trees"]["proved"] is True


def test_p_10000_uses_closed_forms(capsys):
    out = _run_json(capsys, ["compare", "--p", "10000", "--straggler", "0:8/7", "--segments", "64"])
    assert all(a["proved"] is None for a in out["algorithms"].values())
    assert abs(out["algorithms"]["ring_pxn"]["time"] - float(F(8, 7) * F(2 * 9999, 10000))) < 1e-12
    assert abs(out["lp_optimum"] - out["lower_bound"]) < 1e-9 * out["lower_bound"]


def test_multi_gpu_servers(capsys):
    out = _run_json(capsys, ["compare", "--p", "32", "--g", "4", "--straggler", "0:2", "--straggler", "1:2",
                             "--straggler", "2:2", "--straggler", "3:2", "--nvlink-bandwidth", "1e15"])
    assert abs(out["lp_optimum"] - out["lower_bound"]) < 1e-9 * out["lower_bound"]
    assert "optcc" not in out["algorithms"]


def test_ring_closed_form_matches_generated_schedule():
    for p in list(range(2, 20)) + [31, 48, 64]:
        cluster = Cluster.build(p, stragglers={p // 2: F(3, 2)})
        assert ring_pxn_time(cluster) == slot_time(ring_allreduce(cluster, 2))


def test_optcc_closed_form_matches_generated_schedule():
    try:
        from optcc.algorithms.optcc_single import optcc_allreduce, optcc_slot_time
    except ImportError:
        pytest.skip("optcc.algorithms.optcc_single (another helper's) is not installed yet")
    for p in (3, 5, 8, 16, 33, 64):
        for ell in (F(8, 7), F(3, 2), F(2)):
            for k in (1, 4):
                cluster = Cluster.build(p, stragglers={0: ell})
                assert optcc_slot_time(cluster, k) == slot_time(optcc_allreduce(cluster, k)), (p, ell, k)


def test_lp_optimum_function_for_demo():
    assert abs(lp_optimum(Cluster.build(16, stragglers={0: 2})) - 2.0) < 1e-9


def test_bad_input_exits_2(capsys):
    assert main(["compare", "--p", "4", "--segments", "0"]) == 2
    assert main(["compare", "--p", "4", "--solver", "cplex"]) == 2
    assert "--solver" in capsys.readouterr().err
