"""Causality is exactly what the runner relies on: both directions, against real runs.

Proved now (the old rule refused them) and correct on gloo: a read racing an in-flight write,
two simultaneous copies of the final value. Refused (same-instant landings that do not
commute): the runner's own plans (run_virtual: the per-rank plans the workers execute, same
landing order) compute a wrong value although the flow-index order would be right; the sum
property, computed in the runners' order, refutes it too. tests/verifier/test_trust_same_instant.py
has the class where only the order of the walk decided.
"""
from fractions import Fraction as F

import pytest

from optcc.cluster import Cluster
from optcc.schedule import Flow, Schedule, posting_order
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


def stale_copy_and_sum() -> Schedule:
    """p = 3, shared ports: a stale copy of x2 (flow 2, from rank 2) and the sum (flow 3, from
    rank 0) land together on rank 1 at t = 5; posting order (by start) applies the sum last."""
    flows = [Flow(1, 0, 0, "add", F(0)), Flow(2, 0, 0, "add", F(1)),
             Flow(2, 1, 0, "copy", F(2), rate=F(1, 3)), Flow(0, 1, 0, "copy", F(3), rate=F(1, 2)),
             Flow(0, 2, 0, "copy", F(5))]
    return Schedule(Cluster.build(3), [F(1)], flows, meta={"algorithm": "hand-stale-copy-p3", "capacity": "shared"})


def cancelled_tie() -> Schedule:
    """p = 3, shared ports: a copy of x1 and an add of x0 land together on rank 2 at t = 3 (the
    order decides x1 or x0 + 2·x1 there); rank 2 then adds its value to rank 0 and subtracts it
    again, and is overwritten by the sum: every order ends with the sum everywhere."""
    half = F(1, 2)
    flows = [Flow(1, 0, 0, "add", F(0), rate=half), Flow(2, 0, 0, "add", F(0), rate=half),
             Flow(1, 2, 0, "copy", F(1), rate=half), Flow(0, 2, 0, "add", F(1), rate=half),
             Flow(2, 0, 0, "add", F(3)), Flow(2, 0, 0, "add", F(4), coef=-1),
             Flow(0, 1, 0, "copy", F(5)), Flow(0, 2, 0, "copy", F(6))]
    return Schedule(Cluster.build(3), [F(1)], flows, meta={"algorithm": "hand-cancelled-tie-p3", "capacity": "shared"})


def _finals_in_order(schedule, applied_for: dict[int, int]) -> dict[int, dict[int, int]]:
    """Direct exact run in posting order, except that the landing of flow a applies flow
    applied_for[a] (an independent re-execution of a witness order)."""
    flows, durs = schedule.flows, durations(schedule)
    events = sorted([(f.start, 1, n, i) for n, i in enumerate(posting_order(schedule)) for f in [flows[i]]]
                    + [(flows[i].start + durs[i], 0, n, i) for n, i in enumerate(posting_order(schedule))])
    values = {r: {r: 1} for r in range(schedule.cluster.p)}
    carried = {}
    for _, phase, _, i in events:
        f = flows[i]
        if phase == 1:
            carried[i] = dict(values[f.src])
            continue
        j = applied_for.get(i, i)
        g, v = flows[j], carried.pop(j)
        if g.op == "copy":
            values[g.dst] = v
        else:
            values[g.dst] = {r: values[g.dst].get(r, 0) + g.coef * v.get(r, 0) for r in values[g.dst].keys() | v.keys()}
    return values


def test_a_tie_right_in_posting_order_only_is_refused_with_the_order_that_breaks_it():
    """The runners end with the exact sum (posting order); causality refuses, and says why: the
    other order of the tie, re-run here independently, leaves rank 1 with x2."""
    s = stale_copy_and_sum().validate()
    assert simulate(s).correct
    proof = prove_allreduce(s)
    assert proof.properties == {"sum": True, "causality": False, "capacity": True}
    cx = proof.counterexamples["causality"]
    assert cx["witness"] == {"applied": [3, 2], "posting": [2, 3], "rank": 1, "value": "x2",
                             "runners_value": "x0 + x1 + x2"}
    assert "optcc's executors apply them in posting order (flows 2, 3)" in cx["message"]
    assert "applied as flows 3, 2, rank 1 ends it with x2" in cx["message"]
    other = _finals_in_order(s, {2: 3, 3: 2})
    assert {r: c for r, c in other[1].items() if c} == {2: 1}
    torch = pytest.importorskip("torch")
    from gpu_runner.executor import run_virtual
    xs = [torch.tensor([1, 10, 100], dtype=torch.int64) + 1000 * r for r in range(3)]
    out = run_virtual(s, [x.clone() for x in xs], unsafe=True)
    assert all(torch.equal(o, xs[0] + xs[1] + xs[2]) for o in out)       # what the message says they compute


def test_a_tie_the_taint_cannot_clear_is_proved_when_every_order_gives_the_sum():
    """The dead-traffic taint reaches rank 0's final value (refused before the exact decision);
    re-running both orders shows the result never depends on it."""
    s = cancelled_tie().validate()
    for applied in ({}, {2: 3, 3: 2}):
        finals = _finals_in_order(s, applied)
        assert all({r: c for r, c in v.items() if c} == {0: 1, 1: 1, 2: 1} for v in finals.values())
    proof = prove_allreduce(s)
    assert proof.proved, proof.counterexamples


def test_optcc_verify_and_run_refuse_the_tie_with_its_witness(tmp_path, capsys):
    """The documented entry points: `optcc verify FILE` exits 1 naming the order that breaks it;
    `optcc run` refuses it before any rank starts (exit 2)."""
    from optcc_app.cli import main
    path = str(tmp_path / "stale.json")
    stale_copy_and_sum().save(path)
    assert main(["verify", path]) == 1
    out = capsys.readouterr().out
    assert "causality      REFUTED" in out and "applied as flows 3, 2, rank 1 ends it with x2" in out
    assert main(["run", "--schedule", path, "--nproc", "3", "--backend", "gloo"]) == 2
    err = capsys.readouterr().err
    assert "causality" in err and "applied as flows 3, 2" in err
