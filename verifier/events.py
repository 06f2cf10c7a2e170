"""Per-piece event order on the integer time grid, and the rank-relabelled signature of a piece.

The one order every property uses, the order both runners execute (optcc.lowering.step, the
streaming program of verifier.streaming): at one instant landings (phase 0), then local ops
(phase 1), then reads (phase 2); landings of one instant in posting order
(optcc.schedule.posting_order: start, src, dst, piece, index); local ops and reads of one
instant by index (they commute: scalings of one value, and reads change nothing).
"""
from __future__ import annotations

from optcc.schedule import Schedule
from optcc.timing import IntegerTimes

LAND, LOCAL, READ = 0, 1, 2


def piece_events(schedule: Schedule, grid: IntegerTimes) -> list[list[tuple[int, int, int]]]:
    """For every piece, its events (time, phase, index) sorted in execution order (module docstring)."""
    events: list[list[tuple[int, int, int]]] = [[] for _ in schedule.pieces]
    flows, starts, ends = schedule.flows, grid.starts, grid.ends
    for i, f in enumerate(flows):
        ev = events[f.piece]
        ev.append((starts[i], READ, i))
        ev.append((ends[i], LAND, i))
    for j, op in enumerate(schedule.local_ops):
        events[op.piece].append((grid.op_times[j], LOCAL, j))

    def posting(e: tuple[int, int, int]) -> tuple[int, int, int, int]:        # optcc.schedule.posting_order's key; the piece is the same
        i = e[2]
        return starts[i], flows[i].src, flows[i].dst, i

    for ev in events:
        ev.sort()
        k, n = 0, len(ev)
        while k < n:                  # landings of one instant: posting order, not index order
            if ev[k][1] != LAND or k + 1 == n or ev[k + 1][:2] != ev[k][:2]:
                k += 1
                continue
            m = k + 1
            while m < n and ev[m][:2] == ev[k][:2]:
                m += 1
            ev[k:m] = sorted(ev[k:m], key=posting)
            k = m
    return events


def piece_signature(schedule: Schedule, events: list[tuple[int, int, int]]) -> tuple[tuple[int, ...], ...]:
    """The piece's operations in execution order with ranks and flows renamed by first use.

    Two pieces with equal signatures compute the same final values up to a permutation of
    ranks, so the sum property holds for one exactly when it holds for the other (the
    property — every rank ends with Σ inputs — is symmetric under permuting ranks).
    Entries: (READ, src_label), (LAND, flow_label, dst_label, is_add, coef), (LOCAL, rank_label, coef).
    """
    flows, ops = schedule.flows, schedule.local_ops
    label: dict[int, int] = {}
    flow_label: dict[int, int] = {}
    out: list[tuple[int, ...]] = []
    for _, phase, i in events:
        if phase == READ:
            src = flows[i].src
            a = label.get(src)
            if a is None:
                a = label[src] = len(label)
            flow_label[i] = len(flow_label)
            out.append((READ, a))
        elif phase == LAND:
            f = flows[i]
            b = label.get(f.dst)
            if b is None:
                b = label[f.dst] = len(label)
            out.append((LAND, flow_label[i], b, f.op == "add", f.coef))
        else:
            op = ops[i]
            a = label.get(op.rank)
            if a is None:
                a = label[op.rank] = len(label)
            out.append((LOCAL, a, op.coef))
    return tuple(out)


def label_ranks(schedule: Schedule, events: list[tuple[int, int, int]]) -> list[int]:
    """Label -> rank, in the first-use order piece_signature assigns labels."""
    flows, ops = schedule.flows, schedule.local_ops
    order: dict[int, int] = {}
    for _, phase, i in events:
        rank = flows[i].src if phase == READ else flows[i].dst if phase == LAND else ops[i].rank
        order.setdefault(rank, len(order))
    return sorted(order, key=order.__getitem__)
