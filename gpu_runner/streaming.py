"""Streaming runner: each op of the rank's program starts as soon as its dependencies happened.

No per-time barrier: a receive is posted as soon as its scratch slot is free, a send as soon as
the value it reads has landed, a landing as soon as its data arrived and no older read of the
piece is in flight; posts to one peer go in posting order, at most `window` in flight. The
program and its dependencies come from verifier.streaming, which proves every interleaving safe
(no hazard, no deadlock); the constructor refuses a schedule it does not prove.

Completions are observed by one waiter thread per peer that waits on that peer's works in
posting order (gloo has no wait-any), and reports them to the runner's queue; the runner thread
only blocks when no op is enabled, so it never holds back progress the proof counts on.
"""
from __future__ import annotations

import heapq
import queue
import threading
import time

import torch
import torch.distributed as dist

from gpu_runner.executor import RunnerError, _flat
from gpu_runner.plan import ALIGN, piece_ranges
from verifier.streaming import DEFAULT_WINDOW, prove_streaming

POLL_S = 20e-6     # NCCL waiter: is_completed() poll period (its wait() does not block the CPU)


class StreamingRefused(RunnerError):
    """The verifier did not prove streaming execution of this schedule safe."""


def require_streaming(schedule, window: int = DEFAULT_WINDOW):
    """The proved program, or StreamingRefused with the counterexample's message."""
    program, cx = prove_streaming(schedule, window)
    if cx is not None:
        raise StreamingRefused(f"streaming execution is not proved safe for this schedule: {cx['kind']}: "
                               f"{cx['message']}; run it with --runner step")
    return program


class _Bound:
    """The program bound to one tensor: per op, the views it reads and writes."""

    def __init__(self, schedule, rp, flat, scratch, offsets, peer_of):
        ranges = piece_ranges(schedule.pieces, flat.numel())
        flows = schedule.flows
        self.flat = flat
        self.args = []
        for op in rp.ops:
            lo, hi = ranges[op.piece]
            x = flat[lo:hi]
            s = None if op.slot is None else scratch[offsets[op.slot]:offsets[op.slot] + hi - lo]
            if op.kind == "recv":
                self.args.append((s, peer_of(op.peer)))
            elif op.kind == "send":
                self.args.append((x if s is None else s, peer_of(op.peer)))
            elif op.kind == "snap":
                self.args.append((s, x))
            elif op.kind == "land":
                f = flows[op.flow]
                self.args.append((x, s, f.op, f.coef))
            else:
                self.args.append((x, schedule.local_ops[op.local].coef))


