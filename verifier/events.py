"""Per-piece event order on the integer time grid, and the rank-relabelled signature of a piece.

The one order every property uses, the order both runners execute (gpu_runner.plan, the
streaming program of verifier.streaming): at one instant landings (phase 0), then local ops
(phase 1), then reads (phase 2); landings of one instant in posting order
(optcc.schedule.posting_order: start, src, dst, piece, index); local ops and reads of one
instant by index (they commute: scalings of one value, and reads change nothing).
"""
from __future__ import annotations

from optcc.schedule import Schedule, posting_order
from optcc.timing import IntegerTimes

LAND, LOCAL, READ = 0, 1, 2


def piece_events(schedule: Schedule, grid: IntegerTimes) -> list[list[tuple[int, int, int]]]:
    """For every piece, its events (time, phase, index) sorted in execution order (module docstring)."""
    keyed: list[list] = [[] for _ in schedule.pieces]
    starts, ends, flows = grid.starts, grid.ends, schedule.flows
    for n, i in enumerate(posting_order(schedule, starts)):
        ev = keyed[flows[i].piece]
        ev.append((starts[i], READ, i, i))
        ev.append((ends[i], LAND, n, i))
    for j, op in enumerate(schedule.local_ops):
        keyed[op.piece].append((grid.op_times[j], LOCAL, j, j))
    events: list[list] = []
    for ev in keyed:
        ev.sort()
        events.append([(t, phase, i) for t, phase, _, i in ev])
    return events


def piece_signature(schedule: Schedule, events) -> tuple:
    """The piece's operations in execution order with ranks and flows renamed by first use.

    Two pieces with equal signatures compute the same final values up to a permutation of
    ranks, so the sum property holds for one exactly when it holds for the other (the
    property — every rank ends with Σ inputs — is symmetric under permuting ranks).
    Entries: (READ, src_label), (LAND, flow_label, dst_label, is_add, coef), (LOCAL, rank_label, coef).
    """
    flows, ops = schedule.flows, schedule.local_ops
    label: dict[int, int] = {}
    flow_label: dict[int, int] = {}
    out = []
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


def label_ranks(schedule: Schedule, events) -> list[int]:
    """Label -> rank, in the first-use order piece_signature assigns labels."""
    flows, ops = schedule.flows, schedule.local_ops
    order: dict[int, int] = {}
    for _, phase, i in events:
        rank = flows[i].src if phase == READ else flows[i].dst if phase == LAND else ops[i].rank
        order.setdefault(rank, len(order))
    return sorted(order, key=order.get)
