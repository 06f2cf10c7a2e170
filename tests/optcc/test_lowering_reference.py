"""The streaming lowering (optcc.lowering.streaming) against the plain one it replaces
(tests/lowering_streaming_reference.py): the same program, op for op (kind, piece, flow, peer,
slot, local op, dependencies in order), posting lists and slot count, on registry schedules,
random relabelled ones, hand-made ones with local ops and generated ranks' parts, for every
window, port order and receive order."""
from __future__ import annotations

import random
from fractions import Fraction

import lowering_streaming_reference as reference
import pytest
from streaming_cases import random_schedule, signed_schedule, snapshot_schedule
from verifier_cases import local_op_p2

from optcc.algorithms import algorithm_names, build_schedule
from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.generated import GeneratedSchedule
from optcc.lowering.streaming import rank_program, streaming_program


def _shape(rp):
    return ([(op.kind, op.piece, op.flow, op.peer, op.slot, op.local, list(op.deps)) for op in rp.ops],
            {q: list(s) for q, s in rp.peer_seq.items()}, rp.n_slots, rp.rank)


def _schedules():
    for algo in algorithm_names():
        for c in (Cluster.build(5, 1, {1: Fraction(3, 2)}), Cluster.build(8, 2, {2: 2, 3: 2})):
            try:
                yield build_schedule(algo, c, 2)
            except OptccError:
                continue
    rng = random.Random(3)
    yield from [signed_schedule(), local_op_p2(), snapshot_schedule()] + [random_schedule(rng) for _ in range(10)]


@pytest.mark.parametrize("window, port_order, recv_order", [(4, True, False), (1, True, True), (2, False, False),
                                                             (3, False, True)])
def test_the_lowering_is_the_reference_lowering(window, port_order, recv_order):
    ops = snaps = 0
    for s in _schedules():
        new = streaming_program(s, window, port_order=port_order, recv_order=recv_order)
        old = reference.streaming_program(s, window, port_order=port_order, recv_order=recv_order)
        for a, b in zip(new.ranks, old.ranks, strict=True):
            assert _shape(a) == _shape(b), (s.meta.get("algorithm"), a.rank)
            ops += len(a.ops)
            snaps += sum(op.kind == "snap" for op in a.ops)
        r = len(new.ranks) - 1
        assert _shape(rank_program(s, r, window, recv_order, port_order=port_order)) == _shape(new.ranks[r])
    assert ops > 4000 and snaps >= 1


def test_a_generated_rank_part_lowers_as_the_reference_does():
    gen = GeneratedSchedule.of("optcc", Cluster.build(48, 1, {3: Fraction(5, 2)}), 4)
    for rank in (3, 0, 17):
        part = gen.rank_schedule(rank)
        assert _shape(rank_program(part, rank, 4)) == _shape(reference.rank_program(part, rank, 4))
