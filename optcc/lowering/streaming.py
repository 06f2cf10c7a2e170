"""The streaming runner's per-rank programs (pure Python; numel-independent, pieces and slots
are abstract buffers).

Each rank runs the ops `streaming_program` builds: `recv` (post irecv into a scratch slot),
`send` (post isend of the piece, or of its snapshot slot), `snap` (copy the piece into a slot),
`land` (add/copy the received slot into the piece) and `scale` (a LocalOp). An op starts (event
S) as soon as its `deps` have happened (each dep is an earlier op's start S or a post's
completion C); a post completes (C) when the transport says so. Rules the deps encode: a send
reads the piece after its last write in schedule order; a write waits for that write and for
every read since it (a direct send until it completed); a slot is reused only after its previous
user finished; posts with one peer go in optcc.schedule.posting_order, at most `window` of them
in flight. verifier.streaming proves every interleaving of these programs safe (property
"streaming"); the certificate carries their digests (optcc.lowering.digest).
"""
from __future__ import annotations

from collections import defaultdict, deque
from operator import itemgetter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from optcc.errors import OptccError
from optcc.timing import IntegerTimes

if TYPE_CHECKING:
    from collections.abc import Sequence

    import numpy as np
    import numpy.typing as npt

    from optcc.schedule import Schedule

Event = tuple[int, str]             # (op index, "S" start | "C" completion)

DEFAULT_WINDOW = 4          # derived: messages in flight per peer (docs/gpu_runner.md, "streaming")
SLOT_SPARE = 1              # derived: one scratch slot beyond the schedule's need (measured, docs/gpu_runner.md)
PORT_ORDER = True           # derived: a rank's sends wait for the sends the schedule finishes before them (docs/gpu_runner.md)
KINDS = ("recv", "send", "snap", "land", "scale")


@dataclass(slots=True)                 # 10⁵-10⁶ per rank: no __dict__ each (memory, attribute reads)
class Op:
    kind: str
    piece: int
    flow: int | None = None        # flow index (all but scale)
    peer: int | None = None        # send / recv
    slot: int | None = None        # recv, land: target slot; snap and snapshot send: source slot
    local: int | None = None       # scale: index in schedule.local_ops
    deps: list[Event] = field(default_factory=list)   # [(op index, "S" | "C")]


@dataclass
class ProgramColumns:
    """A rank's ops as the lowering writes them, one int64 column per field, -1 for None:
    `kind` (the index in KINDS), piece, flow, peer, slot, local; each op's deps as events
    (2·op, + 1 for its completion "C"), op n's at events[bounds[n]:bounds[n + 1]] in order.
    The per-rank check (verifier.streaming_local) and the executor read these; Op objects are
    made from them only where a caller reads RankProgram.ops."""

    kind: npt.NDArray[np.int64]
    piece: npt.NDArray[np.int64]
    flow: npt.NDArray[np.int64]
    peer: npt.NDArray[np.int64]
    slot: npt.NDArray[np.int64]
    local: npt.NDArray[np.int64]
    events: npt.NDArray[np.int64]
    bounds: npt.NDArray[np.int64]

    def ops(self) -> list[Op]:
        """The Op objects, field for field."""
        def opt(col: npt.NDArray[np.int64]) -> list[int | None]:
            return [None if v < 0 else v for v in col.tolist()]
        ev = self.events
        pairs = list(zip((ev >> 1).tolist(), map(("S", "C").__getitem__, (ev & 1).tolist())))
        b = self.bounds.tolist()
        deps = list(map(pairs.__getitem__, map(slice, b[:-1], b[1:])))      # a list's slice: a new list
        return list(map(Op, map(KINDS.__getitem__, self.kind.tolist()), self.piece.tolist(), opt(self.flow),
                        opt(self.peer), opt(self.slot), opt(self.local), deps))


