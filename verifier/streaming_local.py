"""Property "streaming", checked one rank at a time: conditions on a rank's own program that,
for every rank, imply M, H and D of verifier.streaming for the whole program (the order
argument below), so a worker of a generated schedule checks its own program in O(its ops)
and no process ever builds the whole schedule.

The rank's *order key* of an op: κ = (time, class, K) with K = (start, src, dst, piece) the
flow's posting key (optcc.schedule.posting_order) and class 3 for send and recv (at the flow's
start), 2 for snap (start), 0 for land (the flow's end), 1 for a local op (its time; K = its
index). Conditions L1-L5, on rank r's program and r's flows alone:
  L1 structure: each of r's flows has its send (and snap) on r if r sends it, its recv and land
     on r if r receives it, with the right piece, peer and slots; no other op;
  L2 order: the ops are sorted strictly by κ, and every dependency names an earlier op
     (an event of a send or recv where it is a completion);
  L3 pairs: the posts with each peer are exactly r's flows with that peer, sorted strictly by K,
     each waiting for the start of the previous and the completion of the window-th previous;
  L4 hazards: H of verifier.streaming on r's buffers, with r's own edges only (deps, a post's
     start before its completion, one peer's completions in posting order), so a fortiori in
     the whole happens-before graph;
  L5 snapshots: a send from a slot reads a snapshot of the same flow.
Why every rank passing L1-L5 gives M, H, D (M and H argued here; D's steps machine-checked by
property streaming_order of prove-all, verifier/parametric/streaming_order.py):
  M  by L1 every flow has its three ops at its two ends, each once; by L3 the two ends' lists
     with each other are their common flows sorted by the same K, so they mirror position by
     position: both ends enumerate the same flows with the same terms (property "local" of
     prove-all for a generated schedule; for a flow list, the same tuples);
  H  is L4 (fewer edges only make it harder);
  D  give each event the key (κ, 0) for a start and (κ, 1) for a completion. Every edge of the
     progress graph increases it strictly: deps by L2; a post's start to its completion; one
     peer's completions in K order by L3; the cross edges (a receive completes after its send
     started, a send after its receive started) join a send and a receive of the same flow,
     which have the same κ = (start, 3, K) at both ends, from start to completion. A graph whose
     edges all increase one key has no cycle.

The check runs on numpy columns of the rank's ops (kind, piece, flow, peer, slot, local op,
dependencies; OpColumns: the lowering's own columns where no one read the program's ops, else
one Python pass over the ops' fields) and of the schedule's flows; the conditions are array
operations on them (not a loop per op and per query). Its happens-before queries (L3, L4) are first answered by the direct edges
(an op's own dependency, a post's start, the previous post's completion), all at once; only the
queries no direct edge answers are searched on the rank's edges. Failures are reported in the
order the conditions and ops are listed above: the first failing op, flow, peer or buffer item.
An op field that is neither an int nor None (or of 2⁵³ or more) is refused as structure.
"""
from __future__ import annotations

from itertools import chain, repeat
from operator import attrgetter, itemgetter
from typing import TYPE_CHECKING, Any

import numpy as np

from optcc.timing import IntegerTimes

if TYPE_CHECKING:
    from collections.abc import Sequence

    import numpy.typing as npt

    from optcc.lowering.streaming import Op, RankProgram
    from optcc.schedule import Flow, Schedule

    Ints = npt.NDArray[np.int64]
    Bools = npt.NDArray[np.bool_]

SEND, SNAP, RECV, LAND, SCALE = range(5)          # op kind codes
_KIND = {"send": SEND, "snap": SNAP, "recv": RECV, "land": LAND, "scale": SCALE}
_CLASS = np.array([3, 2, 3, 0, 1])                 # κ's class per kind code (module docstring)
_FROM_KINDS = np.array([RECV, SEND, SNAP, LAND, SCALE])   # optcc.lowering.streaming.KINDS index -> kind code
_NONE = type(None)
_EVENT = {"S": 0, "C": 1}                          # a dependency's event: start, completion
_ROW = 16                                          # derived: at most this many deps per op, a table of rows; else a sort
_CHUNK = 1 << 18                                   # derived: happens-before queries per numpy pass (memory)


def _fail(kind: str, rank: int, message: str) -> dict[str, Any]:
    return {"property": "streaming", "kind": kind, "rank": rank, "message": message}