class StreamingExecutor:
    """Runs one Schedule on this rank, streaming; same interface as executor.Executor."""

    def __init__(self, schedule, rank: int, group=None, group_ranks=None, watchdog=None,
                 window: int = DEFAULT_WINDOW, program=None):
        self.schedule = schedule
        self.rank = rank
        self.group = group
        self.group_ranks = group_ranks
        self.watchdog = watchdog
        program = program or require_streaming(schedule, window)
        self.program = program
        self.rp = rp = program.ranks[rank]
        n = len(rp.ops)
        self._after = ([[] for _ in range(n)], [[] for _ in range(n)])   # dependents of S, of C
        self._ndeps = [len(op.deps) for op in rp.ops]
        for k, op in enumerate(rp.ops):
            for m, ev in op.deps:
                self._after[ev == "C"][m].append(k)
        self._start = [k for k in range(n) if self._ndeps[k] == 0]
        self._n_posts = sum(1 for op in rp.ops if op.kind in ("send", "recv"))
        self._done: queue.Queue = queue.Queue()
        self._waiters: dict = {}
        self._scratch: dict = {}
        self._bound: dict = {}
        self._connected = False

    def _peer(self, r: int) -> int:
        return r if self.group_ranks is None else self.group_ranks[r]

    def prepare(self, tensor: torch.Tensor) -> _Bound:
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
        bound = self._bound[key] = _Bound(self.schedule, self.rp, flat, scratch, offsets, self._peer)
        return bound

    def _waiter(self, peer: int) -> queue.Queue:
        q = self._waiters.get(peer)
        if q is None:
            q = self._waiters[peer] = queue.Queue()
            nccl = dist.get_backend(self.group) == "nccl"
            threading.Thread(target=_wait_loop, args=(q, self._done, nccl), daemon=True,
                             name=f"optcc-wait-{peer}").start()
        return q

    def run(self, tensor: torch.Tensor) -> torch.Tensor:
        """AllReduce `tensor` in place; returns it."""
        bound = self.prepare(tensor)
        if not self._connected and dist.get_backend(self.group) == "nccl":
            _connect_pairs(self.schedule.cluster.p, self.rank, self._peer, self.group)
        self._connected = True
        ops, args, wd = self.rp.ops, bound.args, self.watchdog
        after_s, after_c = self._after
        remaining = list(self._ndeps)
        ready = list(self._start)
        heapq.heapify(ready)
        in_flight: dict[int, int] = {}
        completed = started = 0

        def fire(deps):
            for k in deps:
                remaining[k] -= 1
                if remaining[k] == 0:
                    heapq.heappush(ready, k)

        while True:
            while ready:
                k = heapq.heappop(ready)
                started += 1
                kind = ops[k].kind
                a = args[k]
                if kind == "recv":
                    self._waiter(ops[k].peer).put((k, dist.irecv(a[0], a[1], self.group)))
                    in_flight[k] = 1
                elif kind == "send":
                    self._waiter(ops[k].peer).put((k, dist.isend(a[0], a[1], self.group)))
                    in_flight[k] = 1
                elif kind == "land":
                    if a[2] == "copy":
                        a[0].copy_(a[1])
                    elif a[3] == 1:
                        a[0].add_(a[1])
                    else:
                        a[0].add_(a[1], alpha=a[3])
                elif kind == "snap":
                    a[0].copy_(a[1])
                else:
                    a[0].mul_(a[1])
                fire(after_s[k])
            if completed == self._n_posts:
                if started != len(ops):
                    raise RunnerError(f"internal: {len(ops) - started} ops of the streaming program never ran")
                break
            if not in_flight:
                raise RunnerError("internal: the streaming program stalled with nothing in flight")
            if wd is not None:
                wd.waiting(lambda: self._describe(in_flight))
            k, err = self._done.get()
            if err is not None:
                first = (str(err).strip().splitlines() or [type(err).__name__])[0]
                raise RunnerError(f"peer failure while waiting for {self._describe({k: 1})}: {first}") from err
            if wd is not None:
                wd.beat()
            del in_flight[k]
            completed += 1
            fire(after_c[k])
        return tensor

    def _describe(self, in_flight) -> str:
        k = min(in_flight)
        op = self.rp.ops[k]
        if op.kind == "recv":
            return f"the data of flow {op.flow} from rank {op.peer} (streaming)"
        return f"the send of flow {op.flow} to rank {op.peer} to complete (streaming)"


def _wait_loop(todo: queue.Queue, done: queue.Queue, nccl: bool) -> None:
    """Wait on one peer's works in posting order; report (op, error or None) for each."""
    while True:
        k, work = todo.get()
        try:
            if nccl:
                while not work.is_completed():
                    time.sleep(POLL_S)
            work.wait()
            done.put((k, None))
        except Exception as e:  # noqa: BLE001 - handed to the runner thread, which raises it
            done.put((k, e))


def _connect_pairs(p: int, rank: int, peer_of, group) -> None:
    """NCCL creates a communicator per pair on first use; create them all in one global order
    (pairs sorted), so that no two ranks wait for each other's first message (untested here)."""
    one = torch.zeros(1, device=torch.device("cuda", torch.cuda.current_device()))
    for a in range(p):
        for b in range(a + 1, p):
            if rank == a:
                dist.send(one, peer_of(b), group)
                dist.recv(one, peer_of(b), group)
            elif rank == b:
                dist.recv(one, peer_of(a), group)
                dist.send(one, peer_of(a), group)