class RankProgram:
    """One rank's program: `ops` in priority order (schedule order; the runner prefers low
    indices), `peer_seq` (peer -> op indices of its posts, in posting order), `n_slots`. The
    lowering gives it as ProgramColumns; its Op objects (10⁵-10⁶ per rank at scale) are made on
    the first read of `ops`, and from then on the ops are the program (a caller may edit them)
    and `columns` is None."""

    def __init__(self, rank: int, ops: list[Op] | None, peer_seq: dict[int, list[int]], n_slots: int,
                 columns: ProgramColumns | None = None) -> None:
        if (ops is None) == (columns is None):
            raise ValueError("a RankProgram is given its ops or its columns")
        self.rank, self.peer_seq, self.n_slots = rank, peer_seq, n_slots
        self._ops, self._columns = ops, columns

    @property
    def ops(self) -> list[Op]:
        if self._ops is None:
            assert self._columns is not None
            self._ops, self._columns = self._columns.ops(), None
        return self._ops

    @ops.setter
    def ops(self, ops: list[Op]) -> None:
        self._ops, self._columns = ops, None

    @property
    def columns(self) -> ProgramColumns | None:
        """The lowering's columns while no one has read `ops` (then they are the program), else None."""
        return self._columns

    @property
    def n_ops(self) -> int:
        """len(ops), without making the Op objects."""
        return len(self._ops) if self._ops is not None else int(self._columns.kind.size)   # type: ignore[union-attr]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RankProgram):
            return NotImplemented
        return (self.rank, self.ops, self.peer_seq, self.n_slots) == (other.rank, other.ops, other.peer_seq, other.n_slots)

    def __repr__(self) -> str:
        return f"RankProgram(rank={self.rank}, ops={self.n_ops} ops, peers={len(self.peer_seq)}, n_slots={self.n_slots})"


@dataclass
class StreamingProgram:
    window: int
    ranks: list[RankProgram]
    recv_order: bool = False       # receives wait for the previous receive on their link


