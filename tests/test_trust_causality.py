"""Causality is exactly what the runner relies on: both directions, against real runs.

Proved now (the old rule refused them) and correct on gloo: a read racing an in-flight write,
two simultaneous copies of the final value. Refused (same-instant landings that do not
commute): the runner's own plans (run_virtual: the per-rank plans the workers execute, same
landing order) compute a wrong value although the flow-index order would be right; the sum
property, computed in the runners' order, refutes it too. tests/test_trust_same_instant.py
has the class where only the order of the walk decided.
"""
from fractions import Fraction as F

import pytest

from optcc.cluster import Cluster
from optcc.schedule import Flow, Schedule
from optcc.simulate import simulate
from optcc.timing import durations
from verifier import prove_allreduce

from verifier_cases import mutants, redundant_p3  # noqa: E402


def racing_read() -> Schedule:
    """redundant_p3 with flow 3 (0→2 copy) at t = 1/2: rank 2's input is read at t = 1 while
    that copy is in flight until 3/2; the read must carry x2 (the value at its start)."""
    s = redundant_p3()
    return next(m for _, d, m in mutants(s, durations(s)) if d == "3 start 1/2")


def two_simultaneous_copies() -> Schedule:
    """Reduce to rank 0, copy to rank 1, then ranks 0 and 1 both copy the sum to rank 2 at
    rate 1/2: two copies of one final value land on rank 2 at the same instant t = 5."""
    half = F(1, 2)
    flows = [Flow(1, 0, 0, "add", F(0)), Flow(2, 0, 0, "add", F(1)), Flow(0, 1, 0, "copy", F(2)),
             Flow(0, 2, 0, "copy", F(3), rate=half), Flow(1, 2, 0, "copy", F(3), rate=half)]
    return Schedule(Cluster.build(3), [F(1)], flows, meta={"algorithm": "hand-two-copies-p3"})


def copy_and_add_at_one_instant() -> Schedule:
    """Rank 0 gets a copy of x0+x1 (flow 0, start 1) and an add of x2 (flow 1, start 0) both
    landing at t = 3. Flow order (copy, then add) gives the sum; the runner's posting order
    (by start: add, then copy) leaves x0+x1."""
    flows = [Flow(1, 0, 0, "copy", F(1), rate=F(1, 2)), Flow(2, 0, 0, "add", F(0), rate=F(1, 3)),
             Flow(0, 1, 0, "add", F(0)), Flow(0, 1, 0, "copy", F(3)), Flow(0, 2, 0, "copy", F(4))]
    return Schedule(Cluster.build(3), [F(1)], flows, meta={"algorithm": "hand-copy-add-p3"})


@pytest.mark.parametrize("make", [racing_read, two_simultaneous_copies])
def test_former_false_alarms_are_proved_and_correct_on_gloo(tmp_path, make):
    s = make()
    proof = prove_allreduce(s)
    assert proof.proved, proof.counterexample
    pytest.importorskip("torch")
    from gpu_runner.launch import launch_trusted
    path = str(tmp_path / "s.json")
    s.save(path)
    res = launch_trusted(path, s.sha256(), 3, 8 * 1001, "int64", 60, backend="gloo")
    assert res.ok and res.result["correct"] is True and res.result["rows"][0]["wrong"] == 0, res.describe_failure()


def test_same_instant_copy_and_add_is_refused_and_really_wrong_in_the_runners_order():
    s = copy_and_add_at_one_instant()
    assert simulate(s).first_wrong["rank"] == 0                # posting order, as the runners
    proof = prove_allreduce(s)
    assert not proof.properties["sum"] and not proof.properties["causality"]
    assert (proof.counterexamples["sum"]["rank"], proof.counterexamples["sum"]["piece"]) == (0, 0)
    cx = proof.counterexamples["causality"]
    assert cx["kind"] == "same-instant landings that do not commute"
    assert (cx["rank"], cx["piece"]) == (0, 0) and {f["flow"] for f in cx["flows"]} == {0, 1}
    torch = pytest.importorskip("torch")
    from gpu_runner.executor import run_virtual
    xs = [torch.tensor([1, 10, 100], dtype=torch.int64) + 1000 * r for r in range(3)]
    out = run_virtual(s, [x.clone() for x in xs], unsafe=True)
    assert torch.equal(out[0], xs[0] + xs[1])                  # x2 lost: the runner's order
    assert not torch.equal(out[0], xs[0] + xs[1] + xs[2])
