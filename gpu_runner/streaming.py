"""Streaming runner: each op of the rank's program starts as soon as its dependencies happened.

No per-time barrier: a receive is posted as soon as its scratch slot is free, a send as soon as
the value it reads has landed, a landing as soon as its data arrived and no older read of the
piece is in flight; posts to one peer go in posting order, at most `window` in flight; a send
to another peer than the previous one on its link waits for it when the schedule ends it first
(port order), and with `recv_order` (runner "streaming-ordered") receives do the same. The
program and its dependencies come from optcc.lowering.streaming; verifier.streaming proves every
interleaving safe (no hazard, no deadlock). The constructor runs only a program whose digest a
proof (or the launcher's attestation) recorded in this process (gpu_runner.proof.rank_program_of
/ check_proved_program), and, like every entry point that executes a schedule, refuses one that
gpu_runner.proof.gate does not let through; `unsafe=True` skips both, for tests.

One completion path, no thread: the thread that calls run() posts and applies everything. It
runs every enabled op (lowest index first); when none is enabled it waits for the in-flight post
of the lowest index (gloo has no wait-any, and its is_completed() is only set by wait(); NCCL's
is polled), applies that completion and runs what it enables. Why this never deadlocks although
a later post may complete first and wait unobserved: a rank's ops are sorted by the order key
κ = (time, class, posting key) of verifier.streaming_local, the same for a flow's two ends, and
every edge of the progress graph increases κ (property D there, machine-checked by prove-all's
streaming_order). Take the event of least key that has not happened on any rank: a start has
every dependency done, so the rank runs it before it waits; a completion has both ends posted,
so the transport completes it, and its rank, having observed every completion of lower key,
waits on exactly that post. Safety needs no fairness: every interleaving is proved safe.
Which event comes next (an op's start, or the wait for a post) depends only on the program, never
on when the transport completes a post: a wait blocks until its post completes, and the post
waited on is the lowest in flight, not the first done. So the first complete run records its
events and later runs replay them (_replay): no heap and no dependency counting per run.
Host cost per post (docs/gpu_runner.md, "Host cost per post"): ops are bound once per tensor to
one tuple each (op code, index, views), a replayed run's events once per tensor to a list of
those tuples and one per wait; posts call the process group's send/recv as
torch.distributed.isend/irecv do after their checks (done once), the works in flight live in one
list indexed by op (no object is made per message but the Work the process group returns), and
there is no thread hand-off.

`close()` waits for a run in progress (it kept its RankExecutor meaning; there is no thread to end).
"""
from __future__ import annotations

import heapq
import json
import os
import threading
import time
from itertools import accumulate
from operator import itemgetter

import numpy as np
import torch
import torch.distributed as dist

from gpu_runner.executor import RunnerError, _flat
from gpu_runner.proof import built_columns, check_proved_program, gate, gc_paused, rank_program_of
from optcc.errors import OptccError
from optcc.lowering.step import ALIGN, piece_ranges
from optcc.lowering.streaming import DEFAULT_WINDOW, StreamingProgram
from verifier.streaming_local import LAND as _K_LAND, RECV as _K_RECV, SEND as _K_SEND, SNAP as _K_SNAP, OpColumns

POLL_S = 20e-6     # NCCL: is_completed() poll period of the post waited on (its wait() does not block the CPU)
EXIT_JOIN_S = 30.0  # policy (not from the paper): how long interpreter exit waits for a run to end (the DDP hook)
TRACE_ENV = "OPTCC_STREAM_TRACE"   # a folder: each rank appends its runs' post/complete times there


# Op codes of a bound program (one small int per op, so the posting loop branches on an int),
# and of a replayed run's wait for a post.
_RECV, _SEND, _COPY, _ADD, _AXPY, _SCALE, _WAIT = range(7)