class _Lowering:
    """What every rank's program needs of the whole schedule, computed once, as numpy columns."""

    def __init__(self, schedule: Schedule, grid: IntegerTimes | None) -> None:
        import numpy as np
        self.schedule = schedule
        self.grid = grid = grid or IntegerTimes(schedule)
        flows = schedule.flows
        self.links = [f.link for f in flows]
        self.src, self.dst, self.piece = (np.fromiter(map(itemgetter(k), flows), np.int64, len(flows)) for k in range(3))
        self.starts, self.ends, self.op_times = _time_columns(grid)
        # posting_order's key (start, src, dst, piece, index) on the int64 columns: lexsort is stable
        order = np.lexsort((self.piece, self.dst, self.src, self.starts))
        self.pos = np.empty(len(flows), np.int64)
        self.pos[order] = np.arange(len(flows))
        local_ops = schedule.local_ops
        self.lo_rank = np.array([op.rank for op in local_ops], dtype=np.int64)
        self.lo_piece = np.array([op.piece for op in local_ops], dtype=np.int64)

    def rank(self, r: int, window: int, port_order: bool, recv_order: bool) -> RankProgram:
        """Rank r's ops sorted by (time, class, posting position): a receive and a send at the
        flow's start (3), a snapshot then (2), a landing at its end (0), a local op at its time (1)."""
        import numpy as np
        grid, src, dst = self.grid, self.src, self.dst
        recv = np.flatnonzero(dst == r)
        send = np.flatnonzero((src == r) & (dst != r))
        snap = send[self._snapshotted(r, send, recv)]
        scale = np.flatnonzero(self.lo_rank == r)
        kinds = np.repeat(np.arange(5), [recv.size, send.size, snap.size, recv.size, scale.size])
        index = np.concatenate([recv, send, snap, recv, scale])
        time = np.concatenate([self.starts[recv], self.starts[send], self.starts[snap], self.ends[recv],
                               self.op_times[scale]])
        cls = np.repeat(np.array([3, 3, 2, 0, 1]), [recv.size, send.size, snap.size, recv.size, scale.size])
        third = np.concatenate([self.pos[index[:index.size - scale.size]], scale])
        order = np.lexsort((third, cls, time))
        kinds, index = kinds[order], index[order]
        is_flow, recvs, sends = kinds != 4, kinds == 0, kinds == 1
        piece = np.empty(index.size, np.int64)
        piece[is_flow] = self.piece[index[is_flow]]
        piece[~is_flow] = self.lo_piece[index[~is_flow]]
        peer: Any = np.zeros(index.size, np.int64)     # an array, then its list (None where no post)
        peer[recvs] = src[index[recvs]]
        peer[sends] = dst[index[sends]]
        flow = np.where(is_flow, index, -1)
        local = np.where(is_flow, -1, index)
        peer[~(recvs | sends)] = -1                     # only posts have a peer
        users = np.concatenate([recv, snap])
        slot_of, n_slots = _color(self.starts[users], self.ends[users], users)
        slot = np.full(index.size, -1, np.int64)        # a receive, its landing, a snapshot and its send: the flow's slot
        if users.size:
            of_flow = np.full(int(users.max()) + 1, -1, np.int64)
            of_flow[np.fromiter(slot_of, np.int64, len(slot_of))] = np.fromiter(slot_of.values(), np.int64, len(slot_of))
            held = is_flow & (index <= int(users.max()))
            slot[held] = of_flow[index[held]]
        times = (grid.starts, grid.ends, self.links) if port_order or recv_order else None
        return _link(r, ProgramColumns(kinds, piece, flow, peer, slot, local, np.zeros(0, np.int64),
                                       np.zeros(0, np.int64)), n_slots, window, times, recv_order, port_order)

    def _snapshotted(self, r: int, send: npt.NDArray[np.int64], recv: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        """Which of r's sends are snapshotted: the step runner's rule too (optcc.lowering.step),
        a snapshot when r writes the piece (a landing, a local op) strictly within the flow."""
        import numpy as np
        mine = np.flatnonzero(self.lo_rank == r)
        w_piece = np.concatenate([self.piece[recv], self.lo_piece[mine]])
        w_time = np.concatenate([self.ends[recv], self.op_times[mine]])
        if not send.size or not w_piece.size:
            return np.zeros(send.size, bool)
        s_piece, s_start, s_end = self.piece[send], self.starts[send], self.ends[send]
        # (piece, time) as one integer, both as ranks: a write strictly within (start, end) of its piece
        _, t = np.unique(np.concatenate([w_time, s_start, s_end]), return_inverse=True)
        _, q = np.unique(np.concatenate([w_piece, s_piece]), return_inverse=True)
        span = int(t.max()) + 2
        nw, ns = w_piece.size, send.size
        writes = np.sort(q[:nw] * span + t[:nw])
        after = np.searchsorted(writes, q[nw:] * span + t[nw:nw + ns], side="right")   # the first write after the start
        return (after < nw) & (writes[np.minimum(after, nw - 1)] < q[nw:] * span + t[nw + ns:])


def _time_columns(grid: IntegerTimes) -> tuple[npt.NDArray[np.int64], ...]:
    """The grid's starts, ends and local-op times as int64 columns; where they do not fit, their
    ranks among all three (the lowering only compares them, so every order is the same)."""
    import numpy as np
    try:
        return tuple(np.array(x, dtype=np.int64) for x in (grid.starts, grid.ends, grid.op_times))
    except OverflowError:
        values = sorted(set(grid.starts) | set(grid.ends) | set(grid.op_times))
        rank = {v: n for n, v in enumerate(values)}
        return tuple(np.array([rank[v] for v in x], dtype=np.int64) for x in (grid.starts, grid.ends, grid.op_times))


def check_window(window: int) -> None:
    if window < 1:
        raise OptccError("window", f"expected at least 1 message in flight per peer, got {window}")


def streaming_program(schedule: Schedule, window: int = DEFAULT_WINDOW, grid: IntegerTimes | None = None,
                      port_order: bool = PORT_ORDER, recv_order: bool = False) -> StreamingProgram:
    """Every rank's streaming program."""
    check_window(window)
    lowering = _Lowering(schedule, grid)
    ranks = [lowering.rank(r, window, port_order, recv_order) for r in range(schedule.cluster.p)]
    return StreamingProgram(window, ranks, recv_order)


def rank_program(schedule: Schedule, rank: int, window: int = DEFAULT_WINDOW, recv_order: bool = False,
                 grid: IntegerTimes | None = None, port_order: bool = PORT_ORDER) -> RankProgram:
    """One rank's program, equal to streaming_program(...).ranks[rank] (what a worker runs)."""
    check_window(window)
    if not 0 <= rank < schedule.cluster.p:
        raise OptccError("rank", f"expected a rank in 0..{schedule.cluster.p - 1}, got {rank}")
    return _Lowering(schedule, grid).rank(rank, window, port_order, recv_order)


def _color(starts: npt.NDArray[np.int64], ends: npt.NDArray[np.int64], users: npt.NDArray[np.int64],
           spare: int = SLOT_SPARE) -> tuple[dict[int, int], int]:
    """Interval colouring by start time, flow -> slot id (flow users[j] holds its slot over
    [starts[j], ends[j]); events in (time, end before start, flow) order). A freed slot joins the back of a FIFO
    and is handed out again only while more than `spare` slots are free, so a rank can post its
    next receive while the current one is still arriving: gloo's sends wait for the receiver's
    ready notice, and a receive posted only when its slot's previous user has landed costs a
    round trip of idle link per message (docs/gpu_runner.md, "Where the time goes")."""
    import numpy as np
    m = users.size
    is_start = np.repeat(np.array([0, 1], dtype=np.int64), m)
    flow = np.concatenate([users, users])
    order = np.lexsort((flow, is_start, np.concatenate([ends, starts])))
    free: deque[int] = deque()
    slot_of: dict[int, int] = {}
    n = 0
    for kind, i in zip(is_start[order].tolist(), flow[order].tolist()):
        if kind == 0:
            free.append(slot_of[i])
        elif len(free) > spare:
            slot_of[i] = free.popleft()
        else:
            slot_of[i], n = n, n + 1
    return slot_of, n


def _link(rank: int, cols: ProgramColumns, n_slots: int, window: int,
          times: tuple[Sequence[int], Sequence[int], Sequence[str]] | None = None, recv_order: bool = False,
          port_order: bool = True) -> RankProgram:
    """Fill in the deps (cols.events, cols.bounds), walking the ops in schedule order. With
    `times` (the grid's flow starts, ends and links), a send to another peer than the rank's
    previous send on the same link also waits for that send's completion when the schedule ends
    it by this one's start. On a port whose flows run one at a time (unit rates) this orders
    every send after the completion of every earlier one to another peer (by induction, with the
    per-peer FIFO), so the port carries the schedule's flows in turn instead of sharing its
    bandwidth between peers; flows the schedule runs concurrently stay unordered. With
    `recv_order` receives follow the same rule (a receive from another peer is posted only once
    the previous one on the link completed), so no sender starts before the schedule's previous
    sender into this port has finished: one rendezvous round trip per change of sender, against
    bandwidth shared between two senders (worth it once a message's wire time is several round
    trips; docs/gpu_runner.md). Events are ints (2·op, + 1 for a completion), as in ProgramColumns."""
    import numpy as np
    last_write: dict[int, int] = {}
    last_send: dict[str, int] = {}                  # link -> the rank's latest send on it so far
    last_recv: dict[str, int] = {}                  # link -> its latest receive (recv_order)
    reads: dict[int, list[int]] = {}                # piece -> the events of its reads since its last write
    slot_done: dict[int, int] = {}                  # slot -> the event that frees it
    peer_seq: dict[int, list[int]] = defaultdict(list)
    recv_at: dict[int, int] = {}
    snap_at: dict[int, int] = {}
    starts: Any                                     # read only with port_order / recv_order (times given)
    ends: Any
    links: Any
    starts, ends, links = times if times is not None else (None, None, None)
    port_order = port_order and times is not None
    recv_order = recv_order and times is not None
    kinds, flows, peers, pieces, slots = (c.tolist() for c in (cols.kind, cols.flow, cols.peer, cols.piece, cols.slot))
    events: list[int] = []
    ev = events.append
    bounds = [0]
    bound = bounds.append
    for n, kind, i, peer, piece, slot in zip(range(len(kinds)), kinds, flows, peers, pieces, slots):
        if kind == 0:                                   # recv
            done = slot_done.get(slot)
            if done is not None:
                ev(done)
            if recv_order:
                prev = last_recv.get(links[i])
                if prev is not None and peers[prev] != peer and ends[flows[prev]] <= starts[i]:
                    ev(2 * prev + 1)
                last_recv[links[i]] = n
            seq = peer_seq[peer]                        # the per-peer FIFO and window
            if seq:
                ev(2 * seq[-1])
                if len(seq) >= window:
                    ev(2 * seq[-window] + 1)
            seq.append(n)
            recv_at[i] = n
        elif kind == 1:                                 # send
            if slot < 0:
                w = last_write.get(piece)
                if w is not None:
                    ev(2 * w)
            else:
                ev(2 * snap_at[i])
            if port_order:
                prev = last_send.get(links[i])
                if prev is not None and peers[prev] != peer and ends[flows[prev]] <= starts[i]:
                    ev(2 * prev + 1)                    # one peer needs none: its messages are FIFO
                last_send[links[i]] = n
            seq = peer_seq[peer]                        # the per-peer FIFO and window
            if seq:
                ev(2 * seq[-1])
                if len(seq) >= window:
                    ev(2 * seq[-window] + 1)
            seq.append(n)
            if slot < 0:
                got = reads.get(piece)
                if got is None:
                    reads[piece] = [2 * n + 1]
                else:
                    got.append(2 * n + 1)
            else:
                slot_done[slot] = 2 * n + 1
        elif kind == 2:                                 # snap
            done = slot_done.get(slot)
            if done is not None:
                ev(done)
            w = last_write.get(piece)
            if w is not None:
                ev(2 * w)
            got = reads.get(piece)
            if got is None:
                reads[piece] = [2 * n]
            else:
                got.append(2 * n)
            snap_at[i] = n
        else:                                           # land, scale: write the piece
            if kind == 3:
                ev(2 * recv_at[i] + 1)
                slot_done[slot] = 2 * n
            w = last_write.get(piece)
            if w is not None:
                ev(2 * w)
            got = reads.pop(piece, None)
            if got is not None:
                events += got
            last_write[piece] = n
        bound(len(events))
    cols.events, cols.bounds = np.array(events, np.int64), np.array(bounds, np.int64)
    return RankProgram(rank, None, dict(peer_seq), n_slots, cols)
