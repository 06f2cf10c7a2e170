"""verifier: proofs of real schedules, actionable counterexamples, certificates, and the CLI."""
from __future__ import annotations

import json
import os
from fractions import Fraction as F

import pytest

from optcc.algorithms.single.build import optcc_allreduce
from optcc.algorithms.ring.build import ring_allreduce
from optcc_app.cli import main
from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.schedule import Flow, Schedule
from verifier import PROPERTIES, certificate_matches, prove_allreduce, write_certificate
from verifier_cases import local_op_p2, signed_p3, two_per_pair_p2


def ring(p=5, ell=2, k=2):
    return ring_allreduce(Cluster.build(p, stragglers={0: ell} if ell != 1 else {}), k)


def replace_flow(schedule, i, **changes):
    flows = list(schedule.flows)
    flows[i] = flows[i]._replace(**changes)
    return Schedule(schedule.cluster, schedule.pieces, flows, schedule.local_ops, schedule.meta)


@pytest.mark.parametrize("p,ell,k", [(2, 1, 1), (3, 2, 1), (6, F(8, 7), 3), (16, 2, 2)])
def test_ring_is_proved_with_all_five_properties(p, ell, k):
    proof = prove_allreduce(ring(p, ell, k))
    assert proof.proved and proof.counterexample is None
    assert proof.properties == {name: True for name in PROPERTIES}
    assert proof.facts["piece_groups"] == 1           # every ring piece is a rotation of piece 0
    assert proof.facts["z3_queries"] == 1
    assert proof.facts["finish"] == max(ell, 1) * F(2 * (p - 1), p)


@pytest.mark.parametrize("p,ell,k", [(5, 2, 2), (7, F(3, 2), 4), (6, F(8, 7), 3), (2, 2, 1)])
def test_optcc_is_proved(p, ell, k):
    proof = prove_allreduce(optcc_allreduce(Cluster.build(p, stragglers={1: ell}), k))
    assert proof.proved, proof.counterexample


def test_signed_coefficients_and_local_ops_are_proved():
    assert prove_allreduce(signed_p3()).proved
    assert prove_allreduce(local_op_p2()).proved


def test_wrong_sign_is_refuted_with_the_coefficients():
    s = signed_p3()
    bad = replace_flow(s, 3, coef=1)                  # + own partial instead of −: x0 counted 3 times
    cx = prove_allreduce(bad).counterexample
    assert cx["property"] == "sum" and cx["piece"] == 0 and cx["rank"] == 0
    assert cx["wrong_coefficients"] == {"0": {"expected": 1, "actual": 3}}
    values = {int(k.split("[")[1].split("]")[0]): F(v) for k, v in cx["inputs"].items()}
    assert F(cx["expected_value"]) == sum(values.values())
    assert F(cx["actual_value"]) == 3 * values[0] + values[1] + values[2] != F(cx["expected_value"])


def test_dropped_input_names_the_overwriting_flow():
    s = ring(5, 1, 1)
    i = next(i for i, f in enumerate(s.flows) if f.op == "add" and f.start == 0 and f.src == 2)
    proof = prove_allreduce(replace_flow(s, i, op="copy"))   # 2 -> 3 overwrites rank 3's input
    cx = proof.counterexample
    assert not proof.properties["sum"] and proof.properties["capacity"]
    assert cx["missing_ranks"] == [3]
    assert cx["first_wrong"]["flow"] == i
    assert f"flows[{i}]" in cx["message"]


def test_double_count_names_the_first_wrong_flow():
    s = ring(4, 1, 1)
    extra = s.flows[0]._replace(start=F(2))           # adds rank 0's piece again after the ring ends
    proof = prove_allreduce(Schedule(s.cluster, s.pieces, s.flows + [extra], meta=s.meta))
    cx = proof.counterexample
    assert cx["property"] == "sum"
    assert cx["first_wrong"]["flow"] == len(s.flows)
    assert any(d["actual"] == 2 for d in cx["wrong_coefficients"].values())


def test_read_before_dependency_landed_sends_the_old_value():
    """Issue 12: a read racing an in-flight write carries the value held at its start (as the
    runner executes it), so the sum property refutes this one, not causality."""
    s = ring(4, 1, 1)
    # step-1 flow of rank 1 reads piece 0, which rank 0's step-0 flow is still writing
    i = next(i for i, f in enumerate(s.flows) if f.start == F(1, 4) and f.src == 1)
    bad = replace_flow(s, i, start=F(1, 8))
    proof = prove_allreduce(bad)
    assert not proof.properties["sum"] and proof.properties["causality"]


def test_overlapping_copies_of_the_final_value_are_not_a_causality_error():
    """Issue 12: both copies carry the final sum; the runner lands each at its end."""
    c = Cluster.build(3)
    flows = [Flow(1, 0, 0, "add", F(0)), Flow(2, 0, 0, "add", F(1)), Flow(0, 1, 0, "copy", F(2)),
             Flow(0, 2, 0, "copy", F(3)), Flow(1, 2, 0, "copy", F(7, 2), rate=F(1, 2))]
    s = Schedule(c, [F(1)], flows, meta={"capacity": "shared"})
    proof = prove_allreduce(s)
    assert proof.properties["causality"] and proof.properties["sum"]


