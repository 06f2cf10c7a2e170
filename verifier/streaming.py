"""Property "streaming": the streaming runner's program is safe for every interleaving it allows.

The streaming runner (gpu_runner.streaming) has no per-time barrier. Each rank runs the program
optcc.lowering.streaming.streaming_program builds: ops `recv` (post irecv into a scratch slot), `send` (post isend of
the piece, or of its snapshot slot), `snap` (copy the piece into a slot), `land` (add/copy the
received slot into the piece) and `scale` (a LocalOp). An op starts (event S) as soon as its
`deps` have happened (each dep is an earlier op's start S or a post's completion C); a post
completes (C) when the transport says so. Rules the deps encode: a send reads the piece after
its last write in schedule order; a write waits for that write and for every read since it
(a direct send until it completed); a slot is reused only after its previous user finished;
posts with one peer go in optcc.schedule.posting_order, at most `window` of them in flight.

`check_streaming` checks the program against the schedule, independently of how it was built:
  M  matching: every flow is one send on src, one recv and one land on dst; each rank's posts
     with a peer are chained in posting order and mirror the peer's list position by position;
     post k waits for completion of post k - window (bounded in-flight messages).
  H  hazards: for every rank and buffer (a piece of the tensor, a scratch slot), every pair of
     conflicting accesses (one a write) in schedule order (time, landings < local ops < reads,
     posting order) is ordered by a happens-before path (RAW, WAR, WAW), in the graph of
     edges that hold in every execution: deps, S -> C of a post, completions of one pair
     observed in posting order, and a receive completing only after its send was posted.
  D  no deadlock: the graph above plus "a send completes only after its receive was posted"
     (the strictest transport: rendezvous, FIFO per pair, as NCCL's per-pair stream) is
     acyclic. Every condition is a conjunction of events that stay true (monotone), and the
     runner never blocks while an op is enabled, so acyclic means every event happens in
     every execution, and in any transport that completes messages no later than this one
     (gloo's buffered sends, unordered directions). docs/verifier.md, "streaming".
Then every execution computes what the schedule's sequential semantics computes.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from optcc.lowering.streaming import DEFAULT_WINDOW, StreamingProgram, check_window, streaming_program
from optcc.timing import IntegerTimes

if TYPE_CHECKING:
    from optcc.schedule import Schedule


def prove_streaming(schedule: Schedule, window: int = DEFAULT_WINDOW, recv_order: bool = False) -> tuple[StreamingProgram | None, dict[str, Any] | None]:
    """(program, counterexample or None): build the streaming program and check M, H, D on it."""
    from verifier.streaming_check import check_streaming
    check_window(window)
    schedule.validate()
    grid = IntegerTimes(schedule)
    for i, (s, e) in enumerate(zip(grid.starts, grid.ends)):
        if e <= s:
            f = schedule.flows[i]
            return None, {"property": "streaming", "kind": "zero duration", "rank": f.dst,
                          "message": f"flows[{i}] {f.src}->{f.dst} lands at its own start"}
    program = streaming_program(schedule, window, grid, recv_order=recv_order)
    ok, cx = check_streaming(schedule, program, grid)
    return program, cx
