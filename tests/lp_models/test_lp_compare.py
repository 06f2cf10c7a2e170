"""`optcc compare` (optcc_app/commands/compare.py, optcc_app.compose.comparison)."""
import json
from fractions import Fraction as F

import pytest

from lp_models.fluid import lp_optimum
from optcc.algorithms.baselines import flat_ring_slot_time
from optcc.algorithms.ring.build import ring_allreduce
from optcc_app.cli import main
from optcc.cluster import Cluster
from optcc.timing import slot_time

KEYS = {"lower_bound", "t0", "lp_optimum", "lp_optimum_exclusive", "ilp_optimum", "algorithms"}
ALGO_KEYS = {"time", "ratio_to_t0", "ratio_to_lower_bound", "proved"}


def _run_json(capsys, argv):
    code = main(argv + ["--json"])
    assert code == 0
    return json.loads(capsys.readouterr().out)


def test_json_keys_and_values_small_cluster(capsys):
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
    assert algos["optcc"]["time"] >= out["lp_optimum_exclusive"] - 1e-12
    for a in algos.values():
        assert abs(a["ratio_to_t0"] - a["time"] / out["t0"]) < 1e-12


def test_ilp_column(capsys):
    out = _run_json(capsys, ["compare", "--p", "3", "--straggler", "0:2", "--segments", "2", "--ilp"])
    assert out["ilp_optimum"] is not None and out["ilp"]["status"] == "OPTIMAL"
    assert out["ilp_optimum"] >= out["lp_optimum_exclusive"] - 1e-12
    assert out["algorithms"]["ilp_trees"]["proved"] is True


def test_p_10000_uses_closed_forms(capsys):
    out = _run_json(capsys, ["compare", "--p", "10000", "--straggler", "0:8/7", "--segments", "64"])
    assert all(a["proved"] is None for a in out["algorithms"].values())
    assert abs(out["algorithms"]["ring_pxn"]["time"] - float(F(8, 7) * F(2 * 9999, 10000))) < 1e-12
    assert abs(out["lp_optimum"] - out["lower_bound"]) < 1e-9 * out["lower_bound"]


SERVER0_ELL2 = ["--straggler", "0:2", "--straggler", "1:2", "--straggler", "2:2", "--straggler", "3:2"]


def test_multi_gpu_servers(capsys):
    out = _run_json(capsys, ["compare", "--p", "32", "--g", "4", *SERVER0_ELL2, "--nvlink-bandwidth", "1e15",
                             "--no-prove"])
    assert abs(out["lp_optimum"] - out["lower_bound"]) < 1e-9 * out["lower_bound"]
    assert out["algorithms"]["optcc"]["source"] == "schedule (optcc_servers)"


def test_servers_rows_small_cluster(capsys):
    """p = 16, g = 4, server 0 at ℓ = 2, NVLink 9× a NIC: every row equals its construction's
    closed form; every schedule row is proved (the flat/hierarchical rings and R2CCL post
    several flows between one pair at one instant, which the verifier's "runnable" allows)."""
    from optcc.algorithms.baselines import flat_ring_slot_time, hierarchical_ring_slot_time, r2ccl_server_slot_time
    from optcc.algorithms.servers.build import optcc_server_slot_time
    out = _run_json(capsys, ["compare", "--p", "16", "--g", "4", *SERVER0_ELL2, "--segments", "4"])
    a = out["algorithms"]
    c = Cluster.build(16, 4, stragglers={i: 2 for i in range(4)})
    assert a["optcc"]["proved"] is True and a["optcc"]["time"] == float(optcc_server_slot_time(c, 4))
    assert a["ring_no_failure"]["time"] == float(F(2 * 15, 4 * 16))                  # NCCLNoFailure, flat ring
    assert a["ring_pxn"]["time"] == float(2 * F(2 * 15, 4 * 16)) == float(flat_ring_slot_time(c))
    assert a["hierarchical_ring"]["time"] == float(hierarchical_ring_slot_time(c))
    assert a["r2ccl"]["time"] == float(r2ccl_server_slot_time(c, 4, 16))
    assert a["r2ccl"]["properties"]["sum"] is True
    for name in ("optcc", "ring_pxn", "ring_no_failure", "hierarchical_ring", "r2ccl"):
        assert a[name]["proved"] is True, (name, out["notes"])
    assert not any("NOT proved" in n for n in out["notes"])
    assert a["optcc"]["time"] >= out["lp_optimum_exclusive"] - 1e-12
    for row in a.values():
        assert ALGO_KEYS <= set(row)