def _ints(values: Sequence[Any], exact_int: bool = False) -> tuple[Ints, Bools, Bools]:
    """(int64 array with 0 for None and for odd values, None mask, odd mask): odd is a value that
    is neither an int (a bool too, unless `exact_int`) nor None, or one of 2⁵³ or more."""
    n = len(values)
    allowed = {int, _NONE} if exact_int else {int, bool, _NONE}
    odd = np.zeros(n, bool)
    types = set(map(type, values))
    if types == {int}:
        try:
            return np.array(values, dtype=np.int64), odd, odd.copy()
        except OverflowError:
            pass
    if not types <= allowed:
        odd = np.fromiter((type(v) not in allowed for v in values), bool, n)
        values = [0 if o else v for v, o in zip(values, odd.tolist())]
    try:
        as_float = np.array(values, dtype=np.float64) if n else np.zeros(0)   # None -> nan; exact below 2⁵³
    except OverflowError:                                  # beyond a float: odd
        huge = [v is not None and abs(v) >= 2**53 for v in values]
        odd |= np.array(huge, dtype=bool)
        as_float = np.array([0 if h else v for v, h in zip(values, huge)], dtype=np.float64)
    none = np.isnan(as_float)
    big = ~none & (np.abs(np.where(none, 0, as_float)) >= 2**53)
    odd |= big
    return np.where(none | big, 0, as_float).astype(np.int64), none, odd


def _first(mask: Bools) -> int:
    """Index of the first True, or -1."""
    hit = np.flatnonzero(mask)
    return int(hit[0]) if hit.size else -1


def _repeats(idx: Ints, values: Ints, n: int) -> Bools:
    """Mask over n ops: the ops of `idx` whose value (values[op], ≥ 0) an earlier op of idx has."""
    out = np.zeros(n, bool)
    v = values[idx]
    if not idx.size or np.bincount(v).max() < 2:
        return out
    _, first = np.unique(v, return_index=True)
    out[idx] = True
    out[idx[first]] = False
    return out


def _lex_greater(cols: Sequence[Ints]) -> Bools:
    """For columns c_0..c_m of equal length L: whether row n+1 > row n lexicographically (L − 1 bools)."""
    greater = np.zeros(max(len(cols[0]) - 1, 0), bool)
    tied = np.ones_like(greater)
    for c in cols:
        a, b = c[:-1], c[1:]
        greater |= tied & (b > a)
        tied &= b == a
    return greater


def _times(grid: IntegerTimes) -> tuple[Ints, ...]:
    """The grid's flow starts, ends and local-op times as int64 arrays; where they do not fit, their
    ranks among all three (times are only compared with each other, so the order is the same)."""
    try:
        return tuple(np.array(x, dtype=np.int64) for x in (grid.starts, grid.ends, grid.op_times))
    except OverflowError:
        values = sorted(set(grid.starts) | set(grid.ends) | set(grid.op_times))
        rank = {v: n for n, v in enumerate(values)}
        return tuple(np.array([rank[v] for v in x], dtype=np.int64) for x in (grid.starts, grid.ends, grid.op_times))


