"""Digests of per-rank programs: what a certificate records of the programs the verifier proved,
and what a worker compares with the program it built before it runs it (no re-proof)."""
from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from optcc.lowering.streaming import Op, RankProgram, StreamingProgram
    from optcc.schedule import Schedule

FORMAT = "optcc-program/2"    # bump when RankProgram's fields, their meaning or the encoding change


def rank_program_sha256(rp: RankProgram) -> str:
    """sha256 of one streaming RankProgram: every op (kind, piece, flow, peer, slot, local op,
    deps in order), the per-peer posting sequences and the slot count, as the repr of tuples of
    ints, strings and None (one canonical text, about 4x faster to make than JSON: 600k ops at
    p = 4096 take ~2 s, benchmarks/scale.py)."""
    ops = [(op.kind, op.piece, op.flow, op.peer, op.slot, op.local, tuple(map(tuple, op.deps))) for op in rp.ops]
    seq = sorted((int(peer), tuple(idx)) for peer, idx in rp.peer_seq.items())
    text = repr((FORMAT, int(rp.rank), int(rp.n_slots), seq, ops))
    return hashlib.sha256(text.encode()).hexdigest()


def program_record(program: StreamingProgram) -> dict[str, Any]:
    """What a certificate stores of a proved StreamingProgram: its parameters and every rank's digest."""
    return {"format": FORMAT, "window": program.window, "recv_order": bool(program.recv_order),
            "ranks_sha256": [rank_program_sha256(rp) for rp in program.ranks]}


def localized_record(schedule: Schedule, program: StreamingProgram) -> dict[str, Any]:
    """program_record with each rank's flows numbered by that rank's own posting order (0, 1, …
    over the flows it sends or receives): the numbering of the program a rank builds from its
    part alone (optcc.generated.GeneratedSchedule.rank_schedule), so the digests compare."""
    from optcc.schedule import posting_order
    flows = schedule.flows
    mine: list[dict[int, int]] = [{} for _ in range(schedule.cluster.p)]
    for i in posting_order(schedule):
        f = flows[i]
        for r in (f.src, f.dst):
            mine[r][i] = len(mine[r])
    digests: list[str] = []
    for rp in program.ranks:
        local = mine[rp.rank]
        renumbered = type(rp)(rp.rank, [_renumber(op, local) for op in rp.ops], rp.peer_seq, rp.n_slots)
        digests.append(rank_program_sha256(renumbered))
    return {"format": FORMAT, "window": program.window, "recv_order": bool(program.recv_order),
            "numbering": "rank-local", "ranks_sha256": digests}


def _renumber(op: Op, local: dict[int, int]) -> Op:
    from dataclasses import replace
    return op if op.flow is None else replace(op, flow=local[op.flow])
