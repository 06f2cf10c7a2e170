"""The streaming lowering (optcc.lowering.streaming) written plainly: one Python pass over the
schedule's flows per rank, a tuple sort, the dependency walk with a backward search for each
snapshot. The reference that the columnar lowering is compared with (the same programs, op for
op, tests/optcc/test_lowering_reference.py); the product does not use it."""
from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass, field

from optcc.errors import OptccError
from optcc.schedule import posting_order
from optcc.timing import IntegerTimes

DEFAULT_WINDOW = 4          # derived: messages in flight per peer (docs/gpu_runner.md, "streaming")
SLOT_SPARE = 1              # derived: one scratch slot beyond the schedule's need (measured, docs/gpu_runner.md)
PORT_ORDER = True           # derived: a rank's sends wait for the sends the schedule finishes before them (docs/gpu_runner.md)
KINDS = ("recv", "send", "snap", "land", "scale")


@dataclass
class Op:
    kind: str
    piece: int
    flow: int | None = None        # flow index (all but scale)
    peer: int | None = None        # send / recv
    slot: int | None = None        # recv, land: target slot; snap and snapshot send: source slot
    local: int | None = None       # scale: index in schedule.local_ops
    deps: list = field(default_factory=list)   # [(op index, "S" | "C")]


@dataclass
class RankProgram:
    rank: int
    ops: list                      # in priority order (schedule order); the runner prefers low indices
    peer_seq: dict                 # peer -> op indices of its posts, in posting order
    n_slots: int


@dataclass
class StreamingProgram:
    window: int
    ranks: list
    recv_order: bool = False       # receives wait for the previous receive on their link


def _snapshotted(grid, flow: int, write_times) -> bool:
    """The step runner's rule too (optcc.lowering.step): snapshot when the piece changes while in flight."""
    return any(grid.starts[flow] < t < grid.ends[flow] for t in write_times)


class _Lowering:
    """What every rank's program needs of the whole schedule, computed once."""

    def __init__(self, schedule, grid: IntegerTimes | None):
        self.schedule = schedule
        self.grid = grid = grid or IntegerTimes(schedule)
        self.order = posting_order(schedule, grid.starts)
        self.pos = {i: n for n, i in enumerate(self.order)}
        self.links = [f.link for f in schedule.flows]
        self.writes: dict = defaultdict(list)         # (rank, piece) -> times it is written
        for i, f in enumerate(schedule.flows):
            self.writes[(f.dst, f.piece)].append(grid.ends[i])
        for j, op in enumerate(schedule.local_ops):
            self.writes[(op.rank, op.piece)].append(grid.op_times[j])

    def rank(self, r: int, window: int, port_order: bool, recv_order: bool) -> RankProgram:
        schedule, grid, pos = self.schedule, self.grid, self.pos
        flows, starts, ends = schedule.flows, grid.starts, grid.ends
        items = []                                  # (key, Op)
        slot_users = []                             # (start, end, flow) needing a slot
        for i in self.order:
            f = flows[i]
            if f.dst == r:
                items.append(((starts[i], 3, pos[i]), Op("recv", f.piece, i, f.src)))
                items.append(((ends[i], 0, pos[i]), Op("land", f.piece, i)))
                slot_users.append((starts[i], ends[i], i))
            elif f.src == r:
                items.append(((starts[i], 3, pos[i]), Op("send", f.piece, i, f.dst)))
                if _snapshotted(grid, i, self.writes.get((r, f.piece), ())):
                    items.append(((starts[i], 2, pos[i]), Op("snap", f.piece, i)))
                    slot_users.append((starts[i], ends[i], i))
        for j, op in enumerate(schedule.local_ops):
            if op.rank == r:
                items.append(((grid.op_times[j], 1, j), Op("scale", op.piece, local=j)))
        items.sort(key=lambda kv: kv[0])
        ops = [op for _, op in items]
        slot_of, n_slots = _color(slot_users)
        times = (starts, ends, self.links) if port_order or recv_order else None
        return _link(r, ops, slot_of, n_slots, window, times, recv_order, port_order)


def check_window(window: int) -> None:
    if window < 1:
        raise OptccError("window", f"expected at least 1 message in flight per peer, got {window}")


def streaming_program(schedule, window: int = DEFAULT_WINDOW, grid: IntegerTimes | None = None,
                      port_order: bool = PORT_ORDER, recv_order: bool = False) -> StreamingProgram:
    """Every rank's streaming program."""
    check_window(window)
    lowering = _Lowering(schedule, grid)
    ranks = [lowering.rank(r, window, port_order, recv_order) for r in range(schedule.cluster.p)]
    return StreamingProgram(window, ranks, recv_order)


def rank_program(schedule, rank: int, window: int = DEFAULT_WINDOW, recv_order: bool = False,
                 grid: IntegerTimes | None = None, port_order: bool = PORT_ORDER) -> RankProgram:
    """One rank's program, equal to streaming_program(...).ranks[rank] (what a worker runs)."""
    check_window(window)
    if not 0 <= rank < schedule.cluster.p:
        raise OptccError("rank", f"expected a rank in 0..{schedule.cluster.p - 1}, got {rank}")
    return _Lowering(schedule, grid).rank(rank, window, port_order, recv_order)