class OpColumns:
    """The fields of a rank's ops as numpy columns (0 where None or odd, with masks), and their
    dependencies flattened op by op: what L1-L5 read, and what the executor runs where its rank
    checked the program (gpu_runner.proof keeps them beside the program it checked)."""

    @classmethod
    def of(cls, rp: RankProgram) -> OpColumns:
        """rp's columns: the lowering's own (optcc.lowering.streaming.ProgramColumns) while no one
        has read its ops, else read from its ops."""
        pc = rp.columns
        if pc is None:
            return cls(rp.ops)
        self = cls.__new__(cls)
        self.n = n = int(pc.kind.size)
        self.kc = _FROM_KINDS[pc.kind]
        for name in ("piece", "flow", "peer", "slot", "local"):
            col = getattr(pc, name)
            none = col < 0                              # -1: None
            setattr(self, name, np.where(none, 0, col))
            setattr(self, name + "_none", none)
            setattr(self, name + "_odd", np.zeros(n, bool))
        self.dep_count = np.diff(pc.bounds)
        self.dep_m = pc.events >> 1
        self.dep_m_odd = np.zeros(pc.events.size, bool)
        self.dep_C = (pc.events & 1).astype(bool)
        self.dep_S = ~self.dep_C
        self.dep_owner = np.repeat(np.arange(n), self.dep_count)
        return self

    def __init__(self, ops: Sequence[Op]) -> None:
        self.n = n = len(ops)
        fields = ("kind", "piece", "flow", "peer", "slot", "local", "deps")     # one list per field
        kind, piece, flow, peer, slot, local, deps = (list(map(attrgetter(f), ops)) for f in fields)
        self.kc = np.fromiter(map(_KIND.get, kind, repeat(-1)), np.int64, n)
        self.piece, self.piece_none, self.piece_odd = _ints(piece)
        self.flow, self.flow_none, self.flow_odd = _ints(flow, exact_int=True)
        self.peer, self.peer_none, self.peer_odd = _ints(peer)
        self.slot, self.slot_none, self.slot_odd = _ints(slot)
        self.local, self.local_none, self.local_odd = _ints(local)
        self.dep_count = np.fromiter(map(len, deps), np.int64, n)
        flat = list(chain.from_iterable(deps))                    # (m, ev) pairs, op by op
        nd = len(flat)
        dep_m = list(map(itemgetter(0), flat))
        m_arr = None
        if set(map(type, dep_m)) <= {int}:
            try:
                m_arr = np.array(dep_m, np.int64)
            except OverflowError:
                pass
        if m_arr is not None:
            self.dep_m, self.dep_m_odd = m_arr, np.zeros(nd, bool)
        else:
            self.dep_m, _, self.dep_m_odd = _ints(dep_m)
        del dep_m
        ev = np.fromiter(map(_EVENT.get, map(itemgetter(1), flat), repeat(2)), np.int64, nd)
        self.dep_S, self.dep_C = ev == 0, ev == 1
        self.dep_owner = np.repeat(np.arange(n), self.dep_count)


class _Program:
    """The columns of one rank's program and of the schedule's flows that L1-L5 read."""

    @property
    def ops(self) -> list[Op]:
        return self.rp.ops

    # set by the conditions as they run (_structure, _order, _pairs_and_hazards, _before_chunk)
    fi: Ints
    is_scale: Bools
    krank: Ints
    K: Ints
    prev_post: Ints
    _direct: tuple[str, Ints | None] | None
    _graph: tuple[list[int], list[int], list[int]] | None

    def __init__(self, schedule: Schedule, rp: RankProgram, grid: IntegerTimes, c: OpColumns) -> None:
        self.rp = rp                             # its ops are read only to word a failure (made then)
        self.n = c.n
        self.kc = c.kc
        self.piece, self.piece_none, self.piece_odd = c.piece, c.piece_none, c.piece_odd
        self.flow, self.flow_none, self.flow_odd = c.flow, c.flow_none, c.flow_odd
        self.peer, self.peer_none, self.peer_odd = c.peer, c.peer_none, c.peer_odd
        self.slot, self.slot_none, self.slot_odd = c.slot, c.slot_none, c.slot_odd
        self.local, self.local_none, self.local_odd = c.local, c.local_none, c.local_odd
        self.dep_count, self.dep_m, self.dep_m_odd = c.dep_count, c.dep_m, c.dep_m_odd
        self.dep_S, self.dep_C, self.dep_owner = c.dep_S, c.dep_C, c.dep_owner
        self.flows: list[Flow] = schedule.flows
        flows = self.flows
        self.nf = len(flows)
        self.fsrc, self.fdst, self.fpiece = (np.fromiter(map(itemgetter(k), flows), np.int64, self.nf) for k in range(3))
        self._direct = self._graph = None        # made on first use (_before)
        self.starts, self.ends, self.op_times = _times(grid)
        local_ops = schedule.local_ops
        self.nl = len(local_ops)
        self.lo_rank = np.array([lo.rank for lo in local_ops] or [0], dtype=np.int64)
        self.lo_piece = np.array([lo.piece for lo in local_ops] or [0], dtype=np.int64)


