"""Property "deterministic": same summation tree on every rank; our schedules have it."""
from fractions import Fraction as F

import pytest

from optcc.algorithms import build_schedule
from optcc_app.cli import main
from optcc.cluster import Cluster
from optcc.schedule import Flow, Schedule
from verifier import check_determinism, prove_allreduce

from verifier_cases import local_op_p2, redundant_p3, signed_p3  # noqa: E402

SERVER = {0: 2, 1: 2, 2: 2, 3: 2}


def each_rank_adds_in_its_own_order() -> Schedule:
    """p = 3, every rank reads its input at t = 0 and sends it to both others, at rate 1/2 to
    rank r−1 (lands at 2) and 1/3 to rank r+1 (lands at 3), so rank 0 computes (x0+x1)+x2,
    rank 1 (x1+x2)+x0, rank 2 (x2+x0)+x1. A correct AllReduce (all five properties hold),
    but three different summation trees."""
    flows = []
    for r in range(3):
        flows.append(Flow(r, (r - 1) % 3, 0, "add", F(0), rate=F(1, 2)))
        flows.append(Flow(r, (r + 1) % 3, 0, "add", F(0), rate=F(1, 3)))
    return Schedule(Cluster.build(3), [F(1)], flows, meta={"algorithm": "hand-own-order-p3"})


def same_instant_landings_p3() -> Schedule:
    """Both inputs land on each rank at the same instant; the runner applies them in posting
    order (by src), so every rank computes ((x_lowest + x_mid) + x_highest) with its own x
    in the middle or at an end: rank 0 and 1 agree, rank 2 computes (x2 + x0) + x1."""
    half = F(1, 2)
    flows = [Flow(1, 0, 0, "add", F(0), rate=half), Flow(2, 1, 0, "add", F(0), rate=half),
             Flow(0, 2, 0, "add", F(0), rate=half), Flow(2, 0, 0, "add", F(0), rate=half),
             Flow(0, 1, 0, "add", F(0), rate=half), Flow(1, 2, 0, "add", F(0), rate=half)]
    return Schedule(Cluster.build(3), [F(1)], flows, meta={"algorithm": "hand-same-instant-p3"})


@pytest.mark.parametrize("algo,cluster,k", [
    ("ring", Cluster.build(4), 1), ("ring", Cluster.build(5, stragglers={0: 2}), 3),
    ("optcc", Cluster.build(5, stragglers={4: 2}), 2), ("optcc", Cluster.build(6, stragglers={0: 2, 1: F(3, 2)}), 2),
    ("optcc", Cluster.build(12, stragglers={0: 2, 5: F(3, 2), 7: 4}), 4),
    ("optcc", Cluster.build(8, g=4, stragglers=SERVER), 2), ("ring", Cluster.build(8, g=4, stragglers=SERVER), 1)])
def test_our_schedules_are_deterministic(algo, cluster, k):
    s = build_schedule(algo, cluster, k)
    assert check_determinism(s) == (True, None)
    proof = prove_allreduce(s)
    assert proof.proved and proof.reported["deterministic"] is True


@pytest.mark.parametrize("make", [signed_p3, local_op_p2, redundant_p3])
def test_hand_schedules_with_signed_steps_are_deterministic(make):
    assert check_determinism(make())[0]


def test_counterexample_two_ranks_adding_in_different_orders():
    s = each_rank_adds_in_its_own_order()
    proof = prove_allreduce(s)
    assert proof.proved                                  # a correct AllReduce ...
    assert proof.reported["deterministic"] is False      # ... that is not deterministic
    cx = proof.reported_counterexamples["deterministic"]
    assert cx["piece"] == 0 and cx["ranks"] == [0, 1] and cx["distinct_trees"] == 3
    assert cx["trees"] == {"0": "((x0 + x1) + x2)", "1": "((x1 + x2) + x0)"}


def test_commuted_operands_are_the_same_tree_but_reassociation_is_not():
    from verifier.determinism import TreeTable
    t = TreeTable()
    x0, x1, x2 = t.leaf(0), t.leaf(1), t.leaf(2)
    assert t.add(x0, 1, x1) == t.add(x1, 1, x0)                              # a+b ≡ b+a in IEEE
    assert t.add(t.add(x0, 1, x1), 1, x2) != t.add(x0, 1, t.add(x1, 1, x2))  # not associative
    assert t.add(x0, 2, x1) != t.add(x1, 2, x0)                              # a + 2b is ordered


def _inputs(torch):
    gen = torch.Generator().manual_seed(5)
    base = [torch.randn(4096, generator=gen) * 10.0 ** torch.randint(-3, 4, (4096,), generator=gen) for _ in range(3)]
    for b, v in zip(base, (1.0, 1e8, -1e8)):        # element 0: (1 + 1e8) − 1e8 = 0 but (1e8 − 1e8) + 1 = 1
        b[0] = v
    return base


def test_the_counterexample_really_differs_bitwise_in_float32():
    torch = pytest.importorskip("torch")
    from gpu_runner.executor import run_virtual
    out = run_virtual(each_rank_adds_in_its_own_order(), [b.clone() for b in _inputs(torch)])
    assert out[0][0].item() == 0.0 and out[1][0].item() == 1.0     # the trees the verifier named
    assert not torch.equal(out[0], out[1]) and not torch.equal(out[1], out[2])
    ring = run_virtual(build_schedule("ring", Cluster.build(3), 1), [b.clone() for b in _inputs(torch)])
    assert torch.equal(ring[0], ring[1]) and torch.equal(ring[1], ring[2])


def test_same_instant_landings_follow_the_runners_posting_order():
    """The check uses the runner's tie order (by src), not the flow index: it predicts exactly
    which ranks agree bitwise."""
    torch = pytest.importorskip("torch")
    from gpu_runner.executor import run_virtual
    s = same_instant_landings_p3()
    ok, cx = check_determinism(s)
    assert not ok and cx["ranks"] == [0, 2] and cx["distinct_trees"] == 2
    assert cx["trees"] == {"0": "((x0 + x1) + x2)", "2": "((x0 + x2) + x1)"}
    out = run_virtual(s, [b.clone() for b in _inputs(torch)])
    assert torch.equal(out[0], out[1]) and not torch.equal(out[0], out[2])


def test_verify_reports_determinism(tmp_path, capsys):
    path = str(tmp_path / "s.json")
    each_rank_adds_in_its_own_order().save(path)
    assert main(["verify", path, "--json"]) == 0
    import json
    data = json.loads(capsys.readouterr().out)
    assert data["reported_properties"] == {"deterministic": False, "numerics": True, "bound": True}
    assert data["reported_counterexamples"]["deterministic"]["ranks"] == [0, 1]
    assert main(["verify", path]) == 0
    text = capsys.readouterr().out
    assert "deterministic  DOES NOT HOLD (reported, not required)" in text
