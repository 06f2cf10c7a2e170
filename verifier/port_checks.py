"""Property "capacity", and the posting-list rules R1-R3 behind "runnable".

capacity: delegated to optcc.timing.check_capacity (the one timing model; the schedule's
  meta["capacity"] picks "exclusive", the paper's rule, or "shared").
check_runnable: R1-R3 below on given posting lists. On the lists `runner_posts` derives from
  the schedule they hold for every validated schedule (durations are positive and the lists
  are posting_order itself), so this is no longer a proved property of prove_allreduce: the
  "runnable" property checks the runner's own programs (verifier.step_check). What the rules
  mean: the batched runner (optcc.lowering.step / executor) cannot deadlock or mis-pair data.
  The runner posts, on every rank, one batch_isend_irecv batch per distinct start time, in
  increasing time; inside a batch, in the global order (start, src, dst, piece, index)
  (optcc.schedule.posting_order, which the runner calls too), each flow is an isend on src and an
  irecv on dst of the piece's element range. Before posting batch t a rank only waits for
  flows that END at t. Checked here, on the posting lists the runner builds:
  R1 every flow is posted exactly once as a send on src and once as a receive on dst, and
     each rank posts its batches in increasing start time;
  R2 every flow ends strictly after it starts, so the data a rank waits for before posting
     batch t was posted in an earlier batch (no rank must receive, within one instant, a
     value it needs before it can post: a read at t sees landings at t, never starts at t);
  R3 for every pair of ranks {a, b}, the sequence of operations a posts with peer b (sends
     and receives, all batches) and the sequence b posts with peer a are the same flows in
     the same order, position by position: one side's send, the other's receive, in the same
     batch, of the same piece (hence the same element count for every tensor length; pieces
     too small to get an element are skipped by both ends alike).
  Why this suffices (docs/verifier.md has the argument): gloo and NCCL match point-to-point
  messages between two ranks in posting order (NCCL executes calls to one peer inside a
  group in order; other peers progress independently), so by R3 the k-th message of a pair
  is the same flow on both ends, any number of flows per pair per instant; by R1, R2 and
  induction on start time every batch is posted by both ends of each of its flows after
  everything it waits for completed. Several flows between one ordered pair at one start
  time are therefore allowed (g > 1 flat/hierarchical rings, R2CCL).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from optcc.schedule import posting_order
from optcc.timing import check_capacity

if TYPE_CHECKING:
    from optcc.schedule import Schedule
    from optcc.timing import IntegerTimes


def check_capacity_property(schedule: Schedule, grid: IntegerTimes) -> tuple[bool, dict[str, Any] | None]:
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


def runner_posts(schedule: Schedule, grid: IntegerTimes) -> list[list[int]]:
    """What each rank posts, in order: the global order filtered to the flows it sends or receives."""
    posts: list[list[int]] = [[] for _ in range(schedule.cluster.p)]
    flows = schedule.flows
    for i in posting_order(schedule, grid.starts):
        f = flows[i]
        posts[f.src].append(i)
        posts[f.dst].append(i)
    return posts


def _flow(schedule: Schedule, grid: IntegerTimes, i: int, rank: int) -> dict[str, Any]:
    f = schedule.flows[i]
    return {"flow": i, "src": f.src, "dst": f.dst, "piece": f.piece, "op": f.op,
            "start": str(grid.to_fraction(grid.starts[i])),
            "as": "send" if rank == f.src else "receive"}


def _fail(kind: str, rank: int, peer: int | None, time: str, flows: list[dict[str, Any]], message: str) -> tuple[bool, dict[str, Any] | None]:
    return False, {"property": "runnable", "kind": kind, "rank": rank, "peer": peer, "time": time,
                   "flows": flows, "message": message}


def check_runnable(schedule: Schedule, grid: IntegerTimes, posts: list[list[int]] | None = None) -> tuple[bool, dict[str, Any] | None]:
    """R1–R3 above on `posts` (default: the runner's lists, `runner_posts`); (ok, counterexample)."""
    flows, starts, ends = schedule.flows, grid.starts, grid.ends
    posts = runner_posts(schedule, grid) if posts is None else posts
    for i in range(len(flows)):                                          # R2
        if ends[i] <= starts[i]:
            f = flows[i]
            t = str(grid.to_fraction(starts[i]))
            return _fail("zero duration", f.dst, f.src, t, [_flow(schedule, grid, i, f.dst)],
                         f"flows[{i}] {f.src}->{f.dst} lands at its own start {t}: rank {f.dst} would "
                         f"wait for it before posting the batch that sends it")
    as_send = [0] * len(flows)
    as_recv = [0] * len(flows)
    by_pair: dict[tuple[int, int], list[int]] = {}
    for rank, seq in enumerate(posts):                                   # R1
        last = None
        for i in seq:
            f = flows[i]
            if rank == f.src:
                as_send[i] += 1
                peer = f.dst
            elif rank == f.dst:
                as_recv[i] += 1
                peer = f.src
            else:
                return _fail("posted by a stranger", rank, None, str(grid.to_fraction(starts[i])),
                             [_flow(schedule, grid, i, rank)],
                             f"rank {rank} posts flows[{i}] {f.src}->{f.dst}, which is not its own")
            if last is not None and starts[i] < starts[last]:
                t = str(grid.to_fraction(starts[i]))
                return _fail("batches out of time order", rank, peer, t,
                             [_flow(schedule, grid, last, rank), _flow(schedule, grid, i, rank)],
                             f"rank {rank} posts flows[{i}] (start {t}) after flows[{last}] (start "
                             f"{grid.to_fraction(starts[last])}): batches must go in increasing time")
            last = i
            by_pair.setdefault((rank, peer), []).append(i)
    for i, f in enumerate(flows):
        if as_send[i] != 1 or as_recv[i] != 1:
            t = str(grid.to_fraction(starts[i]))
            return _fail("unpaired flow", f.src if as_send[i] != 1 else f.dst, None, t,
                         [_flow(schedule, grid, i, f.src)],
                         f"flows[{i}] {f.src}->{f.dst} is posted {as_send[i]}× as a send on rank {f.src} "
                         f"and {as_recv[i]}× as a receive on rank {f.dst} (must be once each)")
    for (a, b), mine in by_pair.items():                                 # R3
        if a > b:
            continue
        theirs = by_pair.get((b, a), [])
        if mine == theirs:
            continue
        k = next((k for k, (x, y) in enumerate(zip(mine, theirs)) if x != y), min(len(mine), len(theirs)))
        x = mine[k] if k < len(mine) else None
        y = theirs[k] if k < len(theirs) else None
        shown = [_flow(schedule, grid, x, a)] if x is not None else []
        shown += [_flow(schedule, grid, y, b)] if y is not None else []
        at = x if x is not None else y
        assert at is not None                     # mine != theirs: one of them has an operation k
        t = str(grid.to_fraction(starts[at]))
        return _fail("pair order differs", a, b, t, shown,
                     f"operation {k} between ranks {a} and {b}: rank {a} posts "
                     f"{_describe(schedule, x, a)} but rank {b} posts {_describe(schedule, y, b)}: "
                     f"messages between one pair are matched in posting order, so these would be "
                     f"paired wrongly (or wait for each other)")
    return True, None


def _describe(schedule: Schedule, i: int | None, rank: int) -> str:
    if i is None:
        return "nothing more"
    f = schedule.flows[i]
    what = f"send to {f.dst}" if rank == f.src else f"receive from {f.src}"
    return f"flows[{i}] ({what}, piece {f.piece}, start {f.start})"