class _BoundProgram:
    """The program bound to one tensor: per op one tuple (code, op, x, y), x and y the views it
    writes and reads (a post: the one-tensor list the process group's send/recv take and the
    peer's schedule rank; an axpy's y: its source and coefficient), and the list that holds each
    post's Work while it is in flight. One view (and list) per piece and per scratch slot and
    length, shared by the ops that touch it, not one per op. `fields`: the ops' columns (kind
    code of verifier.streaming_local, piece, slot or -1, peer, flow, local op); the tuples are
    made kind by kind from them (no Python branch per op), then put in op order."""

    def __init__(self, schedule, fields, flat, scratch, offsets, ranges):
        flows, local_ops = schedule.flows, schedule.local_ops
        kc, piece, slot, peer, flow, local = fields
        n = kc.size
        self.flat = flat
        self.works: list = [None] * n
        self._events: tuple | None = None    # (order, the events) of the last events() call
        lens = [hi - lo for lo, hi in ranges]
        pv = [(v, [v]) for v in flat.split(lens)]      # every piece's view in one call (ranges tile flat)
        op_len = np.array(lens, np.int64)[piece] if n else np.zeros(0, np.int64)
        held = slot >= 0
        wide = int(op_len.max(initial=0)) + 1
        keys, sid = np.unique(slot[held].astype(np.int64) * wide + op_len[held], return_inverse=True)
        sv = [(v, [v]) for v in (scratch[offsets[k // wide]:offsets[k // wide] + k % wide] for k in keys.tolist())]
        slot_id = np.full(n, -1, np.int64)            # each op's (slot, length) view, as its place in sv
        slot_id[held] = sid
        kinds = {k: np.flatnonzero(kc == k) for k in (_K_RECV, _K_SEND, _K_SNAP, _K_LAND)}
        if (slot_id[np.concatenate([kinds[_K_RECV], kinds[_K_SNAP], kinds[_K_LAND]])] < 0).any():
            raise OptccError("program", "a receive, snapshot or landing without a slot")
        first, second = itemgetter(0), itemgetter(1)

        def pieces(at, part):                       # the piece views (part 0) or lists (part 1) of ops `at`
            return map(part, map(pv.__getitem__, piece[at].tolist()))

        def slots(at, part):                        # the same of their slots
            return map(part, map(sv.__getitem__, slot_id[at].tolist()))
        code = np.full(n, _SCALE, np.int64)         # any other kind: scale
        x, y = np.empty(n, object), np.empty(n, object)

        def put(at, c, xs, ys):                     # ops `at`: their code, x and y
            code[at] = c
            x[at] = np.fromiter(xs, object, at.size)
            y[at] = np.fromiter(ys, object, at.size)
        at = kinds[_K_RECV]
        put(at, _RECV, slots(at, second), peer[at].tolist())
        at = kinds[_K_SEND]
        direct, snapped = at[slot_id[at] < 0], at[slot_id[at] >= 0]     # from the piece, from its snapshot
        put(direct, _SEND, pieces(direct, second), peer[direct].tolist())
        put(snapped, _SEND, slots(snapped, second), peer[snapped].tolist())
        at = kinds[_K_SNAP]
        put(at, _COPY, slots(at, first), pieces(at, first))
        at = kinds[_K_LAND]
        land = [(f.op, f.coef) for f in map(flows.__getitem__, flow[at].tolist())]
        c = np.array([_COPY if o == "copy" else _ADD if k == 1 else _AXPY for o, k in land], np.int64)
        put(at, _ADD, pieces(at, first), (s if cc != _AXPY else (s, k)
                                          for s, cc, (_, k) in zip(slots(at, first), c.tolist(), land)))
        code[at] = c
        at = np.flatnonzero(~np.isin(kc, list(kinds)))   # scale (any other kind)
        put(at, _SCALE, pieces(at, first), [local_ops[j].coef for j in local[at].tolist()])
        self.args = list(zip(code.tolist(), range(n), x.tolist(), y.tolist()))   # made in op order

    def events(self, order: list) -> list:
        """The recorded run `order` (StreamingExecutor._order: op k's start as k, a wait as its
        tuple) as the replay's events on this tensor: an op's start is its tuple of `args`, a wait
        for post k is (_WAIT, k, None, None). Built once per order, kept for the next run."""
        cached = self._events
        if cached is not None and cached[0] is order:
            return cached[1]
        args = self.args
        out = [e if e.__class__ is tuple else args[e] for e in order]
        self._events = (order, out)
        return out


class StreamingExecutor:
    """Runs one Schedule on this rank, streaming; same interface as executor.Executor."""

    def __init__(self, schedule, rank: int, group=None, group_ranks=None, watchdog=None,
                 window: int = DEFAULT_WINDOW, program=None, recv_order: bool = False, *,
                 certificate: str | None = None, unsafe: bool = False):
        self.proof = gate(schedule, certificate, unsafe)       # OptccError for an unproved schedule
        self.schedule = schedule
        self.rank = rank
        self.group = group
        self.group_ranks = group_ranks
        self.watchdog = watchdog
        if program is None:
            rp = rank_program_of(schedule, rank, window, recv_order)
        else:
            rp = program.ranks[rank] if isinstance(program, StreamingProgram) else program
            if rp.rank != rank:
                raise OptccError("program", f"the program given is rank {rp.rank}'s, this executor runs rank {rank}")
            if not unsafe:
                check_proved_program(schedule, rp, window, recv_order)
        self.window, self.recv_order = window, recv_order
        self.rp = rp
        with gc_paused():
            cols = built_columns(schedule, rp, window, recv_order)    # what L1-L5 read, where it ran here
            if cols is None:
                cols = OpColumns.of(rp)
                if any(c.any() for c in (cols.piece_odd, cols.flow_odd, cols.peer_odd, cols.slot_odd,
                                         cols.local_odd, cols.dep_m_odd)):
                    raise OptccError("program", f"rank {rank}'s program has a field that is neither an integer nor None")
            self._after_s, self._after_c, self._ndeps, self._start = _dependents(cols, rank)
            # what binding reads, op by op (kind code, piece, slot or -1, peer, flow, local op); compact
            self._fields = tuple(map(_compact, (cols.kc, cols.piece, np.where(cols.slot_none, -1, cols.slot),
                                                cols.peer, cols.flow, cols.local)))
            del cols
        self._route = None                  # (process group, nccl, group rank per schedule rank)
        self._running = threading.Lock()    # held by run(); close() waits for it
        self._failed = False                # a run raised: works may still be in flight
        self._scratch: dict = {}
        self._bound: dict = {}
        self._connected = False
        self._waiting = -1                  # the post a run waits on (for the watchdog's message)
        self._abandoned: list = []          # works a failed run left in flight
        self._order: list | None = None     # the events of the first complete run (_BoundProgram.events)

    def _peer(self, r: int) -> int:
        return r if self.group_ranks is None else self.group_ranks[r]

    def prepare(self, tensor: torch.Tensor) -> _BoundProgram:
        flat = _flat(tensor)
        key = (flat.data_ptr(), flat.numel(), flat.dtype, flat.device)
        bound = self._bound.get(key)
        if bound is not None:
            return bound
        with gc_paused():
            return self._bind(flat, key)

    def _bind(self, flat: torch.Tensor, key) -> _BoundProgram:
        ranges = piece_ranges(self.schedule.pieces, flat.numel())
        fields = self._fields
        piece, slot = fields[1], fields[2]
        held = slot >= 0
        aligned = -(-np.array([hi - lo for lo, hi in ranges], np.int64)[piece[held]] // ALIGN) * ALIGN
        sizes = np.zeros(self.rp.n_slots, np.int64)
        np.maximum.at(sizes, slot[held], aligned)      # each slot: its longest piece, aligned
        sizes = sizes.tolist()
        offsets = [0, *accumulate(sizes)][:-1]
        skey = (flat.numel(), flat.dtype, flat.device)
        scratch = self._scratch.get(skey)
        if scratch is None:
            scratch = self._scratch[skey] = torch.empty(max(sum(sizes), 1), dtype=flat.dtype, device=flat.device)
        if len(self._bound) > 8:
            self._bound.clear()
        bound = self._bound[key] = _BoundProgram(self.schedule, fields, flat, scratch, offsets, ranges)
        return bound

    def _routes(self):
        """The process group, whether it is NCCL, and per schedule rank of a peer its rank in that
        group: what torch.distributed.isend/irecv would compute on every call, computed once (again
        when the default group changed)."""
        pg = self.group if self.group is not None else dist.group.WORLD
        route = self._route
        if route is None or route[0] is not pg:
            if pg is None:
                raise RunnerError("the default process group is not initialised")
            if dist.get_rank(pg) < 0:
                raise RunnerError("this process is not a member of the executor's process group")
            to = [-1] * self.schedule.cluster.p
            for peer in self.rp.peer_seq:
                to[peer] = dist.get_group_rank(pg, self._peer(peer))
            route = self._route = (pg, dist.get_backend(pg) == "nccl", to)
        return route

    @property
    def failed(self) -> bool:
        """A run raised (gpu_runner.runners.RankExecutor)."""
        return self._failed

    def close(self, timeout: float | None = None) -> bool:
        """Wait for the run in progress (if any); False if it did not end within `timeout`. There
        is no thread to end: runs post and observe on the caller's thread. Idempotent."""
        if not self._running.acquire(timeout=-1 if timeout is None else timeout):
            return False
        self._running.release()
        return True

    def run(self, tensor: torch.Tensor) -> torch.Tensor:
        """AllReduce `tensor` in place; returns it."""
        with self._running:
            return self._run(tensor)

    def _run(self, tensor: torch.Tensor) -> torch.Tensor:
        bound = self.prepare(tensor)
        if not self._connected and dist.get_backend(self.group) == "nccl":
            _connect_pairs(self.rank, self.rp.peer_seq, self._peer, self.group, bound.flat.device)
        self._connected = True
        pg, nccl, to = self._routes()
        trace = {} if os.environ.get(TRACE_ENV) else None    # op -> [post_s, complete_s]
        if self.watchdog is not None:
            self.watchdog.waiting(self._describe)
        t0 = time.perf_counter()
        try:
            if self._order is not None and trace is None:
                self._replay(bound, pg, nccl, to)
            elif self._order is not None:
                self._execute(bound, pg, nccl, to, trace, t0)
            else:
                record: list = []                   # no GC pause here: DDP runs this beside autograd
                self._execute(bound, pg, nccl, to, trace, t0, record)
                self._order = [e if e[0] == _WAIT else e[1] for e in record]
                bound._events = (self._order, record)
        except BaseException:
            self._failed = True           # its works in flight are never waited for, nor destroyed
            self._abandoned.append(bound.works)    # (a gloo work dropped in flight may block)
            bound.works = [None] * len(bound.works)
            raise
        finally:
            self._waiting = -1
        if trace is not None:
            _write_trace(self, trace, time.perf_counter() - t0)
        return tensor

    def _execute(self, bound: _BoundProgram, pg, nccl: bool, to: list, trace, t0: float,
                 record: list | None = None) -> None:
        """Run every enabled op, lowest index first; with none enabled, wait for the in-flight post
        of the lowest index and apply its completion (module docstring: why this is live). With
        `record`, append each event as it happens (_BoundProgram.events): op k's start as its
        tuple of `bound.args`, the wait for post k as (_WAIT, k, None, None)."""
        args, works, after_s, after_c = bound.args, bound.works, self._after_s, self._after_c
        remaining = self._ndeps[:]
        ready = self._start[:]
        inflight: list = []
        pop, push = heapq.heappop, heapq.heappush
        recv, send = pg.recv, pg.send
        watchdog = self.watchdog
        note = record.append if record is not None else None
        k = None
        while True:
            try:
                while ready:
                    k = pop(ready)
                    a = args[k]
                    code, _, x, y = a
                    if trace is not None:
                        trace[k] = [time.perf_counter() - t0, None]
                    if note is not None:
                        note(a)
                    if code == _RECV:
                        works[k] = recv(x, to[y], 0)       # torch.distributed.irecv's call
                        push(inflight, k)
                    elif code == _SEND:
                        works[k] = send(x, to[y], 0)       # torch.distributed.isend's call
                        push(inflight, k)
                    elif code == _ADD:
                        x.add_(y)
                    elif code == _COPY:
                        x.copy_(y)
                    elif code == _AXPY:
                        x.add_(y[0], alpha=y[1])
                    else:
                        x.mul_(y)
                    for m in after_s[k]:
                        remaining[m] -= 1
                        if remaining[m] == 0:
                            push(ready, m)
            except Exception as e:  # noqa: BLE001 - ends the run with one clear error
                raise RunnerError(f"posting or applying op {k} failed (streaming): {e}") from e
            if not inflight:
                break
            k = pop(inflight)
            if note is not None:
                note((_WAIT, k, None, None))
            work = works[k]
            works[k] = None
            self._waiting = k
            try:
                if nccl:
                    while not work.is_completed():
                        time.sleep(POLL_S)
                work.wait()
            except Exception as e:  # noqa: BLE001 - a dead peer: one clear error
                raise _peer_failure(self, k, e) from e
            del work
            if trace is not None:
                trace[k][1] = time.perf_counter() - t0
            if watchdog is not None:
                watchdog.beat()
            for m in after_c[k]:
                remaining[m] -= 1
                if remaining[m] == 0:
                    push(ready, m)
        if any(remaining):      # an op with dependencies runs once they all happened: none may be left
            left = sum(1 for r in remaining if r)
            raise RunnerError(f"internal: the streaming program stalled: {left} ops never ran")

    def _replay(self, bound: _BoundProgram, pg, nccl: bool, to: list) -> None:
        """_execute's events in the order a complete run recorded (module docstring: the order is
        the program's, not the transport's): no heap, no dependency counting, the per-op branch and
        the op's views bound once per tensor (_BoundProgram.events)."""
        works, events = bound.works, bound.events(self._order)
        recv, send = pg.recv, pg.send
        beat = None if self.watchdog is None else self.watchdog.beat
        code = k = None
        try:
            for code, k, x, y in events:
                if code == _WAIT:
                    self._waiting = k
                    work = works[k]
                    works[k] = None
                    if nccl:
                        while not work.is_completed():
                            time.sleep(POLL_S)
                    work.wait()
                    if beat is not None:
                        beat()
                elif code == _SEND:
                    works[k] = send(x, to[y], 0)             # torch.distributed.isend's call
                elif code == _RECV:
                    works[k] = recv(x, to[y], 0)             # torch.distributed.irecv's call
                elif code == _ADD:
                    x.add_(y)
                elif code == _COPY:
                    x.copy_(y)
                elif code == _SCALE:
                    x.mul_(y)
                else:
                    x.add_(y[0], alpha=y[1])
        except Exception as e:  # noqa: BLE001 - ends the run with one clear error, as _execute's
            if code == _WAIT:                 # the loop's names hold the event that failed
                raise _peer_failure(self, k, e) from e
            raise RunnerError(f"posting or applying op {k} failed (streaming): {e}") from e

    def _what(self, k: int) -> str:
        op = self.rp.ops[k]
        if op.kind == "recv":
            return f"the data of flow {op.flow} from rank {op.peer} (streaming)"
        return f"the send of flow {op.flow} to rank {op.peer} to complete (streaming)"

    def _describe(self) -> str:
        k = self._waiting
        return self._what(k) if k >= 0 else "the streaming run to finish"


def _peer_failure(ex: StreamingExecutor, k: int, e: BaseException) -> RunnerError:
    """A wait for post k raised (a dead peer): one clear error naming what was awaited."""
    first = (str(e).strip().splitlines() or [type(e).__name__])[0]
    return RunnerError(f"peer failure while waiting for {ex._what(k)}: {first}")


def _compact(col):
    """An int64 column as int32 where every value fits (half the memory the executor keeps)."""
    i32 = np.iinfo(np.int32)
    return col.astype(np.int32) if not col.size or (i32.min <= col.min() and col.max() <= i32.max) else col


def _dependents(cols, rank: int) -> tuple[tuple, tuple, list, list]:
    """(dependents of each op's start S, of its completion C, each op's number of dependencies,
    the ops with none in index order), the dependents as tuples of op indices in index order
    (the shared empty tuple where none), from the ops' columns (verifier.streaming_local.OpColumns).
    OptccError "program" where a dependency names a later op: the wait-lowest-post rule's
    liveness needs every one earlier (module docstring)."""
    n = cols.n
    on, by, completion = cols.dep_m, cols.dep_owner, cols.dep_C
    ndeps = cols.dep_count.tolist()
    later = np.flatnonzero(on >= by)
    if later.size:
        i = int(later[0])
        raise OptccError("program", f"op {int(by[i])} of rank {rank}'s program depends on a later op ({int(on[i])})")
    out = []
    for sel in (~completion, completion):
        m, k = on[sel], by[sel]
        order = np.argsort(m, kind="stable")           # by op; each op's dependents stay in index order
        ks = tuple(k[order].tolist())                  # a slice of a tuple is a tuple (the shared () when empty)
        ends = np.cumsum(np.bincount(m, minlength=n)).tolist()
        out.append(tuple(map(ks.__getitem__, map(slice, [0] + ends[:-1], ends))))
    start = np.flatnonzero(np.array(ndeps, np.int64) == 0).tolist()   # sorted: a valid heap
    return out[0], out[1], ndeps, start


def _write_trace(ex: StreamingExecutor, trace: dict, total_s: float) -> None:
    """Append one JSON line per run: per op its kind, flow, peer, schedule start (slot units),
    measured start/complete seconds since the run began, and its deps (gpu_runner.stream_trace
    reads it; docs/gpu_runner.md, "Where the time goes")."""
    flows = ex.schedule.flows
    rows = []
    for k, (post, done) in sorted(trace.items()):
        op = ex.rp.ops[k]
        start = None if op.flow is None else float(flows[op.flow].start)
        rows.append([k, op.kind, op.flow, op.peer, start, post, done, [list(d) for d in op.deps]])
    path = os.path.join(os.environ[TRACE_ENV], f"rank{ex.rank}.jsonl")
    with open(path, "a") as f:
        f.write(json.dumps({"rank": ex.rank, "total_s": total_s, "ops": rows}) + "\n")


def handshake_order(rank: int, peers) -> list[tuple[int, int]]:
    """The pairs (a, b), a < b, of this rank with each peer it exchanges data with, in the one
    global order (sorted). Every rank walking its own pairs in this order cannot deadlock: the
    smallest pair not yet done is, on both its ends, the next one (every smaller pair is done)."""
    return sorted((min(rank, q), max(rank, q)) for q in set(peers) if q != rank)


def _connect_pairs(rank: int, peers, peer_of, group, device) -> None:
    """NCCL creates a communicator per pair on first use; create this rank's, and only those (a
    healthy OptCC rank talks to three peers, not p − 1), in handshake_order (untested on GPUs)."""
    one = torch.zeros(1, device=device)
    for a, b in handshake_order(rank, peers):
        if rank == a:
            dist.send(one, peer_of(b), group)
            dist.recv(one, peer_of(b), group)
        else:
            dist.recv(one, peer_of(a), group)
            dist.send(one, peer_of(a), group)