def check_rank_program(schedule: Schedule, rp: RankProgram, window: int, grid: IntegerTimes | None = None,
                       cols: OpColumns | None = None) -> dict[str, Any] | None:
    """None if rank rp.rank's program passes L1-L5 on `schedule` (the rank's flows, or more),
    else a counterexample dict (the condition, the rank, a message). `cols`: OpColumns.of(rp),
    where the caller keeps them (made here otherwise)."""
    grid = grid or IntegerTimes(schedule)             # times as integers on one grid: the same order
    P = _Program(schedule, rp, grid, OpColumns.of(rp) if cols is None else cols)
    return _structure(P, rp.rank) or _order(P, rp.rank) or _pairs_and_hazards(P, rp, window)


def _structure(P: _Program, r: int) -> dict[str, Any] | None:
    """L1 and L5: every op is one of r's flows' (or local ops') at the right end, once; every flow
    of r has its ops, a snapshot send its snapshot, a receive and its landing one slot."""
    kc, nf, nl = P.kc, P.nf, P.nl
    is_scale = kc == SCALE
    odd = P.piece_odd | P.peer_odd | P.slot_odd | P.local_odd | (P.flow_odd & ~is_scale)
    # scale ops
    loc_ok = is_scale & ~P.local_none & ~P.local_odd & (P.local >= 0) & (P.local < nl)
    li = np.where(loc_ok, P.local, 0)
    dup_local = _repeats(np.flatnonzero(loc_ok), P.local, P.n)
    piece_bad = P.piece_none | P.piece_odd
    bad_scale = is_scale & (~loc_ok | (P.lo_rank[li] != r) | piece_bad | (P.lo_piece[li] != P.piece) | dup_local)
    # flow ops
    fl_ok = ~is_scale & (kc >= 0) & ~P.flow_none & ~P.flow_odd & (P.flow >= 0) & (P.flow < nf)
    fi = np.where(fl_ok, P.flow, 0) if nf else np.zeros(P.n, np.int64)
    fsrc, fdst, fpiece = (x[fi] if nf else np.zeros(P.n, np.int64) for x in (P.fsrc, P.fdst, P.fpiece))
    sends = (kc == SEND) | (kc == SNAP)
    dup_flow = _repeats(np.flatnonzero(fl_ok), kc * nf + P.flow, P.n)
    peer_bad = P.peer_none | P.peer_odd
    bad_flow = ~is_scale & (~fl_ok | (np.where(sends, fsrc, fdst) != r) | piece_bad | (P.piece != fpiece) | dup_flow
                            | ((kc == SEND) & (peer_bad | (P.peer != fdst)))
                            | ((kc == RECV) & (peer_bad | (P.peer != fsrc))))
    n = _first(bad_scale | bad_flow | odd)
    if n >= 0:
        op = P.ops[n]
        if odd[n] and not (bad_scale[n] or bad_flow[n]):
            return _fail("structure", r, f"op {n} ({op.kind}): a field is neither an integer nor None")
        if is_scale[n]:
            return _fail("structure", r, f"op {n}: scale of local op {op.local} is not this rank's or twice")
        return _fail("structure", r, f"op {n}: {op.kind} of flows[{op.flow}] has the wrong rank, peer or "
                                     f"piece, or appears twice")
    at: dict[int, Ints] = {}
    for code in (SEND, SNAP, RECV, LAND):            # kind -> flow -> op (each at most once now)
        a = np.full(nf, -1, np.int64)
        idx = np.flatnonzero(fl_ok & (kc == code))
        a[P.flow[idx]] = idx
        at[code] = a
    slot, slot_none = P.slot, P.slot_none
    ix = {code: np.maximum(a, 0) for code, a in at.items()}
    send_at, snap_at, recv_at, land_at = at[SEND], at[SNAP], at[RECV], at[LAND]
    s_send, s_snap, s_recv, s_land = (np.where(a >= 0, slot[ix[c]], 0) for c, a in at.items())
    n_send, n_snap, n_recv, n_land = (np.where(a >= 0, slot_none[ix[c]], True) for c, a in at.items())
    src_r = P.fsrc == r
    dst_r = ~src_r & (P.fdst == r)
    no_send = src_r & (send_at < 0)
    no_snap = src_r & ~no_send & ~n_send & ((snap_at < 0) | n_snap | (s_snap != s_send))
    no_recv = dst_r & (recv_at < 0)
    no_land = dst_r & ~no_recv & (land_at < 0)
    two_slots = dst_r & ~no_recv & ~no_land & (n_recv | n_land | (s_land != s_recv))
    i = _first(no_send | no_snap | no_recv | no_land | two_slots)
    if i >= 0:
        f = P.flows[i]
        if no_send[i]:
            return _fail("structure", r, f"flows[{i}] {f.src}->{f.dst} has no send on rank {r}")
        if no_snap[i]:
            return _fail("structure", r, f"flows[{i}]: sent from slot {P.ops[send_at[i]].slot} that no snapshot fills")
        if no_recv[i] or no_land[i]:
            kind = "recv" if no_recv[i] else "land"
            return _fail("structure", r, f"flows[{i}] {f.src}->{f.dst} has no {kind} on rank {r}")
        return _fail("structure", r, f"flows[{i}]: receive and landing use different slots")
    if nl:
        applied = np.zeros(nl, bool)
        applied[P.local[is_scale]] = True
        j = _first((P.lo_rank == r) & ~applied)
        if j >= 0:
            return _fail("structure", r, f"local_ops[{j}] is never applied on rank {r}")
    P.fi, P.is_scale = fi, is_scale
    return None