def test_port_collision_names_both_flows_and_the_time():
    s = ring(4, 1, 1)
    bad = replace_flow(s, 5, start=s.flows[1].start)   # flows 1 and 5 both leave rank 1 at t = 0
    proof = prove_allreduce(bad)
    cx = proof.counterexamples["capacity"]
    assert cx["rank"] == 1 and cx["port"] == "nic send" and cx["time"] == "0"
    assert {f["flow"] for f in cx["flows"]} == {1, 5}


def test_several_messages_between_one_pair_in_one_batch_are_runnable():
    """Both ends post a pair's messages in the same (start, src, dst, piece, index) order."""
    proof = prove_allreduce(two_per_pair_p2())
    assert proof.proved and proof.properties == {name: True for name in PROPERTIES if name != "time"}


def _sends_first(schedule, grid):
    """A runner that posts all its sends before its receives (per rank): pair orders differ."""
    from verifier.port_checks import runner_posts
    flows = schedule.flows
    return [sorted(seq, key=lambda i: (grid.starts[i], flows[i].src != r)) for r, seq in
            enumerate(runner_posts(schedule, grid))]


def test_pair_order_that_differs_between_the_two_ends_is_refuted():
    from optcc.timing import IntegerTimes
    from verifier.port_checks import check_runnable
    s = two_per_pair_p2()
    grid = IntegerTimes(s)
    assert check_runnable(s, grid) == (True, None)
    ok, cx = check_runnable(s, grid, posts=_sends_first(s, grid))
    assert not ok and cx["kind"] == "pair order differs" and (cx["rank"], cx["peer"]) == (0, 1)
    assert cx["time"] == "0" and {f["flow"] for f in cx["flows"]} == {0, 2}   # position 0: 0 sends piece 0, 1 sends piece 2
    assert "matched in posting order" in cx["message"]


def test_runner_lists_that_lose_reorder_or_duplicate_a_flow_are_refuted():
    from optcc.timing import IntegerTimes
    from verifier.port_checks import check_runnable, runner_posts
    s = two_per_pair_p2()
    grid = IntegerTimes(s)
    posts = runner_posts(s, grid)
    lost = [seq[:] for seq in posts]
    lost[1].remove(5)                                   # rank 1 never receives flows[5]
    ok, cx = check_runnable(s, grid, posts=lost)
    assert not ok and cx["kind"] in ("unpaired flow", "pair order differs")
    late = [seq[:] for seq in posts]
    late[0] = late[0][3:] + late[0][:3]                 # rank 0 posts its t = 3/4 batch first
    ok, cx = check_runnable(s, grid, posts=late)
    assert not ok and cx["kind"] == "batches out of time order" and cx["rank"] == 0
    twice = [seq[:] for seq in posts]
    twice[1].insert(1, 0)                            # flows[0] received twice on rank 1
    ok, cx = check_runnable(s, grid, posts=twice)
    assert not ok and cx["kind"] == "unpaired flow"


def test_a_flow_landing_at_its_own_start_is_refuted():
    """Validated schedules always have durations > 0; the check still guards the runner's premise."""
    from optcc.timing import IntegerTimes
    from verifier.port_checks import check_runnable
    s = two_per_pair_p2()
    grid = IntegerTimes(s)
    grid.ends = list(grid.ends)
    grid.ends[4] = grid.starts[4]
    ok, cx = check_runnable(s, grid)
    assert not ok and cx["kind"] == "zero duration" and cx["flows"][0]["flow"] == 4


@pytest.mark.parametrize("algo,p,g,stragglers", [
    ("flat_ring", 6, 3, {0: 2, 1: 2, 2: 2}), ("flat_ring", 8, 4, {}),
    ("hierarchical_ring", 8, 4, {0: 2}), ("r2ccl_server", 4, 2, {0: 2, 1: 2}),
    ("r2ccl_server", 8, 4, {0: 2, 1: 2, 2: 2, 3: 2})])
def test_g_above_1_baselines_are_proved(algo, p, g, stragglers):
    """These post several flows between one ordered pair at one instant (g channels / shards)."""
    from optcc.algorithms import baselines
    from optcc.timing import IntegerTimes
    s = getattr(baselines, f"{algo}_allreduce")(Cluster.build(p, g=g, stragglers=stragglers))
    grid = IntegerTimes(s)
    pairs = {}
    for i, f in enumerate(s.flows):
        pairs[grid.starts[i], f.src, f.dst] = pairs.get((grid.starts[i], f.src, f.dst), 0) + 1
    assert max(pairs.values()) >= 2                   # the case the old one-per-pair rule refused
    proof = prove_allreduce(s)
    assert proof.proved, proof.counterexample


