"""No property that cannot fail: for each property `optcc verify` lists, a hand-made case that
it alone refutes while every other property proves it.

sum, causality, capacity, time: a schedule each. runnable checks the runner's own per-rank
programs (verifier.step_check), so its case is a proved schedule with a lowering bug put into
optcc.lowering.step (index order instead of posting order; every scratch slot at offset 0).
"""
from fractions import Fraction as F

import pytest

from optcc.algorithms import build_schedule
from optcc.cluster import Cluster
from optcc.schedule import Flow, Schedule
from optcc.timing import slot_time
from verifier import PROPERTIES, prove_allreduce

HALF = F(1, 2)


def stating(s: Schedule) -> Schedule:
    """A hand case states the time it ends (as its author computed it: the timing model's), so
    that `time` is among the properties the other cases prove."""
    s.stated_slot_time = slot_time(s)
    return s


def missing_flow() -> Schedule:
    """The p = 3 ring without its last copy: one rank lacks the sum of one piece."""
    s = build_schedule("ring", Cluster.build(3), 1)
    return stating(Schedule(s.cluster, s.pieces, s.flows[:-1], meta={"algorithm": "ring-minus-one"}))


def tie_that_matters() -> Schedule:
    """Rank 0 gets a copy of x0+x1 (from rank 1) and an add of x2 (from rank 2) landing together
    at t = 3; posting order (src 1 before src 2) applies the copy first: the sum, as the runners
    compute it, but another order of the tie would lose x2."""
    flows = [Flow(0, 1, 0, "add", F(0)), Flow(2, 0, 0, "add", F(1), rate=HALF),
             Flow(1, 0, 0, "copy", F(1), rate=HALF), Flow(0, 1, 0, "copy", F(3)), Flow(0, 2, 0, "copy", F(4))]
    return stating(Schedule(Cluster.build(3), [F(1)], flows, meta={"algorithm": "hand-tie-p3"}))


def port_overload() -> Schedule:
    """Ranks 1 and 2 both send to rank 0 at t = 0 at full rate: rank 0 receives twice its rate."""
    flows = [Flow(1, 0, 0, "add", F(0)), Flow(2, 0, 0, "add", F(0)), Flow(0, 1, 0, "copy", F(1)),
             Flow(0, 2, 0, "copy", F(2))]
    return stating(Schedule(Cluster.build(3), [F(1)], flows, meta={"algorithm": "hand-overload-p3"}))


def wrong_stated_time() -> Schedule:
    s = build_schedule("ring", Cluster.build(3), 1)
    assert s.stated_slot_time == F(4, 3)            # the ring's closed form, as build_schedule states it
    s.stated_slot_time = F(1)
    return s


def two_way_pair() -> Schedule:
    """p = 2, two halves exchanged both ways at t = 0 and t = 1/2; flow indices list the 1→0 flow
    first, posting order (src first) the 0→1 flow."""
    flows = [Flow(1, 0, 1, "add", F(0)), Flow(0, 1, 0, "add", F(0)),
             Flow(0, 1, 1, "copy", HALF), Flow(1, 0, 0, "copy", HALF)]
    return Schedule(Cluster.build(2), [HALF, HALF], flows, meta={"algorithm": "hand-two-way-p2"})


def two_at_once() -> Schedule:
    """Ranks 1 and 2 send to rank 0 at half rate together: two receives in flight on rank 0."""
    flows = [Flow(1, 0, 0, "add", F(0), rate=HALF), Flow(2, 0, 0, "add", F(0), rate=HALF),
             Flow(0, 1, 0, "copy", F(2)), Flow(0, 2, 0, "copy", F(3))]
    return Schedule(Cluster.build(3), [F(1)], flows, meta={"algorithm": "hand-two-at-once-p3"})


def _others_prove(proof, name):
    assert set(proof.properties) == set(PROPERTIES)
    assert proof.properties == {k: k != name for k in PROPERTIES}, proof.counterexamples
    assert proof.counterexample["property"] == name and "also_failed" not in proof.counterexample


def _runnable(s):
    from verifier.step_check import runnable_property
    return runnable_property(s)


def test_the_properties_are_the_ones_tested_here():
    assert PROPERTIES == ("sum", "causality", "capacity", "time")


@pytest.mark.parametrize("name,make", [("sum", missing_flow), ("causality", tie_that_matters),
                                       ("capacity", port_overload), ("time", wrong_stated_time)])
def test_each_verifier_property_alone_refutes_its_case(name, make):
    s = make().validate()
    proof = prove_allreduce(s)
    _others_prove(proof, name)
    assert _runnable(s) == (True, None)


def test_the_causality_case_is_right_in_the_runners_order():
    from optcc.simulate import simulate
    s = tie_that_matters()
    assert simulate(s).correct
    cx = prove_allreduce(s).counterexamples["causality"]
    assert (cx["rank"], cx["piece"]) == (0, 0) and {f["flow"] for f in cx["flows"]} == {1, 2}


def test_the_capacity_case_names_the_port():
    cx = prove_allreduce(port_overload()).counterexamples["capacity"]
    assert cx["rank"] == 0 and cx["port"] == "nic recv" and cx["load"] == "2"


def _index_order(schedule, starts=None):
    return list(range(len(schedule.flows)))


def _slots_at_zero(users):
    for t in users:
        t.slot = 0
    return max((-(-t.length // 16) * 16 for t in users), default=0)


@pytest.mark.parametrize("patch,kind", [("posting_order", "pair order"), ("_assign_slots", "buffer")])
def test_runnable_refutes_a_lowering_bug_on_a_proved_schedule(monkeypatch, patch, kind):
    import optcc.lowering.step as plan
    s = two_way_pair() if patch == "posting_order" else two_at_once()
    assert prove_allreduce(s).proved and _runnable(s) == (True, None)
    monkeypatch.setattr(plan, patch, _index_order if patch == "posting_order" else _slots_at_zero)
    ok, cx = _runnable(s)
    assert not ok and cx["property"] == "runnable" and cx["kind"] == kind, cx
    torch = pytest.importorskip("torch")
    from gpu_runner.executor import Executor, RunnerError, run_virtual
    with pytest.raises(RunnerError, match="runnable"):
        run_virtual(s, [torch.zeros(64, dtype=torch.int64) for _ in range(s.cluster.p)])
    with pytest.raises(RunnerError, match="runnable"):
        Executor(s, cx["rank"]).plan(64)


def test_optcc_verify_lists_runnable_and_exits_1_on_each_case(tmp_path, capsys):
    import argparse

    from optcc_app.commands import verify
    for make, name in ((missing_flow, "sum"), (tie_that_matters, "causality"), (port_overload, "capacity")):
        path = str(tmp_path / f"{name}.json")
        make().save(path)
        rc = verify.run(argparse.Namespace(file=path, certificate=None, dtype="float32", json=False,
                                           by_rails=False))
        out = capsys.readouterr().out
        rows = {line.split()[0]: line.split()[1] for line in out.splitlines()
                if line.split() and line.split()[0] in (*PROPERTIES, "runnable")}
        assert rc == 1 and rows == {**{k: "proved" for k in (*PROPERTIES, "runnable")}, name: "REFUTED"}
