"""CP-SAT: the optimal timing of a given flow set (e.g. OptCC's), keeping what every flow reads.

Every flow becomes an interval of its fixed duration (optcc.timing.durations); ports get a
no-overlap (rate-1 flows under the exclusive rule) or a cumulative constraint (capacity 1 in
port usage, optcc.timing.port_usage); data dependencies become precedences. For every
(rank, piece), the order between each write (a flow landing there, a local op) and each read
(a flow leaving from there) is kept as in the given schedule, and so is the order between
writes that do not commute (copies, local ops). Reads therefore see the same linear
combinations as before, so a retimed schedule is correct iff the given one is. The given
timing is feasible, so it is the starting hint and the horizon; minimize the makespan.
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from fractions import Fraction

from optcc.schedule import Schedule
from optcc.timing import IntegerTimes, capacity_model, durations, port_usage, slot_time
from lp_models.result import SolveResult, run_cp_sat

DEFAULT_TIME_LIMIT_S = 30.0


@dataclass
class TimingResult(SolveResult):
    """`objective`: best makespan found (n/B); `given_time`: the schedule's own slot time."""

    given_time: float | None = None
    given_time_exact: Fraction | None = None
    best_time_exact: Fraction | None = None
    schedule: Schedule | None = None          # the retimed schedule (best found)

    @property
    def given_is_optimal(self) -> bool | None:
        """True/False when proven; None when the solver stopped before proving optimality."""
        if self.best_time_exact is None:
            return None
        if self.best_time_exact < self.given_time_exact:
            return False
        return True if self.optimal else None

    @property
    def excess(self) -> float | None:
        """How much slower the given timing is than the best found: given/best − 1."""
        if self.best_time_exact is None:
            return None
        return float(self.given_time_exact / self.best_time_exact) - 1


def optimal_timing(schedule: Schedule, time_limit_s: float = DEFAULT_TIME_LIMIT_S,
                   workers: int = 2) -> TimingResult:
    """Re-time `schedule`'s flows optimally (CP-SAT); report status, bound and the gap."""
    from ortools.sat.python import cp_model

    schedule.validate()
    model_name = capacity_model(schedule)
    durs = durations(schedule)
    grid = IntegerTimes(schedule, durs)
    flows, ops = schedule.flows, schedule.local_ops
    horizon = max(grid.ends + grid.op_times, default=0)
    given = slot_time(schedule, grid)
    m = cp_model.CpModel()
    starts = []
    intervals = []
    for i, f in enumerate(flows):
        s = m.NewIntVar(0, horizon - grid.durs[i], f"s{i}")
        m.AddHint(s, grid.starts[i])
        starts.append(s)
        intervals.append(m.NewFixedSizeIntervalVar(s, grid.durs[i], f"iv{i}"))
    op_times = []
    for j, op in enumerate(ops):
        v = m.NewIntVar(0, horizon, f"op{j}")
        m.AddHint(v, grid.op_times[j])
        op_times.append(v)

    # ports
    by_port = defaultdict(list)
    for i, f in enumerate(flows):
        by_port[(f.src, f.link, "send")].append(i)
        by_port[(f.dst, f.link, "recv")].append(i)
    for port, idx in by_port.items():
        usage = [port_usage(schedule, flows[i], port[0], model_name) for i in idx]
        if all(u == 1 for u in usage):
            m.AddNoOverlap([intervals[i] for i in idx])
        else:
            den = math.lcm(*(u.denominator for u in usage))
            m.AddCumulative([intervals[i] for i in idx], [int(u * den) for u in usage], den)

    # data dependencies: events on (rank, piece)
    events = defaultdict(list)      # (rank, piece) -> [(kind, index, given time)]
    for i, f in enumerate(flows):
        events[(f.dst, f.piece)].append(("copy" if f.op == "copy" else "add", i, grid.ends[i]))
        events[(f.src, f.piece)].append(("read", i, grid.starts[i]))
    for j, op in enumerate(ops):
        events[(op.rank, op.piece)].append(("op", j, grid.op_times[j]))

    def when(kind, idx):
        if kind == "read":
            return starts[idx]
        if kind == "op":
            return op_times[idx]
        return starts[idx] + grid.durs[idx]

    order = {"add": 0, "copy": 0, "op": 1, "read": 2}      # same instant: landings, ops, reads
    for evs in events.values():
        writes = [e for e in evs if e[0] != "read"]
        reads = [e for e in evs if e[0] == "read"]
        for w in writes:
            for r in reads:
                _keep_order(m, w, r, when, order)
        for a in range(len(writes)):
            for b in range(a + 1, len(writes)):
                w1, w2 = writes[a], writes[b]
                if w1[0] == "add" and w2[0] == "add":
                    continue                      # additions commute
                _keep_order(m, w1, w2, when, order)

    makespan = m.NewIntVar(0, horizon, "makespan")
    for i in range(len(flows)):
        m.Add(makespan >= starts[i] + grid.durs[i])
    for v in op_times:
        m.Add(makespan >= v)
    m.Minimize(makespan)

    solver, code, seconds = run_cp_sat(m, time_limit_s, workers)
    status = solver.StatusName(code)
    res = TimingResult(status=status, objective=None, solver="cp-sat", seconds=seconds,
                       time_limit_s=time_limit_s, given_time=float(given), given_time_exact=given)
    if code in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        best = Fraction(int(solver.ObjectiveValue()), grid.scale)
        res.best_time_exact = best
        res.objective = float(best)
        res.best_bound = float(Fraction(int(math.ceil(solver.BestObjectiveBound() - 1e-9)), grid.scale))
        new_flows = [f._replace(start=Fraction(solver.Value(starts[i]), grid.scale)) for i, f in enumerate(flows)]
        new_ops = [op._replace(time=Fraction(solver.Value(op_times[j]), grid.scale)) for j, op in enumerate(ops)]
        meta = dict(schedule.meta, retimed_by="cp-sat", retime_status=status)
        res.schedule = Schedule(schedule.cluster, schedule.pieces, new_flows, new_ops, meta)
    return res


def _keep_order(m, e1, e2, when, order):
    """Keep events e1, e2 on one (rank, piece) in their given order (ties by instant semantics)."""
    (k1, _i1, t1), (k2, _i2, t2) = e1, e2
    first, second = (e1, e2) if (t1, order[k1]) <= (t2, order[k2]) else (e2, e1)
    a, b = when(first[0], first[1]), when(second[0], second[1])
    if first[2] == second[2] and order[first[0]] == order[second[0]]:
        m.Add(a == b)                   # same instant, same phase: keep them together
    elif order[first[0]] < order[second[0]]:
        m.Add(a <= b)                   # a landing/op before a later-phase event may share its instant
    else:
        m.Add(a + 1 <= b)               # e.g. a read before a landing: the landing must stay strictly later
