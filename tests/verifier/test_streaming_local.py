"""The vectorised per-rank check (verifier.streaming_local) against the plain one it replaces
(tests/streaming_local_reference.py): the same result, verdict, kind and message, on every
registry program and on random mutants that break each of L1-L5."""
from __future__ import annotations

import copy
import random
from fractions import Fraction

import pytest
import streaming_local_reference as reference
from streaming_cases import random_schedule, signed_schedule, snapshot_schedule
from verifier_cases import local_op_p2

from optcc.algorithms import algorithm_names, build_schedule
from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.lowering.streaming import streaming_program
from verifier.streaming_local import check_rank_program

CLUSTERS = (Cluster.build(5, 1, {1: Fraction(3, 2)}), Cluster.build(8, 2, {2: 2, 3: 2}),
            Cluster.build(6, 1, {0: 2, 3: 3}),
            Cluster.build(12, 4, {r: 2 for r in range(4)}, latency_model="simai"))   # few_servers


def _programs():
    for algo in algorithm_names():
        for c in CLUSTERS:
            try:
                s = build_schedule(algo, c, 2)
            except OptccError:
                continue
            for ordered in (False, True):
                yield algo, s, streaming_program(s, 4, recv_order=ordered)
    rng = random.Random(7)                                    # local ops (scale), and relabelled ranks
    for s in [signed_schedule(), local_op_p2(), snapshot_schedule()] + [random_schedule(rng) for _ in range(12)]:
        yield s.meta.get("algorithm"), s, streaming_program(s, 4)


@pytest.mark.parametrize("row", [16, 0])
def test_every_registry_program_gets_the_same_result_from_both_checks(row, monkeypatch):
    """`row`: the most dependencies per op answered from a table (0: always by the sorted codes)."""
    import verifier.streaming_local as V
    monkeypatch.setattr(V, "_ROW", row)
    checked = scales = snaps = 0
    for algo, s, prog in _programs():
        for rp in prog.ranks:
            assert check_rank_program(s, rp, 4) == reference.check_rank_program(s, rp, 4) is None, (algo, rp.rank)
            scales += sum(op.kind == "scale" for op in rp.ops)
            snaps += sum(op.kind == "snap" for op in rp.ops)
            checked += 1
    assert checked > 190 and scales >= 2 and snaps >= 1


def _mutate(rng, prog, s):
    """One random edit of one rank's program: an L1-L5 condition is likely broken (or not)."""
    rp = rng.choice(prog.ranks)
    ops, n = rp.ops, rng.randrange(len(rp.ops))
    op, kind = ops[n], rng.randrange(16)
    if kind == 0 and op.deps:
        op.deps.pop(rng.randrange(len(op.deps)))
    elif kind == 1 and n + 1 < len(ops):                 # swap two neighbours, renumbering everything
        ops[n], ops[n + 1] = ops[n + 1], ops[n]
        mp = {n: n + 1, n + 1: n}
        for o in ops:
            o.deps = [(mp.get(m, m), ev) for m, ev in o.deps]
        for q, seq in rp.peer_seq.items():
            rp.peer_seq[q] = [mp.get(x, x) for x in seq]
    elif kind == 2 and op.slot is not None:
        op.slot = (op.slot + rng.choice([1, -1])) % max(1, rp.n_slots)
    elif kind == 3 and op.deps and n > 0:
        op.deps[rng.randrange(len(op.deps))] = (rng.randrange(n), "S")
    elif kind == 4 and op.deps:
        m, ev = op.deps[0]
        op.deps[0] = (m, "S" if ev == "C" else ("C" if ops[m].kind in ("send", "recv") else "S"))
    elif kind == 5:
        op.kind = rng.choice(["send", "recv", "snap", "land", "scale", "copy"])
    elif kind == 6:
        op.piece = rng.choice([op.piece + 1, op.piece - 1, None])
    elif kind == 7:
        op.peer = rng.choice([None, (op.peer or 0) + 1, rp.rank])
    elif kind == 8 and op.flow is not None:
        op.flow = rng.choice([op.flow + 1, op.flow - 1, len(s.flows), -1, None, float(op.flow)])
    elif kind == 9:
        op.local = rng.choice([None, 0, 1, len(s.local_ops)])
    elif kind == 10 and rp.peer_seq:                     # a posting list edited
        q = rng.choice(list(rp.peer_seq))
        seq = rp.peer_seq[q]
        how = rng.randrange(4)
        if how == 0 and len(seq) > 1:
            i = rng.randrange(len(seq) - 1)
            seq[i], seq[i + 1] = seq[i + 1], seq[i]
        elif how == 1:
            seq.pop(rng.randrange(len(seq)))
        elif how == 2:
            rp.peer_seq[q + 100] = rp.peer_seq.pop(q)
        else:
            seq.append(n)
    elif kind == 11:                                     # a dependency on a later op or a bad event
        op.deps.append(rng.choice([(n, "S"), (n + 1, "S"), (-1, "S"), (0, "X"), (max(n - 1, 0), "C"), (1.0, "S")]))
    elif kind == 12:                                     # an op dropped (indices after it shift)
        del ops[n]
        for o in ops:
            o.deps = [(m - (m > n), ev) for m, ev in o.deps if m != n]
        for q in list(rp.peer_seq):
            rp.peer_seq[q] = [x - (x > n) for x in rp.peer_seq[q] if x != n]
            if not rp.peer_seq[q]:
                del rp.peer_seq[q]
    elif kind == 13:                                     # an op twice
        ops.append(copy.deepcopy(op))
    elif kind == 14 and op.kind in ("snap", "send", "recv", "land"):
        op.slot = None if op.slot is not None else 0
    elif kind == 15 and op.deps:                         # a dependency swapped for an extra direct one
        op.deps = op.deps[1:] + [op.deps[0]]
    return rp