def _key_rank(P: _Program) -> Ints:
    """Each flow's posting key K = (start, src, dst, piece) as its rank among the flows' keys
    (equal keys, equal ranks), so that K compares as one integer."""
    if not P.nf:
        return np.zeros(0, np.int64)
    cols = (P.starts, P.fsrc, P.fdst, P.fpiece)
    order = np.lexsort(cols[::-1])
    new = np.zeros(P.nf, bool)
    new[0] = True
    for c in cols:
        x = c[order]
        new[1:] |= x[1:] != x[:-1]
    rank = np.empty(P.nf, np.int64)
    rank[order] = np.cumsum(new) - 1
    return rank


def _order(P: _Program, r: int) -> dict[str, Any] | None:
    """L2: the ops strictly in κ order; every dependency an earlier event (a completion only of a post)."""
    kc, fi, is_scale = P.kc, P.fi, P.is_scale
    P.krank = _key_rank(P)
    if P.nf:
        flow_time = np.where(kc == LAND, P.ends[fi], P.starts[fi])
        K = P.krank[fi]
    else:
        flow_time = K = np.zeros(P.n, np.int64)
    li = np.where(is_scale, P.local, 0)
    time = np.where(is_scale, P.op_times[li] if P.nl else 0, flow_time)
    P.K = K = np.where(is_scale, P.local, K)          # a local op's K is (its index,): compared only with another's
    n_order = _first(~_lex_greater([time, _CLASS[np.maximum(kc, 0)], K])) + 1   # 0: none
    m = P.dep_m
    post = (kc == SEND) | (kc == RECV)
    bad = P.dep_m_odd | (m < 0) | (m >= P.dep_owner) | ~(P.dep_S | P.dep_C)
    bad |= P.dep_C & ~post[np.clip(m, 0, max(P.n - 1, 0))]
    d = _first(bad)
    n_dep = int(P.dep_owner[d]) if d >= 0 else -1
    if n_order > 0 and (n_dep < 0 or n_order <= n_dep):
        return _fail("order", r, f"op {n_order} ({P.ops[n_order].kind}) is not after op {n_order - 1} "
                                 f"in (time, class, posting key)")
    if n_dep >= 0:
        mm, ev = next((x, e) for x, e in P.ops[n_dep].deps
                      if not (isinstance(x, int) and 0 <= x < n_dep) or e not in ("S", "C")
                      or (e == "C" and P.ops[x].kind not in ("send", "recv")))
        return _fail("bad dependency", r, f"op {n_dep} depends on ({mm}, {ev!r}), not an earlier event")
    return None