def _color(users, spare: int = SLOT_SPARE):
    """Interval colouring by start time, flow -> slot id. A freed slot joins the back of a FIFO
    and is handed out again only while more than `spare` slots are free, so a rank can post its
    next receive while the current one is still arriving: gloo's sends wait for the receiver's
    ready notice, and a receive posted only when its slot's previous user has landed costs a
    round trip of idle link per message (docs/gpu_runner.md, "Where the time goes")."""
    events = sorted([(e, 0, i) for s, e, i in users] + [(s, 1, i) for s, e, i in users])
    free: deque = deque()
    slot_of: dict[int, int] = {}
    n = 0
    for _, kind, i in events:
        if kind == 0:
            free.append(slot_of[i])
        elif len(free) > spare:
            slot_of[i] = free.popleft()
        else:
            slot_of[i], n = n, n + 1
    return slot_of, n


def _link(rank, ops, slot_of, n_slots, window, times=None, recv_order: bool = False,
          port_order: bool = True) -> RankProgram:
    """Fill in slots and deps, walking the ops in schedule order. With `times` (the grid's flow
    starts, ends and links), a send to another peer than the rank's previous send on the same link
    also waits for that send's completion when the schedule ends it by this one's start. On a
    port whose flows run one at a time (unit rates) this orders every send after the completion of
    every earlier one to another peer (by induction, with the per-peer FIFO), so the port carries
    the schedule's flows in turn instead of sharing its bandwidth between peers; flows the
    schedule runs concurrently stay unordered. With `recv_order` receives follow the same rule
    (a receive from another peer is posted only once the previous one on the link completed), so
    no sender starts before the schedule's previous sender into this port has finished: one
    rendezvous round trip per change of sender, against bandwidth shared between two senders
    (worth it once a message's wire time is several round trips; docs/gpu_runner.md)."""
    last_write: dict[int, int] = {}
    last_send: dict = {}                            # link -> the rank's latest send on it so far
    last_recv: dict = {}                            # link -> its latest receive (recv_order)
    reads: dict[int, list] = defaultdict(list)
    slot_done: dict[int, tuple] = {}                # slot -> (op, event) that frees it
    peer_seq: dict[int, list] = defaultdict(list)
    recv_at: dict[int, int] = {}
    for n, op in enumerate(ops):
        deps = op.deps
        if op.kind in ("recv", "snap") or (op.kind == "send" and op.flow in slot_of):
            op.slot = slot_of[op.flow]
        if op.kind == "land":
            op.slot = slot_of[op.flow]
        if op.kind in ("recv", "snap") and op.slot in slot_done:
            deps.append(slot_done[op.slot])
        if op.kind in ("send", "snap") and not (op.kind == "send" and op.slot is not None):
            if op.piece in last_write:
                deps.append((last_write[op.piece], "S"))
        if op.kind == "send" and op.slot is not None:
            deps.append((_find(ops, n, "snap", op.flow), "S"))
        if op.kind == "send" and port_order and times is not None:
            starts, ends, links = times
            prev = last_send.get(links[op.flow])
            if prev is not None and ops[prev].peer != op.peer and ends[ops[prev].flow] <= starts[op.flow]:
                deps.append((prev, "C"))               # one peer needs none: its messages are FIFO
            last_send[links[op.flow]] = n
        if op.kind == "recv" and recv_order and times is not None:
            starts, ends, links = times
            prev = last_recv.get(links[op.flow])
            if prev is not None and ops[prev].peer != op.peer and ends[ops[prev].flow] <= starts[op.flow]:
                deps.append((prev, "C"))
            last_recv[links[op.flow]] = n
        if op.kind in ("send", "recv"):
            seq = peer_seq[op.peer]
            if seq:
                deps.append((seq[-1], "S"))
            if len(seq) >= window:
                deps.append((seq[-window], "C"))
            seq.append(n)
        if op.kind == "recv":
            recv_at[op.flow] = n
        if op.kind == "land":
            deps.append((recv_at[op.flow], "C"))
        if op.kind in ("land", "scale"):
            if op.piece in last_write:
                deps.append((last_write[op.piece], "S"))
            deps.extend(reads.pop(op.piece, []))
            last_write[op.piece] = n
        if op.kind == "send" and op.slot is None:
            reads[op.piece].append((n, "C"))
        if op.kind == "snap":
            reads[op.piece].append((n, "S"))
        if op.kind == "land":
            slot_done[op.slot] = (n, "S")
        if op.kind == "send" and op.slot is not None:
            slot_done[op.slot] = (n, "C")
    return RankProgram(rank, ops, dict(peer_seq), n_slots)


def _find(ops, before, kind, flow) -> int:
    return next(m for m in range(before - 1, -1, -1) if ops[m].kind == kind and ops[m].flow == flow)