def test_two_stragglers_small_cluster(capsys):
    from optcc.algorithms.multi.build import optcc_multi_slot_time
    out = _run_json(capsys, ["compare", "--p", "8", "--straggler", "0:4/3", "--straggler", "1:8/7", "--segments", "4"])
    a = out["algorithms"]
    c = Cluster.build(8, stragglers={0: F(4, 3), 1: F(8, 7)})
    assert a["optcc"]["source"] == "schedule (optcc_multi)" and a["optcc"]["proved"] is True
    assert a["optcc"]["time"] == float(optcc_multi_slot_time(c, 4))
    assert a["ring_pxn"]["time"] == float(F(4, 3) * F(14, 8))
    assert a["r2ccl"]["time"] is None and "not available" in a["r2ccl"]["source"]
    assert out["lower_bound"] == pytest.approx(float(max(F(4, 3), F(14) / (6 + F(3, 4) + F(7, 8)))))


@pytest.mark.parametrize("argv,which", [
    (["--straggler", "0:2", "--straggler", "1:4/3"], "optcc_multi"),
    (["--g", "4", *SERVER0_ELL2], "optcc_servers"),
])
def test_p_10000_closed_forms_for_new_constructions(capsys, argv, which):
    from optcc.algorithms.registry import optcc_closed_form
    out = _run_json(capsys, ["compare", "--p", "10000", *argv, "--segments", "64"])
    a = out["algorithms"]
    assert all(row["proved"] is None for row in a.values())
    assert a["optcc"]["source"] == f"closed form ({which})"
    g = 4 if "--g" in argv else 1
    stragglers = {i: 2 for i in range(4)} if g == 4 else {0: F(2), 1: F(4, 3)}
    c = Cluster.build(10000, g, stragglers=stragglers)
    assert a["optcc"]["time"] == float(optcc_closed_form(c, 64))
    assert out["lower_bound"] <= a["optcc"]["time"] < 1.02 * out["lower_bound"]
    assert out["seconds"] < 30
    if g == 4:
        assert a["ring_no_failure"]["time"] == float(F(2 * 9999, 4 * 10000))
        assert a["r2ccl"]["source"] == "model (K = 4, S → ∞)"


def test_optcc_row_says_why_when_the_closed_form_refuses(capsys):
    # NVLink only 2× a NIC with g = 4: optcc_servers has no closed form (needs s_nv ≥ g − 1).
    out = _run_json(capsys, ["compare", "--p", "128", "--g", "4", *SERVER0_ELL2, "--nvlink-bandwidth", "1e11",
                             "--bandwidth", "5e10"])
    row = out["algorithms"]["optcc"]
    assert row["time"] is None and "not available" in row["source"] and "nvlink" in row["source"].lower()


def test_ring_closed_form_matches_generated_schedule():
    for p in list(range(2, 20)) + [31, 48, 64]:
        cluster = Cluster.build(p, stragglers={p // 2: F(3, 2)})
        assert flat_ring_slot_time(cluster) == slot_time(ring_allreduce(cluster, 2))


def test_optcc_closed_form_matches_generated_schedule():
    from optcc.algorithms.single.build import optcc_allreduce, optcc_slot_time
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


def test_fault_free_cluster_has_lp_schedule_rows(capsys):
    """Without stragglers the LP-schedule rows are real proved schedules at T0·(1 + 1/k + 1/(2k²))."""
    out = _run_json(capsys, ["compare", "--p", "4", "--segments", "8"])
    algos = out["algorithms"]
    for capacity in ("shared", "exclusive"):
        row = algos[f"lp_schedule_{capacity}"]
        assert row["proved"] is True and row["source"] == "schedule"
        assert abs(row["time"] - 1.5 * (1 + 1 / 8 + 1 / 128)) < 1e-12
    assert not any("lp_schedule" in n for n in out["notes"])