@pytest.mark.parametrize("seed", range(4))
def test_both_checks_give_the_same_result_on_mutants(seed):
    rng = random.Random(seed)
    cases = [("optcc", Cluster.build(5, 1, {1: Fraction(3, 2)})), ("ring", Cluster.build(4, 1, {0: 2})),
             ("optcc", Cluster.build(6, 1, {2: 2})), ("direct", Cluster.build(5, 1, {0: 2})),
             ("optcc_multi", Cluster.build(6, 1, {0: 2, 3: 3})), ("signed", None), ("local_op_p2", None),
             ("snapshot", None)]
    kinds = {}
    for algo, c in cases:
        hand = {"signed": signed_schedule, "local_op_p2": local_op_p2, "snapshot": snapshot_schedule}
        s = hand[algo]() if c is None else build_schedule(algo, c, 2)
        base = streaming_program(s, 2, recv_order=seed % 2 == 1)
        for _ in range(150):
            prog = copy.deepcopy(base)
            rp = _mutate(rng, prog, s)
            for window in (2, 3):
                want = reference.check_rank_program(s, rp, window)
                assert check_rank_program(s, rp, window) == want, (algo, rp.rank, window)
                kinds[want and want["kind"]] = kinds.get(want and want["kind"], 0) + 1
    assert kinds.get(None, 0) >= 100
    # ("pair order" cannot fail once "order" holds: a post's κ is (its start, 3, K), K starting with its start)
    assert {"structure", "order", "bad dependency", "posting order", "window", "RAW"} <= set(kinds), kinds


def test_a_large_rank_program_gets_the_same_result_from_both_checks():
    """p = 64, k = 5 OptCC: a healthy rank and the straggler, and each with its window's completion
    dependencies dropped (the healthy rank's window then fails; the straggler's other
    dependencies still imply it)."""
    from optcc.generated import GeneratedSchedule
    from optcc.lowering.streaming import rank_program
    gen = GeneratedSchedule.of("optcc", Cluster.build(64, 1, {0: Fraction(2)}), 5)
    got = {}
    for rank in (0, 1):
        part = gen.rank_schedule(rank)
        rp = rank_program(part, rank, 4)
        assert check_rank_program(part, rp, 4) is None is reference.check_rank_program(part, rp, 4)
        for seq in rp.peer_seq.values():
            for n in seq[4:]:
                rp.ops[n].deps = [d for d in rp.ops[n].deps if d[1] != "C"]
        got[rank] = check_rank_program(part, rp, 4)
        assert got[rank] == reference.check_rank_program(part, rp, 4)
    assert got[0] is None and got[1]["kind"] == "window"
