"""Properties "capacity" and "runnable" (both about what happens on ports at one time).

capacity: delegated to optcc.timing.check_capacity (the one timing model; the schedule's
  meta["capacity"] picks "exclusive", the paper's rule, or "shared").
runnable: the runner turns every distinct start time into one batch of isend/irecv calls,
  every rank walking the same global list of start times. Each flow is one isend on src and
  one irecv on dst in the batch of its start, so sends and receives always exist in pairs;
  what can still go wrong is matching: point-to-point messages between two ranks are matched
  by (peer, issue order) with no tags (NCCL), so two messages src→dst in one batch could be
  paired with the wrong receive (different piece, different size) and hang or corrupt. We
  check: for every start time t and ordered pair (src, dst), at most one flow src→dst starts
  at t — the pairing is then one to one. Given that, batch t on every rank only waits for
  peers' batch-t operations, which every rank posts after finishing batches < t, so by
  induction on t no batch can deadlock.
"""
from __future__ import annotations

from optcc.timing import check_capacity


def check_capacity_property(schedule, grid):
    violation = check_capacity(schedule, grid=grid)
    if violation is None:
        return True, None
    rank, link, direction = violation.port
    flows = []
    for i in violation.flows:
        f = schedule.flows[i]
        flows.append({"flow": i, "src": f.src, "dst": f.dst, "piece": f.piece, "op": f.op,
                      "start": str(grid.to_fraction(grid.starts[i])), "end": str(grid.to_fraction(grid.ends[i])),
                      "rate": str(f.rate)})
    return False, {"property": "capacity", "rank": rank, "port": f"{link} {direction}",
                   "time": str(violation.time), "load": str(violation.load), "flows": flows,
                   "message": violation.describe(schedule)}


def check_runnable(schedule, grid):
    seen: dict[tuple, int] = {}
    starts = grid.starts
    for i, f in enumerate(schedule.flows):
        key = (starts[i], f.src, f.dst)
        j = seen.get(key)
        if j is None:
            seen[key] = i
            continue
        g = schedule.flows[j]
        t = grid.to_fraction(starts[i])
        return False, {
            "property": "runnable", "rank": f.src, "peer": f.dst, "time": str(t),
            "flows": [{"flow": j, "piece": g.piece, "op": g.op}, {"flow": i, "piece": f.piece, "op": f.op}],
            "message": f"flows[{j}] (piece {g.piece}) and flows[{i}] (piece {f.piece}) both go "
                       f"{f.src}->{f.dst} in the batch starting at {t}: the receives cannot be "
                       f"matched one to one",
        }
    return True, None