def _pairs_and_hazards(P: _Program, rp: RankProgram, window: int) -> dict[str, Any] | None:
    """L3 (the posts with each peer, their order and window) and L4 (H on r's buffers)."""
    r, kc = rp.rank, P.kc
    posts = np.flatnonzero((kc == SEND) | (kc == RECV))
    post_peer = P.peer[posts]
    peers = list(rp.peer_seq)
    if set(post_peer.tolist()) != set(peers):
        return _fail("structure", r, "the posting lists name other peers than the posts")
    seqs = [list(s) for s in rp.peer_seq.values()]
    lens = np.array([len(s) for s in seqs], dtype=np.int64)
    order = np.argsort(np.array(peers, dtype=np.int64), kind="stable")
    sorted_peers = np.array(peers, dtype=np.int64)[order]
    peer_ix = order[np.searchsorted(sorted_peers, post_peer)]      # each post's peer, as its place in peer_seq
    expected = posts[np.argsort(peer_ix, kind="stable")]           # the posts grouped by peer, in op order
    bad_len = _first(np.bincount(peer_ix, minlength=len(peers)) != lens)
    aligned = int(lens[:bad_len].sum()) if bad_len >= 0 else int(lens.sum())
    got, _, got_odd = _ints(list(chain.from_iterable(seqs))[:aligned])
    mismatch = _first((got != expected[:aligned]) | got_odd)
    bounds = np.concatenate([[0], np.cumsum(lens)])
    bad_seq = bad_len
    if mismatch >= 0:
        bad_seq = int(np.searchsorted(bounds, mismatch, side="right") - 1)
    ok_to = int(bounds[bad_seq]) if bad_seq >= 0 else aligned      # the sequences before the first bad one
    seq = expected[:ok_to]
    which = np.repeat(np.arange(len(peers)), lens)[:ok_to]         # peer_seq place of each post
    same = which[1:] == which[:-1]
    key_up = _lex_greater([P.K[seq]])
    bad_pair = _first(same & ~key_up)                               # only in the sequences before bad_seq
    if bad_pair >= 0:
        a, b = int(seq[bad_pair]), int(seq[bad_pair + 1])
        return _fail("pair order", r, f"posts {a} and {b} with rank {peers[which[bad_pair]]} are not in "
                                      f"posting-key order")
    if bad_seq >= 0:
        return _fail("structure", r, f"the posting list for peer {peers[bad_seq]} is not its posts with it in order")
    prev_post = np.full(P.n, -1, np.int64)
    prev_post[seq[1:][same]] = seq[:-1][same]
    P.prev_post = prev_post
    # L3's queries: each post starts after the previous one's start and the window-th previous one's completion
    k_in = np.arange(seq.size) - bounds[which]                    # position within its peer's list
    q_post = np.flatnonzero(k_in >= 1)
    q_win = np.flatnonzero(k_in >= window)
    us = np.concatenate([2 * seq[q_post - 1], 2 * seq[q_win - window] + 1])
    vs = np.concatenate([2 * seq[q_post], 2 * seq[q_win]])
    at = np.concatenate([q_post, q_win])                             # in peer_seq order, the posting check first
    is_window = np.concatenate([np.zeros(q_post.size, bool), np.ones(q_win.size, bool)])
    fails = np.flatnonzero(~_before(P, us, vs))
    if fails.size:
        k = fails[np.lexsort((is_window[fails], at[fails]))[0]]
        q, peer = int(at[k]), peers[which[at[k]]]
        if is_window[k]:
            return _fail("window", r, f"more than {window} messages may be in flight with rank {peer}")
        return _fail("posting order", r, f"post {int(seq[q])} with rank {peer} may start before post {int(seq[q - 1])}")
    return _hazards(P, r)


def _hazards(P: _Program, r: int) -> dict[str, Any] | None:
    """L4: H on r's buffers (its pieces, its slots), each read after the write before it, each write
    after the reads and the write before it, on r's own edges."""
    item_op, is_w, ev_e, is_slot, prev_w, next_w = _buffer_items(P)
    pos = np.arange(item_op.size)
    # RAW: a read after the last write; WAR: the next write after each read; WAW: a write right after a write
    raw = np.flatnonzero(~is_w & (prev_w >= 0))
    war = np.flatnonzero(~is_w & (next_w >= 0))
    waw = np.flatnonzero(is_w & (prev_w >= 0) & (prev_w == pos - 1))
    del pos
    us = np.concatenate([ev_e[prev_w[raw]], ev_e[war], ev_e[prev_w[waw]]])
    vs = 2 * item_op[np.concatenate([raw, next_w[war], waw])]
    fails = np.flatnonzero(~_before(P, us, vs))
    if not fails.size:
        return None
    at = np.concatenate([raw, next_w[war], waw])[fails]             # the item whose check it is
    sub = np.concatenate([np.zeros(raw.size, np.int64), war, waw])[fails]   # WAR: in the order of the reads
    what = np.repeat([0, 1, 2], [raw.size, war.size, waw.size])[fails]
    read = np.concatenate([raw, war, waw])[fails]
    k = np.lexsort((sub, at))[0]
    item, n = int(at[k]), int(item_op[at[k]])
    buf = ("s", P.ops[n].slot) if is_slot[item] else ("x", P.ops[n].piece)
    if what[k] == 1:
        return _fail("WAR", r, f"{buf}: op {n} may overwrite what op {int(ev_e[read[k]]) // 2} still reads")
    last = int(us[fails[k]]) // 2
    if what[k] == 2:
        return _fail("WAW", r, f"{buf}: op {n} may run before the write of op {last} has finished")
    return _fail("RAW", r, f"{buf}: op {n} may run before the write of op {last} has finished")


