"""The streaming runner's per-rank programs (numpy; numel-independent, pieces and slots are
abstract buffers). A rank's program is written as columns (ProgramColumns, one array per op
field, the deps as event codes), the form the per-rank check and the executor read; its Op
objects are made only where something reads RankProgram.ops (the whole-program proofs, digests,
tests).

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

from collections import deque
from operator import itemgetter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from optcc.errors import OptccError
from optcc.timing import IntegerTimes

if TYPE_CHECKING:
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
        if self._ops is not None:
            return len(self._ops)
        assert self._columns is not None
        return int(self._columns.kind.size)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RankProgram):
            return NotImplemented
        return ((self.rank, self.ops, self.peer_seq, self.n_slots)
                == (other.rank, other.ops, other.peer_seq, other.n_slots))

    def __repr__(self) -> str:
        return (f"RankProgram(rank={self.rank}, ops={self.n_ops} ops, peers={len(self.peer_seq)}, "
                f"n_slots={self.n_slots})")


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
        src, dst = self.src, self.dst
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
        peer = np.zeros(index.size, np.int64)
        peer[recvs] = src[index[recvs]]
        peer[sends] = dst[index[sends]]
        flow = np.where(is_flow, index, -1)
        local = np.where(is_flow, -1, index)
        peer[~(recvs | sends)] = -1                     # only posts have a peer
        users = np.concatenate([recv, snap])
        slot_of, n_slots = _color(self.starts[users], self.ends[users], users)
        slot = np.full(index.size, -1, np.int64)        # recv, land, snap, a snapshot's send: the flow's slot
        if users.size:
            of_flow = np.full(int(users.max()) + 1, -1, np.int64)
            of_flow[np.fromiter(slot_of, np.int64, len(slot_of))] = np.fromiter(slot_of.values(), np.int64, len(slot_of))
            held = is_flow & (index <= int(users.max()))
            slot[held] = of_flow[index[held]]
        cols = ProgramColumns(kinds, piece, flow, peer, slot, local, np.zeros(0, np.int64), np.zeros(0, np.int64))
        links = None
        if port_order or recv_order:
            names = [self.links[i] for i in index[is_flow].tolist()]     # each op's link, as a small int code
            links = np.full(index.size, -1, np.int64)
            if names:
                _, links[is_flow] = np.unique(np.array(names), return_inverse=True)
        peer_seq = _link(cols, window, self.starts, self.ends, links, port_order, recv_order)
        return RankProgram(r, None, peer_seq, n_slots, cols)

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


def _link(cols: ProgramColumns, window: int, starts: npt.NDArray[np.int64], ends: npt.NDArray[np.int64],
          links: npt.NDArray[np.int64] | None, port_order: bool, recv_order: bool) -> dict[int, list[int]]:
    """Fill in cols.events and cols.bounds (the deps) and return the per-peer posting lists. The
    rules, for op n in schedule order (the ops before it are "earlier"):
      recv: the event that last freed its slot (an earlier landing's start, or an earlier send
            from the slot's completion); with recv_order the previous receive on its link; the FIFO
      send: from the piece, the piece's last earlier write (start); from a slot, its flow's
            snapshot (start); with port_order the previous send on its link; the FIFO
      snap: the event that last freed its slot; the piece's last earlier write
      land: its receive's completion; the piece's last earlier write; then every read of the
            piece since that write, in order (a snapshot's start, a send's completion)
      scale: the piece's last earlier write; every read since it, in order
    The FIFO: the start of the previous post with the same peer and the completion of the
    window-th previous. "The previous on its link" (port order, recv order): a dependency on its
    completion where the peers differ and the schedule ends it by this op's flow's start. On a
    port whose flows run one at a time (unit rates) this orders every send after the completion
    of every earlier one to another peer (by induction, with the per-peer FIFO), so the port
    carries the schedule's flows in turn instead of sharing its bandwidth between peers; flows
    the schedule runs concurrently stay unordered. With `recv_order` receives follow the same
    rule, so no sender starts before the schedule's previous sender into this port has finished:
    one rendezvous round trip per change of sender, against bandwidth shared between two senders
    (worth it once a message's wire time is several round trips; docs/gpu_runner.md). Each rule
    is one array pass over the ops (grouped by peer, link, piece or slot), not a loop per op."""
    import numpy as np
    kind, piece, flow, peer, slot = cols.kind, cols.piece, cols.flow, cols.peer, cols.slot
    n = kind.size
    ops = np.arange(n, dtype=np.int64)
    recv, send, snap, land, scale = (kind == k for k in range(5))
    owner: list[npt.NDArray[np.int64]] = []             # per dependency: its op, its place (cat, sub), the event
    cat: list[int | npt.NDArray[np.int64]] = []
    sub: list[npt.NDArray[np.int64]] = []
    event: list[npt.NDArray[np.int64]] = []

    def dep(at: npt.NDArray[np.int64], ev: npt.NDArray[np.int64], c: int,
            s: npt.NDArray[np.int64] | None = None) -> None:
        owner.append(at)
        event.append(ev)
        cat.append(np.full(at.size, c, np.int64))
        sub.append(np.zeros(at.size, np.int64) if s is None else s)

    def nearest(members: npt.NDArray[np.bool_], key: npt.NDArray[np.int64], value: npt.NDArray[np.int64],
                after: bool = False) -> npt.NDArray[np.int64]:
        """Per op, the value of the nearest earlier (`after`: later) member op with the same key,
        -1 where none; values are ≥ 0 and increase with the op."""
        span = int(value.max(initial=0)) + 1
        order = np.lexsort((-ops if after else ops, key))   # each key's ops in scan order
        k, v = key[order], value[order]
        if after:
            v = span - 1 - v                            # increasing along the scan
        group = np.cumsum(np.concatenate([[True], k[1:] != k[:-1]])) if n else k
        best = np.maximum.accumulate(np.where(members[order], group * span + v, -1)) if n else k
        prev = np.concatenate([[-1], best[:-1]])[:n]    # the scan so far, this op left out
        got = np.where((prev >= 0) & (prev // span == group), prev % span, -1)
        out = np.empty(n, np.int64)
        out[order] = np.where(got >= 0, span - 1 - got, -1) if after else got
        return out

    # the per-peer FIFO and window
    posts = np.flatnonzero(recv | send)
    by_peer = posts[np.argsort(peer[posts], kind="stable")]
    q = peer[by_peer]
    first = np.flatnonzero(np.concatenate([[True], q[1:] != q[:-1]])) if q.size else q
    place = np.arange(q.size) - np.repeat(first, np.diff(np.concatenate([first, [q.size]])))
    later = np.flatnonzero(place >= 1)
    dep(by_peer[later], 2 * by_peer[later - 1], 2)
    later = np.flatnonzero(place >= window)
    dep(by_peer[later], 2 * by_peer[later - window] + 1, 3)
    ends_at = np.concatenate([first[1:], [q.size]])
    peer_seq = {int(q[a]): by_peer[a:b].tolist() for a, b in sorted(zip(first.tolist(), ends_at.tolist()),
                                                                      key=lambda ab: by_peer[ab[0]])}
    # port order and receive order: the previous post of the kind on the link
    for on, members in ((port_order, send), (recv_order, recv)):
        if not on or links is None:
            continue
        mine = np.flatnonzero(members)
        on_link = mine[np.argsort(links[mine], kind="stable")]
        same = links[on_link[1:]] == links[on_link[:-1]]
        a, b = on_link[:-1][same], on_link[1:][same]
        keep = (peer[a] != peer[b]) & (ends[flow[a]] <= starts[flow[b]])
        dep(b[keep], 2 * a[keep] + 1, 1)
    # slots: what last freed the slot (a landing's start, a send's completion from it)
    frees = land | (send & (slot >= 0))
    freed = nearest(frees, slot, 2 * ops + send)
    at = np.flatnonzero((recv | snap) & (freed >= 0))
    dep(at, freed[at], 0)
    # a send from a slot: its snapshot; a landing: its receive
    of_flow = np.full(int(flow.max(initial=-1)) + 2, -1, np.int64)
    at = np.flatnonzero(send & (slot >= 0))
    of_flow[flow[snap]] = ops[snap]
    dep(at, 2 * of_flow[flow[at]], 0)
    of_flow[flow[recv]] = ops[recv]
    at = np.flatnonzero(land)
    dep(at, 2 * of_flow[flow[at]] + 1, 0)
    # pieces: the last earlier write (land, scale), and a write's reads since it
    writes = land | scale
    direct = send & (slot < 0)
    wrote = nearest(writes, piece, ops)
    for members, c in ((direct, 0), (snap | land | scale, 1)):
        at = np.flatnonzero(members & (wrote >= 0))
        dep(at, 2 * wrote[at], c)
    reads = direct | snap
    nxt = nearest(writes, piece, ops, after=True)        # a read belongs to the piece's next write
    at = np.flatnonzero(reads & (nxt >= 0))
    dep(nxt[at], 2 * at + direct[at], 2, at)
    # one list, op by op, each op's deps in the order above
    own, cats, subs, evs = (np.concatenate(x) if x else np.zeros(0, np.int64) for x in (owner, cat, sub, event))
    order = np.lexsort((subs, cats, own))
    cols.events = evs[order]
    cols.bounds = np.concatenate([[0], np.cumsum(np.bincount(own, minlength=n))]).astype(np.int64)
    return peer_seq
