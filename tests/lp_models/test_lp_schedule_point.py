"""Per-instance property `bound` (lp_models.schedule_point): a schedule's flows induce a feasible
point of the fluid LP, so its time is at least the LP optimum; and the check can fail."""
import json
from fractions import Fraction as F

import numpy as np
import pytest

from bounds.closed_form import exclusive_single_straggler_optimum, lower_bound
from lp_models.fluid import load_matrix, node_classes
from lp_models.schedule_point import check_lp_bound, exact_load_matrix
from lp_models.to_schedule import lp_schedule
from optcc.algorithms import build_schedule
from optcc.algorithms.baselines.rings import flat_ring_allreduce, hierarchical_ring_allreduce
from optcc.cluster import Cluster
from optcc.schedule import Flow, Schedule
from optcc.timing import slot_time

SERVER = Cluster.build(16, g=4, stragglers={r: 2 for r in range(4, 8)})
CASES = [
    ("ring", Cluster.build(8, stragglers={3: F(3, 2)}), 2),
    ("optcc", Cluster.build(8, stragglers={0: F(3, 2)}), 4),
    ("optcc", Cluster.build(7, stragglers={2: F(3)}), 3),
    ("optcc", Cluster.build(2, stragglers={0: 2}), 1),
    ("optcc", Cluster.build(9, stragglers={1: 2, 4: F(3, 2), 6: F(5, 4)}), 2),
    ("optcc", SERVER, 2),
]


@pytest.mark.parametrize("algo,cluster,k", CASES)
def test_generated_schedules_induce_feasible_lp_points(algo, cluster, k):
    s = build_schedule(algo, cluster, k)
    r = check_lp_bound(s)
    assert r["holds"] is True, r["message"]
    x = [F(v) for v in r["x"]]
    assert sum(x) == 1 and min(x) >= 0
    assert F(r["finish"]) == slot_time(s) >= F(r["lp_optimum"]) == lower_bound(cluster)
    assert F(r["max_row_load"]) <= r["ports"] * slot_time(s)
    single = cluster.g == 1 and len(cluster.stragglers) == 1
    assert r["optimum_certified_for_all_p"] is (single or cluster is SERVER)
    if single:      # optcc and the ring are exclusive-port schedules: T ≥ T_ex as well
        (s_rank, ell), = cluster.stragglers.items()
        assert F(r["exclusive"]["lp_optimum"]) == exclusive_single_straggler_optimum(cluster.p, ell)


def test_baselines_and_lp_schedules():
    for s in (flat_ring_allreduce(SERVER), hierarchical_ring_allreduce(SERVER),
              lp_schedule(Cluster.build(8, stragglers={0: F(3, 2)}), 8)):
        r = check_lp_bound(s)
        assert r["holds"] is True, r["message"]
    # a shared-bandwidth LP schedule beats T_ex, so it is not checked against the exclusive LP
    r = check_lp_bound(lp_schedule(Cluster.build(8, stragglers={0: F(3, 2)}), 64))
    assert "exclusive" not in r and F(r["finish"]) < exclusive_single_straggler_optimum(8, F(3, 2))


def test_exact_load_matrix_is_lp_models_per_node_matrix():
    for cluster in (Cluster.build(6, stragglers={1: F(3, 2), 4: F(5, 4)}), Cluster.build(5, stragglers={0: 3})):
        _, classes = node_classes(cluster, reduce_classes=False)
        for capacity in ("shared", "exclusive"):
            want = load_matrix(classes, capacity)
            got = np.array(exact_load_matrix([c.ell for c in classes], capacity), dtype=float)
            assert np.allclose(want, got, rtol=0, atol=1e-12)


def test_missing_flow_violates_the_cut():
    s = build_schedule("ring", Cluster.build(4, stragglers={1: 2}), 1)
    kept = [f for f in s.flows if not (f.piece == 0 and f.src == 0)]
    r = check_lp_bound(Schedule(s.cluster, s.pieces, kept, meta=s.meta))
    assert r["holds"] is False and r["counterexample"] == {"piece": 0, "node": 0, "constraint": "cut (leaves)"}


def test_too_few_crossings_violate_the_volume_count():
    c = Cluster.build(3)
    flows = [Flow(0, 1, 0, "add", F(0)), Flow(1, 2, 0, "add", F(1)), Flow(2, 0, 0, "copy", F(2))]
    r = check_lp_bound(Schedule(c, [F(1)], flows))
    assert r["holds"] is False and r["counterexample"]["constraint"] == "volume"
    assert r["counterexample"]["crossings"] == 3


def test_a_time_below_what_the_ports_allow_fails():
    s = build_schedule("optcc", Cluster.build(8, stragglers={0: 2}), 4)
    r = check_lp_bound(s, time=slot_time(s) * F(3, 4))
    assert r["holds"] is False and r["counterexample"]["constraint"] == "capacity"


def test_verify_reports_bound(tmp_path, capsys):
    from optcc_app.cli import main
    path = tmp_path / "o.json"
    build_schedule("optcc", Cluster.build(6, stragglers={2: F(3, 2)}), 3).save(str(path))
    assert main(["verify", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["reported_properties"]["bound"] is True
    assert out["facts"]["lp_bound"]["exclusive"]["holds"] is True