def _buffer_items(P: _Program) -> tuple[Ints, Bools, Ints, Bools, Ints, Ints]:
    """Every access to r's buffers as one sequence, buffer by buffer in the order the ops first
    touch them: a piece's accesses in op order, a slot's by (their flow's start, K, 0 for the
    write / 1 for the read, R before W, op). Per item: its op, whether it writes, the event that
    ends it, whether the buffer is a slot, and the item of the write before it and after it in
    its buffer (-1: none)."""
    kc = P.kc
    snap_send = (kc == SEND) & ~P.slot_none
    # piece items, in op order: (W: scale, land; R: snap, a direct send)
    x_ops = np.flatnonzero((kc == SCALE) | (kc == LAND) | (kc == SNAP) | ((kc == SEND) & P.slot_none))
    x_w = (kc[x_ops] == SCALE) | (kc[x_ops] == LAND)
    x_e = 2 * x_ops + ((kc[x_ops] == SEND) & P.slot_none[x_ops])
    # slot items, by (their flow's start, posting key, 0 for the write / 1 for the read), then R < W, op
    s_ops = np.flatnonzero((kc == LAND) | (kc == SNAP) | snap_send | (kc == RECV))
    s_w = (kc[s_ops] == SNAP) | (kc[s_ops] == RECV)
    s_e = 2 * s_ops + (snap_send[s_ops] | (kc[s_ops] == RECV))
    sorter = np.argsort(4 * P.krank[P.fi[s_ops]] + 2 * ~s_w + s_w, kind="stable")   # (start, K): K begins with the start
    s_ops, s_w, s_e = s_ops[sorter], s_w[sorter], s_e[sorter]
    del sorter, snap_send
    # buffers: ("x", piece) and ("s", slot), ranked by their first item as the ops append them
    slot_val = P.slot.copy()
    if P.slot_none.any():
        slot_val[P.slot_none] = (P.slot.min() if P.n else 0) - 1     # ("s", None) is its own buffer
    x_buf, s_buf = P.piece[x_ops], slot_val[s_ops]
    del slot_val
    lo = min(x_buf.min(initial=0), s_buf.min(initial=0))
    bufs = 2 * (np.concatenate([x_buf, s_buf]) - lo) + np.repeat([0, 1], [x_buf.size, s_buf.size])
    del x_buf, s_buf
    if bufs.size and bufs.max() < 4 * bufs.size:       # small codes (pieces, slots): a table, not a sort
        used = np.zeros(int(bufs.max()) + 1, bool)
        used[bufs] = True
        ids = np.flatnonzero(used)
        inverse = np.cumsum(used)[bufs] - 1
    else:
        ids, inverse = np.unique(bufs, return_inverse=True)
    del bufs
    first_at = np.full(ids.size, np.iinfo(np.int64).max)
    np.minimum.at(first_at, inverse, np.concatenate([2 * x_ops, 2 * s_ops + 1]))   # land, snap: the piece first
    rank_of = np.empty(ids.size, np.int64)
    rank_of[np.argsort(first_at)] = np.arange(ids.size)
    brank = rank_of[inverse]
    del inverse
    # one sequence of items: by buffer rank, then within the buffer (op order, or the slot order above)
    seq = np.argsort(brank, kind="stable")                       # within a buffer: one part, in its order
    item_op = np.concatenate([x_ops, s_ops])[seq]
    is_w = np.concatenate([x_w, s_w])[seq]
    ev_e = np.concatenate([x_e, s_e])[seq]
    is_slot = np.repeat([False, True], [x_ops.size, s_ops.size])[seq]
    b = brank[seq]
    del seq, brank, x_ops, s_ops, x_w, s_w, x_e, s_e
    m = item_op.size
    if not m:
        return item_op, is_w, ev_e, is_slot, item_op, item_op
    pos = np.arange(m)
    start_of = np.flatnonzero(np.concatenate([[True], b[1:] != b[:-1]]))
    run = np.diff(np.concatenate([start_of, [m]]))
    last_w = np.maximum.accumulate(np.where(is_w, pos, -1))
    prev_w = np.concatenate([[-1], last_w[:-1]])
    prev_w[prev_w < np.repeat(start_of, run)] = -1                 # not in the item's buffer
    del last_w
    next_w = np.minimum.accumulate(np.where(is_w, pos, m)[::-1])[::-1]
    next_w = np.concatenate([next_w[1:], [m]])
    next_w[next_w >= np.repeat(start_of + run, run)] = -1
    return item_op, is_w, ev_e, is_slot, prev_w, next_w


