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

Completions are observed by one waiter thread per peer that waits on that peer's works in
posting order (gloo has no wait-any and its is_completed() is only set by wait()); the thread
that observes a completion queues it and, unless another thread is already serving the run,
applies it and runs the ops it enables at once; a thread that finds the run being served goes
back to waiting and leaves its completion to the one serving (`_Run.serve`), so no enabled op
waits for a thread to wake up or for a lock while another is blocked: the fair execution the
proof assumes. Host cost per post (docs/gpu_runner.md, "Host cost per post"): ops are bound
once per tensor to an op code and their views, posts call the process group's send/recv as
torch.distributed.isend/irecv do after their checks (done once), dependency counts are
decremented along precomputed dependents, and the per-peer queues are C `SimpleQueue`s.

`close()` ends the waiter threads (call it before destroy_process_group); an atexit handler
closes every executor still open, so that no waiter thread is left to be killed by interpreter
shutdown (a daemon thread killed while it re-enters Python from a C++ call aborts the process).
"""
from __future__ import annotations

import atexit
import heapq
import json
import os
import queue
import threading
import time
import weakref
from collections import deque

import torch
import torch.distributed as dist

from gpu_runner.executor import RunnerError, _flat
from gpu_runner.proof import check_proved_program, gate, rank_program_of
from optcc.errors import OptccError
from optcc.lowering.step import ALIGN, piece_ranges
from optcc.lowering.streaming import DEFAULT_WINDOW, StreamingProgram

POLL_S = 20e-6     # NCCL waiter: is_completed() poll period (its wait() does not block the CPU)
EXIT_JOIN_S = 30.0  # policy (not from the paper): how long interpreter exit waits for a run to end
TRACE_ENV = "OPTCC_STREAM_TRACE"   # a folder: each rank appends its runs' post/complete times there


# Op codes of a bound program (one small int per op, so the posting loop branches on an int).
_RECV, _SEND, _COPY, _ADD, _AXPY, _SCALE = range(6)


class _BoundProgram:
    """The program bound to one tensor: per op, its code and the views it reads and writes (a post
    holds the one-tensor list the process group's send/recv take, built once)."""

    def __init__(self, schedule, rp, flat, scratch, offsets):
        ranges = piece_ranges(schedule.pieces, flat.numel())
        flows = schedule.flows
        self.flat = flat
        self.args = []
        for op in rp.ops:
            lo, hi = ranges[op.piece]
            x = flat[lo:hi]
            s = None if op.slot is None else scratch[offsets[op.slot]:offsets[op.slot] + hi - lo]
            if op.kind == "recv":
                self.args.append((_RECV, [s], op.peer))
            elif op.kind == "send":
                self.args.append((_SEND, [x if s is None else s], op.peer))
            elif op.kind == "snap":
                self.args.append((_COPY, s, x))
            elif op.kind == "land":
                f = flows[op.flow]
                if f.op == "copy":
                    self.args.append((_COPY, x, s))
                elif f.coef == 1:
                    self.args.append((_ADD, x, s))
                else:
                    self.args.append((_AXPY, x, s, f.coef))
            else:
                self.args.append((_SCALE, x, schedule.local_ops[op.local].coef))


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
        n = len(rp.ops)
        after = ([[] for _ in range(n)], [[] for _ in range(n)])   # dependents of S, of C
        self._ndeps = [len(op.deps) for op in rp.ops]
        for k, op in enumerate(rp.ops):
            for m, ev in op.deps:
                after[ev == "C"][m].append(k)
        self._after_s = tuple(tuple(d) for d in after[0])
        self._after_c = tuple(tuple(d) for d in after[1])
        self._start = [k for k in range(n) if self._ndeps[k] == 0]
        self._n_posts = sum(1 for op in rp.ops if op.kind in ("send", "recv"))
        self._waiters: dict = {}            # peer -> (queue, thread)
        self._route = None                  # (process group, {peer: (its group rank, its queue)})
        self._running = threading.Lock()    # held by run(); close() waits for it
        self._failed = False                # a run raised: works may still be in flight
        stop = weakref.finalize(self, _stop_waiters, self._waiters)   # dropped unclosed: end them
        stop.atexit = False                 # at exit _close_open_executors joins them instead
        self._scratch: dict = {}
        self._bound: dict = {}
        self._connected = False

    def _peer(self, r: int) -> int:
        return r if self.group_ranks is None else self.group_ranks[r]

    def prepare(self, tensor: torch.Tensor) -> _BoundProgram:
        flat = _flat(tensor)
        key = (flat.data_ptr(), flat.numel(), flat.dtype, flat.device)
        bound = self._bound.get(key)
        if bound is not None:
            return bound
        ranges = piece_ranges(self.schedule.pieces, flat.numel())
        sizes = [0] * self.rp.n_slots
        for op in self.rp.ops:
            if op.slot is not None:
                lo, hi = ranges[op.piece]
                sizes[op.slot] = max(sizes[op.slot], -(-(hi - lo) // ALIGN) * ALIGN)
        offsets = [sum(sizes[:k]) for k in range(len(sizes))]
        skey = (flat.numel(), flat.dtype, flat.device)
        scratch = self._scratch.get(skey)
        if scratch is None:
            scratch = self._scratch[skey] = torch.empty(max(sum(sizes), 1), dtype=flat.dtype, device=flat.device)
        if len(self._bound) > 8:
            self._bound.clear()
        bound = self._bound[key] = _BoundProgram(self.schedule, self.rp, flat, scratch, offsets)
        return bound

    def _waiter(self, peer: int) -> queue.SimpleQueue:
        w = self._waiters.get(peer)
        if w is None:
            q = queue.SimpleQueue()
            nccl = dist.get_backend(self.group) == "nccl"
            t = threading.Thread(target=_wait_loop, args=(q, nccl), daemon=True, name=f"optcc-wait-{peer}")
            w = self._waiters[peer] = (q, t)
            _open.add(self)
            t.start()
        return w[0]

    def _routes(self):
        """The process group and, per peer of the program, (its rank in that group, its waiter's
        queue): what torch.distributed.isend/irecv would compute on every call, computed once (again
        after close() or when the default group changed). Starts the waiter threads."""
        pg = self.group if self.group is not None else dist.group.WORLD
        route = self._route
        if route is None or route[0] is not pg or any(p not in self._waiters for p in route[1]):
            if pg is None:
                raise RunnerError("the default process group is not initialised")
            if dist.get_rank(pg) < 0:
                raise RunnerError("this process is not a member of the executor's process group")
            route = self._route = (pg, {peer: (dist.get_group_rank(pg, self._peer(peer)), self._waiter(peer))
                                        for peer in self.rp.peer_seq})
        return route

    @property
    def failed(self) -> bool:
        """A run raised (gpu_runner.runners.RankExecutor)."""
        return self._failed

    def close(self, timeout: float | None = None) -> bool:
        """Wait for the run in progress (if any), then end and join the waiter threads. Idempotent;
        a later run() starts new ones. False if a run or a thread did not end within `timeout`.
        After a failed run it does not wait: a waiter may be blocked on a dead peer for good."""
        if not self._running.acquire(timeout=-1 if timeout is None else timeout):
            return False
        try:
            waiters = list(self._waiters.values())
            self._waiters.clear()
            self._route = None
            _open.discard(self)
            if self._failed:
                timeout = 0.0
        finally:
            self._running.release()
        return _join_waiters(waiters, timeout)

    def run(self, tensor: torch.Tensor) -> torch.Tensor:
        """AllReduce `tensor` in place; returns it."""
        with self._running:
            return self._run(tensor)

    def _run(self, tensor: torch.Tensor) -> torch.Tensor:
        bound = self.prepare(tensor)
        if not self._connected and dist.get_backend(self.group) == "nccl":
            _connect_pairs(self.rank, self.rp.peer_seq, self._peer, self.group, bound.flat.device)
        self._connected = True
        run = _Run(self, bound, *self._routes())
        run.lock.acquire()
        run.serve()
        if self.watchdog is not None:
            self.watchdog.waiting(run.describe)
        run.finished.wait()
        if run.error is not None:
            self._failed = True
            raise run.error
        if run.trace is not None:
            _write_trace(self, run)
        return tensor


class _Run:
    """One execution. A waiter thread that sees a completion queues it on `done` and, if it gets
    `lock`, applies every queued completion and runs the ops they enable; a waiter that finds the
    lock taken goes back to waiting at once, its completion served by the holder, which looks at
    `done` again after releasing (so none is left behind). Posting never blocks, so an enabled op
    never waits for a thread to wake up or for a lock: the fair execution the proof assumes."""

    def __init__(self, ex: StreamingExecutor, bound: _BoundProgram, pg, routes):
        self.ex, self.args, self.ops = ex, bound.args, ex.rp.ops
        self.pg, self.routes = pg, routes
        self.lock = threading.Lock()
        self.finished = threading.Event()
        self.done: deque = deque()            # (op, error or None) completions not yet applied
        self.remaining = list(ex._ndeps)
        self.ready = list(ex._start)
        heapq.heapify(self.ready)
        self.state = bytearray(len(self.ops))   # per op: 1 posted, 2 completed
        self.posted = self.completed = self.started = 0
        self.error: Exception | None = None
        self.t0 = time.perf_counter()
        self.trace = {} if os.environ.get(TRACE_ENV) else None   # op -> [post_s, complete_s]

    def serve(self) -> None:
        """With `lock` held: apply queued completions and run what they enable until none is
        queued, then release it; take it again if a completion came in meanwhile (its waiter found
        the lock taken and left it to us)."""
        done, finished = self.done, self.finished
        while True:
            try:
                while not finished.is_set():
                    if done:
                        self._apply(done)
                        if finished.is_set():
                            break
                    self.pump()
                    if not done:
                        break
                if finished.is_set():
                    done.clear()              # a failed run: later completions change nothing
            finally:
                self.lock.release()
            if not done or not self.lock.acquire(False):
                return

    def _apply(self, done: deque) -> None:
        remaining, ready, state, after_c = self.remaining, self.ready, self.state, self.ex._after_c
        while done:
            k, err = done.popleft()
            if err is not None:
                first = (str(err).strip().splitlines() or [type(err).__name__])[0]
                self._fail(RunnerError(f"peer failure while waiting for {self._what(k)}: {first}"))
                return
            state[k] = 2
            self.completed += 1
            if self.trace is not None:
                self.trace[k][1] = time.perf_counter() - self.t0
            for m in after_c[k]:
                remaining[m] -= 1
                if remaining[m] == 0:
                    heapq.heappush(ready, m)

    def pump(self) -> None:
        """Run every enabled op, lowest index first (lock held); finish when every post completed."""
        args, ready, remaining, state, routes, pg = self.args, self.ready, self.remaining, self.state, self.routes, self.pg
        after_s, trace = self.ex._after_s, self.trace
        pop, push = heapq.heappop, heapq.heappush
        k = None
        try:
            while ready:
                k = pop(ready)
                a = args[k]
                code = a[0]
                if trace is not None:
                    trace[k] = [time.perf_counter() - self.t0, None]
                if code == _RECV:
                    rank, q = routes[a[2]]
                    state[k] = 1
                    self.posted += 1
                    q.put((k, pg.recv(a[1], rank, 0), self))     # torch.distributed.irecv's call
                elif code == _SEND:
                    rank, q = routes[a[2]]
                    state[k] = 1
                    self.posted += 1
                    q.put((k, pg.send(a[1], rank, 0), self))     # torch.distributed.isend's call
                elif code == _ADD:
                    a[1].add_(a[2])
                elif code == _COPY:
                    a[1].copy_(a[2])
                elif code == _AXPY:
                    a[1].add_(a[2], alpha=a[3])
                else:
                    a[1].mul_(a[2])
                self.started += 1
                for m in after_s[k]:
                    remaining[m] -= 1
                    if remaining[m] == 0:
                        push(ready, m)
        except Exception as e:  # noqa: BLE001 - ends the run; the runner thread raises it
            self._fail(RunnerError(f"posting or applying op {k} failed (streaming): {e}"))
            return
        if self.completed == self.ex._n_posts:
            if self.started != len(self.ops):
                self._fail(RunnerError(f"internal: {len(self.ops) - self.started} ops of the streaming program never ran"))
            self.finished.set()
        elif self.posted == self.completed and not self.done:
            self._fail(RunnerError("internal: the streaming program stalled with nothing in flight"))

    def complete(self, k: int, err) -> None:
        """Called by a waiter thread when op k's work finished (err: its exception or None)."""
        self.done.append((k, err))
        if self.lock.acquire(False):
            self.serve()
        if self.ex.watchdog is not None:
            self.ex.watchdog.beat()

    def _fail(self, error: Exception) -> None:
        if self.error is None:
            self.error = error
        self.finished.set()

    def _what(self, k: int) -> str:
        op = self.ops[k]
        if op.kind == "recv":
            return f"the data of flow {op.flow} from rank {op.peer} (streaming)"
        return f"the send of flow {op.flow} to rank {op.peer} to complete (streaming)"

    def describe(self) -> str:
        k = self.state.find(1)
        return self._what(k) if k >= 0 else "the streaming run to finish"


def _write_trace(ex: StreamingExecutor, run: _Run) -> None:
    """Append one JSON line per run: per op its kind, flow, peer, schedule start (slot units),
    measured start/complete seconds since the run began, and its deps (gpu_runner.stream_trace
    reads it; docs/gpu_runner.md, "Where the time goes")."""
    flows = ex.schedule.flows
    rows = []
    for k, (post, done) in sorted(run.trace.items()):
        op = run.ops[k]
        start = None if op.flow is None else float(flows[op.flow].start)
        rows.append([k, op.kind, op.flow, op.peer, start, post, done, [list(d) for d in op.deps]])
    path = os.path.join(os.environ[TRACE_ENV], f"rank{ex.rank}.jsonl")
    with open(path, "a") as f:
        f.write(json.dumps({"rank": ex.rank, "total_s": time.perf_counter() - run.t0, "ops": rows}) + "\n")


def _wait_loop(todo: queue.SimpleQueue, nccl: bool) -> None:
    """Wait on one peer's works in posting order; hand each completion (or error) to its run.
    None ends the loop. No work or run is kept past its completion (nothing of the process
    group outlives the run on this thread)."""
    get = todo.get
    while True:
        item = get()
        if item is None:
            return
        k, work, run = item
        del item
        err = None
        try:
            if nccl:
                while not work.is_completed():
                    time.sleep(POLL_S)
            work.wait()
        except Exception as e:  # noqa: BLE001 - handed to the run, whose runner thread raises it
            err = e
        del work
        run.complete(k, err)
        del run, err


def _stop_waiters(waiters: dict) -> None:
    for q, _ in waiters.values():
        q.put(None)


def _join_waiters(waiters, timeout: float | None) -> bool:
    for q, _ in waiters:
        q.put(None)          # after every work already queued: FIFO
    deadline = None if timeout is None else time.monotonic() + timeout
    for _, t in waiters:
        t.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
    return not any(t.is_alive() for _, t in waiters)


_open: weakref.WeakSet = weakref.WeakSet()    # executors with live waiter threads


@atexit.register
def _close_open_executors() -> None:
    """At interpreter exit (before daemon threads are killed), end every executor's waiters."""
    for ex in list(_open):
        ex.close(EXIT_JOIN_S)


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
