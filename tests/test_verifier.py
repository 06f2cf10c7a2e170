"""verifier: proofs of real schedules, actionable counterexamples, certificates, and the CLI."""
from __future__ import annotations

import json
import os
from fractions import Fraction as F

import pytest

from optcc.algorithms.ring import ring_allreduce
from optcc.cli import main
from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.schedule import Flow, Schedule
from verifier import PROPERTIES, certificate_matches, prove_allreduce, write_certificate
from verifier_cases import local_op_p2, signed_p3

try:
    from optcc.algorithms.optcc_single import optcc_allreduce
except ImportError:                                   # pragma: no cover
    optcc_allreduce = None


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


@pytest.mark.skipif(optcc_allreduce is None, reason="optcc_single not in the tree yet")
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


def test_read_before_dependency_landed_is_a_causality_error():
    s = ring(4, 1, 1)
    # step-1 flow of rank 1 reads piece 0, which rank 0's step-0 flow is still writing
    i = next(i for i, f in enumerate(s.flows) if f.start == F(1, 4) and f.src == 1)
    bad = replace_flow(s, i, start=F(1, 8))
    proof = prove_allreduce(bad)
    cx = proof.counterexamples["causality"]
    assert cx["kind"] == "read before dependency landed"
    assert cx["reader"]["flow"] == i and cx["dependency"]["start"] == "0" and cx["dependency"]["end"] == "1/4"


def test_overlapping_copy_writes_are_a_causality_error():
    c = Cluster.build(3)
    flows = [Flow(1, 0, 0, "add", F(0)), Flow(2, 0, 0, "add", F(1)), Flow(0, 1, 0, "copy", F(2)),
             Flow(0, 2, 0, "copy", F(3)), Flow(1, 2, 0, "copy", F(7, 2), rate=F(1, 2))]
    s = Schedule(c, [F(1)], flows, meta={"capacity": "shared"})
    proof = prove_allreduce(s)
    cx = proof.counterexamples["causality"]
    assert cx["kind"] == "overlapping writes" and {f["flow"] for f in cx["flows"]} == {3, 4}


def test_port_collision_names_both_flows_and_the_time():
    s = ring(4, 1, 1)
    bad = replace_flow(s, 5, start=s.flows[1].start)   # flows 1 and 5 both leave rank 1 at t = 0
    proof = prove_allreduce(bad)
    cx = proof.counterexamples["capacity"]
    assert cx["rank"] == 1 and cx["port"] == "nic send" and cx["time"] == "0"
    assert {f["flow"] for f in cx["flows"]} == {1, 5}


def test_two_messages_between_one_pair_in_one_batch_are_not_runnable():
    c = Cluster.build(2)
    half = F(1, 2)
    flows = [Flow(0, 1, 0, "add", F(0), rate=half), Flow(0, 1, 1, "add", F(0), rate=half),
             Flow(1, 0, 0, "copy", F(1), rate=half), Flow(1, 0, 1, "copy", F(1), rate=half)]
    proof = prove_allreduce(Schedule(c, [half, half], flows))
    assert proof.properties == {"sum": True, "causality": True, "capacity": True, "time": True, "runnable": False}
    assert proof.counterexample["property"] == "runnable" and proof.counterexample["time"] == "0"


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
    s.meta["slot_time"] = "1"
    proof = prove_allreduce(s)
    assert not proof.properties["time"] and "4/3" in proof.counterexample["message"]


def test_property_subset_and_unknown_name():
    proof = prove_allreduce(ring(3, 1, 1), properties=["sum", "runnable"])
    assert proof.properties == {"sum": True, "runnable": True} and proof.proved
    with pytest.raises(OptccError):
        prove_allreduce(ring(3, 1, 1), properties=["speed"])


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