def _before(P: _Program, us: Ints, vs: Ints) -> Bools:
    """For each query, whether event us[q] happens before vs[q] (event 2·op, + 1 for a completion) on
    r's own edges: a start after its deps, a post's completion after its start and after the
    previous post's completion with its peer. Every edge goes to a larger event number."""
    out = np.zeros(len(us), bool)
    for a in range(0, len(us), _CHUNK):                # bounded temporaries
        out[a:a + _CHUNK] = _before_chunk(P, us[a:a + _CHUNK], vs[a:a + _CHUNK])
    return out


def _before_chunk(P: _Program, us: Ints, vs: Ints) -> Bools:
    us, vs = np.asarray(us, np.int64), np.asarray(vs, np.int64)
    if P._direct is None:
        P._direct = _direct_edges(P)
    vn, vc = vs // 2, vs % 2
    start = vc == 0
    hit = np.zeros(us.size, bool)
    kind, direct = P._direct
    if kind == "rows":
        assert direct is not None
        hit[start] = (direct[vn[start]] == us[start, None]).any(axis=1)
    elif kind == "codes":
        assert direct is not None
        q = vn * (2 * P.n + 2) + us
        at = np.minimum(np.searchsorted(direct, q), direct.size - 1)
        hit = start & (direct[at] == q)
    prev = P.prev_post[vn] if vs.size else vs
    hit |= (vc == 1) & ((us == vs - 1) | ((prev >= 0) & (us == 2 * prev + 1)))
    hit &= us != vs
    rest = np.flatnonzero(~hit & (us < vs))
    if rest.size:
        if P._graph is None:
            P._graph = ((2 * P.dep_m + P.dep_C).tolist(), np.concatenate([[0], np.cumsum(P.dep_count)]).tolist(),
                        P.prev_post.tolist())
        for j in rest.tolist():
            hit[j] = _reach(int(us[j]), int(vs[j]), *P._graph)
    return hit


def _direct_edges(P: _Program) -> tuple[str, Ints | None]:
    """Each op's dependency events: as rows of a table (-1 padded) where no op has more than _ROW,
    else as one sorted code per (op, event)."""
    dep_ev = 2 * P.dep_m + P.dep_C
    if not dep_ev.size:
        return "none", None
    if P.dep_count.max() <= _ROW:
        first = np.concatenate([[0], np.cumsum(P.dep_count)[:-1]])
        table = np.full((P.n, int(P.dep_count.max())), -1, np.int64)
        table[P.dep_owner, np.arange(dep_ev.size) - first[P.dep_owner]] = dep_ev
        return "rows", table
    return "codes", np.sort(P.dep_owner * (2 * P.n + 2) + dep_ev)


def _reach(u: int, v: int, deps: list[int], indptr: list[int], prev_post: list[int]) -> bool:
    """u happens before v: a search back from v, never below u (edges only go up)."""
    seen, todo = {v}, [v]
    while todo:
        x = todo.pop()
        n, c = divmod(x, 2)
        if c:
            ys = [x - 1] if prev_post[n] < 0 else [x - 1, 2 * prev_post[n] + 1]
        else:
            ys = deps[indptr[n]:indptr[n + 1]]
        for y in ys:
            if y == u:
                return True
            if y > u and y not in seen:
                seen.add(y)
                todo.append(y)
    return False