def test_beating_the_lower_bound_fails_loudly(monkeypatch):
    import verifier.time_property as tp
    monkeypatch.setattr(tp, "lower_bound", lambda cluster: F(100))
    proof = prove_allreduce(ring(4, 1, 1))
    msg = proof.counterexample["message"]
    assert not proof.properties["time"] and "LOWER BOUND" in msg and "3/2" in msg and "100" in msg


def test_unknown_bound_is_said(monkeypatch):
    import verifier.time_property as tp

    def no_bound(cluster):
        raise OptccError("stragglers", "no lower bound is known for this case")
    monkeypatch.setattr(tp, "lower_bound", no_bound)
    proof = prove_allreduce(ring(4, 2, 1))
    assert proof.proved and proof.facts["lower_bound"] is None
    assert "no lower bound is known" in proof.facts["note"]


def test_g2_cluster_uses_the_bound_from_bounds():
    c = Cluster.build(4, g=2, stragglers={0: 2, 2: 2})
    s = ring(4, 2, 1)
    proof = prove_allreduce(Schedule(c, s.pieces, s.flows, meta=s.meta))
    from bounds.closed_form import lower_bound
    assert proof.proved and proof.facts["lower_bound"] == lower_bound(c) <= proof.facts["finish"]


def test_stated_time_must_match():
    s = ring(3, 1, 1)
    assert s.stated_slot_time == F(4, 3)                 # the generator states its closed form
    s.stated_slot_time = F(1)
    proof = prove_allreduce(s)
    assert not proof.properties["time"] and "4/3" in proof.counterexample["message"]
    legacy = Schedule(s.cluster, s.pieces, s.flows, meta={**s.meta, "slot_time": "1"})   # the old place
    assert legacy.stated_slot_time == 1 and not prove_allreduce(legacy).properties["time"]


def test_a_schedule_stating_no_time_has_time_not_stated_never_proved():
    s = ring(3, 1, 1)
    bare = Schedule(s.cluster, s.pieces, s.flows, meta=s.meta)
    proof = prove_allreduce(bare)
    assert proof.proved and "time" not in proof.properties and proof.facts["stated_slot_time"] == "not stated"
    fast = Schedule(s.cluster, s.pieces, [f._replace(start=f.start / 2) for f in s.flows], meta=s.meta)
    proof = prove_allreduce(fast)            # stating nothing does not hide a schedule beating the bound
    assert proof.properties["time"] is False and "LOWER BOUND" in proof.counterexamples["time"]["message"]


def test_the_stated_time_and_meta_slot_time_must_agree():
    s = ring(3, 1, 1)
    s.meta["slot_time"] = "1"
    with pytest.raises(OptccError, match="meta.slot_time: states 1 but slot_time states 4/3"):
        s.validate()


def test_property_subset_and_unknown_name():
    proof = prove_allreduce(ring(3, 1, 1), properties=["sum", "capacity"])
    assert proof.properties == {"sum": True, "capacity": True} and proof.proved
    with pytest.raises(OptccError):
        prove_allreduce(ring(3, 1, 1), properties=["speed"])
    with pytest.raises(OptccError):          # checked on the runner's own plans: verifier.step_check
        prove_allreduce(ring(3, 1, 1), properties=["runnable"])


def test_certificate_round_trip(tmp_path):
    s = ring(4, 2, 1)
    proof = prove_allreduce(s)
    path = tmp_path / "cert.json"
    write_certificate(proof, s, str(path))
    data = json.loads(path.read_text())
    assert data["schedule_sha256"] == s.sha256() and data["properties"] == proof.properties
    assert data["z3_version"] and data["seconds"] >= 0
    assert certificate_matches(s, str(path))
    assert not certificate_matches(replace_flow(s, 0, start=F(1)), str(path))
    assert not certificate_matches(s, str(tmp_path / "missing.json"))
    assert os.listdir(tmp_path) == ["cert.json"]        # atomic write leaves no temp file
    bad = prove_allreduce(replace_flow(s, 0, op="copy"))
    with pytest.raises(OptccError):
        write_certificate(bad, s, str(tmp_path / "no.json"))


def test_cli_exit_codes_and_json(tmp_path, capsys):
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    s = ring(4, 2, 1)
    s.save(str(good))
    replace_flow(s, 2, op="copy").save(str(bad))
    cert = tmp_path / "c.json"
    assert main(["verify", str(good), "--certificate", str(cert), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"proved", "properties", "counterexample", "seconds"} <= set(out) and out["proved"] is True
    assert certificate_matches(s, str(cert))
    assert main(["verify", str(bad)]) == 1
    text = capsys.readouterr().out
    assert "COUNTEREXAMPLE (sum)" in text and "REFUTED" in text
    assert main(["verify", str(bad), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["proved"] is False and out["counterexample"]["property"] == "sum"
    assert main(["verify", str(tmp_path / "nope.json")]) == 2
    (tmp_path / "junk.json").write_text('{"format": "optcc-schedule/1", "cluster": {}}')
    assert main(["verify", str(tmp_path / "junk.json")]) == 2
