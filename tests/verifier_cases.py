"""Schedules and mutants shared by the verifier tests (not a test module itself)."""
from __future__ import annotations

from fractions import Fraction as F

from optcc.cluster import Cluster
from optcc.schedule import Flow, LocalOp, Schedule

FAMILIES = ("drop", "duplicate", "destination", "piece", "add<->copy", "earlier", "same-port")


def signed_p3() -> Schedule:
    """Multi-straggler style combination R1 + R2 − own partial (coef −1), p = 3, one piece."""
    c = Cluster.build(3)
    flows = [Flow(0, 1, 0, "add", F(0)), Flow(0, 2, 0, "add", F(1)), Flow(2, 1, 0, "add", F(2)),
             Flow(0, 1, 0, "add", F(3), coef=-1), Flow(1, 0, 0, "copy", F(4)), Flow(1, 2, 0, "copy", F(5))]
    return Schedule(c, [F(1)], flows, meta={"algorithm": "hand-signed-p3"})


def local_op_p2() -> Schedule:
    """Coefficient 2 and a local op ×(−1), p = 2, one piece."""
    c = Cluster.build(2)
    flows = [Flow(0, 1, 0, "add", F(0), coef=2), Flow(0, 1, 0, "add", F(1)), Flow(1, 0, 0, "copy", F(2))]
    return Schedule(c, [F(1)], flows, [LocalOp(0, 0, F(1), -1)], meta={"algorithm": "hand-local-op-p2"})


def _with(schedule: Schedule, flows) -> Schedule:
    return Schedule(schedule.cluster, schedule.pieces, flows, schedule.local_ops, schedule.meta)


def mutants(schedule: Schedule, durations):
    """Yield (family, description, mutant) for every mutant of every family."""
    flows = schedule.flows
    n, p, n_pieces = len(flows), schedule.cluster.p, len(schedule.pieces)
    ends = [f.start + d for f, d in zip(flows, durations)]
    for i, f in enumerate(flows):
        rest = flows[:i] + flows[i + 1:]
        yield "drop", f"drop {i}", _with(schedule, rest)
        yield "duplicate", f"duplicate {i}", _with(schedule, flows + [f])
        for d in range(p):
            if d not in (f.src, f.dst):
                yield "destination", f"{i} dst {d}", _with(schedule, flows[:i] + [f._replace(dst=d)] + flows[i + 1:])
        for q in range(n_pieces):
            if q != f.piece:
                yield "piece", f"{i} piece {q}", _with(schedule, flows[:i] + [f._replace(piece=q)] + flows[i + 1:])
        flipped = f._replace(op="copy", coef=1) if f.op == "add" else f._replace(op="add")
        yield "add<->copy", f"{i} flip", _with(schedule, flows[:i] + [flipped] + flows[i + 1:])
        starts = set()
        for w, g in enumerate(flows):                 # dependencies: writes to what i reads, landed by its start
            if (g.dst, g.piece) == (f.src, f.piece) and ends[w] <= f.start:
                for t in (g.start, (g.start + ends[w]) / 2):
                    if t < f.start:
                        starts.add(t)
        for t in sorted(starts):
            yield "earlier", f"{i} start {t}", _with(schedule, flows[:i] + [f._replace(start=t)] + flows[i + 1:])
    for i in range(n):
        for j in range(i + 1, n):
            a, b = flows[i], flows[j]
            if a.link != b.link or a.start == b.start:
                continue
            if a.src == b.src or a.dst == b.dst:
                yield "same-port", f"{j} start {a.start} (onto {i})", _with(
                    schedule, flows[:j] + [b._replace(start=a.start)] + flows[j + 1:])


def redundant_p3() -> Schedule:
    """Reduce to rank 0, copy out, then a redundant second copy 1→2: some mutants stay correct."""
    c = Cluster.build(3)
    flows = [Flow(1, 0, 0, "add", F(0)), Flow(2, 0, 0, "add", F(1)), Flow(0, 1, 0, "copy", F(2)),
             Flow(0, 2, 0, "copy", F(3)), Flow(1, 2, 0, "copy", F(4))]
    return Schedule(c, [F(1)], flows, meta={"algorithm": "hand-redundant-p3"})


def eager(schedule: Schedule) -> Schedule:
    """The same flows landing right after they start (rate 10^18): how a runner that completes
    each start time's batch before the next one executes the schedule. Only for optcc.simulate
    (the rate is outside the valid range on purpose)."""
    fast = F(10**18)
    return Schedule(schedule.cluster, schedule.pieces, [f._replace(rate=fast) for f in schedule.flows],
                    schedule.local_ops, schedule.meta)


def really_wrong(schedule: Schedule) -> tuple[bool, bool]:
    """Independent oracle: (wrong, wrong under the stated times with flow-index ties).

    Wrong = the reference simulation gives a wrong sum (2 seeds) under the stated times, with
    same-instant landings either in flow-index order (optcc.simulate) or in the runner's
    posting order (the flows renumbered by optcc.schedule.posting_order), or
    optcc.timing.check_capacity finds an over-full port. (The runner executes the stated
    times exactly: sends carry the value at their start, landings apply at their end; see
    verifier/causality.py. The earlier "eager landing" variant modelled a runner we do not have.)
    """
    from optcc.schedule import posting_order
    from optcc.simulate import simulate
    from optcc.timing import check_capacity
    stated = any(not simulate(schedule, seed=s).correct for s in (0, 1)) or check_capacity(schedule) is not None
    if stated:
        return True, True
    order = posting_order(schedule)
    runner = Schedule(schedule.cluster, schedule.pieces, [schedule.flows[i] for i in order],
                      schedule.local_ops, schedule.meta)
    return any(not simulate(runner, seed=s).correct for s in (0, 1)), False


def two_per_pair_p2():
    """p = 2, pieces 1/8, 3/8, 1/2: two flows 0->1 of different sizes and one 1->0 at t = 0, then back."""
    half = F(1, 2)
    flows = [Flow(0, 1, 0, "add", F(0), rate=half), Flow(0, 1, 1, "add", F(0), rate=half),
             Flow(1, 0, 2, "add", F(0)),
             Flow(1, 0, 0, "copy", F(3, 4), rate=half), Flow(1, 0, 1, "copy", F(3, 4), rate=half),
             Flow(0, 1, 2, "copy", F(3, 4))]
    return Schedule(Cluster.build(2), [F(1, 8), F(3, 8), F(1, 2)], flows)
