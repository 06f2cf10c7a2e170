"""verifier.parametric.streaming_order: the D step of the per-rank order argument, in Z3 (every
obligation proved, every control refuted with a counterexample), and on real programs: every edge
verifier.streaming_check builds its progress graph from increases the event key that the proof
models, and a program the whole check finds a deadlock in has an edge that does not."""
from __future__ import annotations

import copy
import random

import pytest
from streaming_cases import random_schedule, signed_schedule, snapshot_schedule
from verifier_cases import local_op_p2

from optcc.algorithms import build_schedule
from optcc.cluster import Cluster
from optcc.lowering.streaming import streaming_program
from optcc.timing import IntegerTimes
from verifier.parametric.obligations import discharge
from verifier.parametric.prove import prove_all
from verifier.parametric.streaming_order import PROPERTY, SEND_CLASS, obligations
from verifier.streaming_check import EDGE_KINDS, _structure, check_streaming, progress_edges

CLASS = {"send": SEND_CLASS, "recv": SEND_CLASS, "snap": 2, "land": 0, "scale": 1}


def test_every_step_is_proved():
    results = [discharge(ob) for ob in obligations()]
    assert len(results) == 7 and {r["status"] for r in results} == {"proved"}


def test_every_control_is_refuted_with_a_counterexample():
    results = [discharge(ob) for ob in obligations(controls=True)]
    assert len(results) == 3 and all(r["status"] == "refuted" and r.get("counterexample") for r in results), results


@pytest.mark.parametrize("algo", ["ring", "optcc"])
def test_prove_all_shows_the_property(algo):
    res = prove_all(algo)
    assert res["properties"][PROPERTY] == "proved" and res["proved"]


def _key(schedule, grid, program):
    """(rank, op index, "S" | "C") -> (κ, e), κ = (time, class, K) of verifier.streaming_local."""
    def kappa(op):
        if op.kind == "scale":
            return (grid.op_times[op.local], CLASS["scale"], op.local, 0, 0, 0)
        f = schedule.flows[op.flow]
        start = grid.starts[op.flow]
        K = (start, f.src, f.dst, f.piece)
        return (grid.ends[op.flow] if op.kind == "land" else start, CLASS[op.kind], *K)
    keys = [[kappa(op) for op in rp.ops] for rp in program.ranks]
    return lambda r, n, ev: (*keys[r][n], 1 if ev == "C" else 0)


def _edges(schedule, program):
    checked = _structure(schedule, program)
    assert checked[0], checked
    key = _key(schedule, IntegerTimes(schedule), program)
    return [(kind, key(*v), key(*u)) for kind, v, u in progress_edges(schedule, program, checked[2])]


def _programs():
    cases = [build_schedule("ring", Cluster.build(5), 2), build_schedule("optcc", Cluster.build(6, stragglers={2: 2}), 3),
             build_schedule("optcc", Cluster.build(7, stragglers={0: 3, 4: 2}), 2),
             build_schedule("optcc", Cluster.build(8, 2, {2: 2, 3: 2}), 2),
             signed_schedule(), local_op_p2(), snapshot_schedule()]
    rng = random.Random(11)
    cases += [random_schedule(rng) for _ in range(10)]
    for s in cases:
        for window in (1, 4):
            for ordered in (False, True):
                yield s, streaming_program(s, window, recv_order=ordered)


def test_every_progress_edge_of_real_programs_increases_the_key():
    seen = set()
    for schedule, program in _programs():
        for kind, later, earlier in _edges(schedule, program):
            assert earlier < later, (kind, earlier, later)
            seen.add(kind)
    assert seen == set(EDGE_KINDS)


def test_a_deadlocked_program_has_an_edge_that_does_not_increase_the_key():
    schedule = build_schedule("optcc", Cluster.build(5, stragglers={0: 2}), 2)
    program = copy.deepcopy(streaming_program(schedule, 4))
    ops = program.ranks[1].ops
    first_post = next(n for n, op in enumerate(ops) if op.kind in ("send", "recv"))
    ops[first_post].deps.append((len(ops) - 1, "S"))      # wait for the rank's last op, which waits for it
    ok, cx = check_streaming(schedule, program)
    assert not ok and cx["kind"] == "deadlock"
    bad = [kind for kind, later, earlier in _edges(schedule, program) if not earlier < later]
    assert bad == ["dependency"]


@pytest.mark.parametrize("name,change", [("post", {"waits": "S", "on": "C"}),
                                         ("dependency", {"relation": "itself"}),
                                         ("send after recv posted", {"waits": "S"})])
def test_a_changed_checker_edge_changes_the_proof(name, change, monkeypatch):
    """The obligations are stated from the checker's own EdgeKind table: an edge kind changed in
    the checker is an edge kind whose obligation is refuted (and, where it is wrong, an edge of a
    real program that no longer increases the key)."""
    from verifier import streaming_check as SC
    from verifier.parametric.obligations import discharge as run
    monkeypatch.setitem(SC.EDGE_KIND, name, SC.EDGE_KIND[name]._replace(**change))
    got = [run(ob) for ob in obligations() if ob.name.startswith(name + ":")]
    assert len(got) == 1 and got[0]["status"] == "refuted", got
