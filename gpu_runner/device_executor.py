"""The graph runner: the step runner's plans as device streams, events and one P2P group per start
time, captured once (a CUDA graph on a GPU) and replayed per AllReduce, so the host pays one
launch per collective.

The plans are the step runner's own (optcc.lowering.step, each checked by verifier.step_check's
"runnable" property before it runs, behind gpu_runner.proof.gate): nothing is lowered twice.
`emit` turns them into calls on a `Backend`; per rank and per step t, in time order:

  compute stream   wait done(s) of every group s that holds a send ending at t or a receive landing
                   at t; the landings, local ops and snapshots of t in the plan's order;
                   record ready(t) (only where t posts and the stream has done some work)
  comm stream      wait ready(t) (if recorded); the group of t (its sends and receives in posting order);
                   record done(t)

Why these orders suffice (derived from the plan's rules, verifier.step_check B/O/S): a landing
reads a slot its receive's group wrote (it waits done of that group); a piece is written only on
the compute stream, never strictly inside a direct send's flow (else the send is snapshotted), so
a write at t ≤ start precedes ready(start) and one at t ≥ end follows done(start); a snapshot is
read by the group of its own step (ready); a slot freed at t is refilled by a group that waits
ready(t), recorded after the step's landings and its waits for the sends ending at t.
tests/gpu_runner/test_device_executor.py checks it: every pair of accesses of one buffer range, one a write,
is ordered by stream order and event waits alone, in the plan's order.

A group completes as one (NCCL's grouped P2P, the step runner's one Work per batch on NCCL): a
wait on a short flow waits for its group's longest. Groups of one rank run in time order on one
comm stream; that cannot deadlock: a group needs only its peers' groups of the same start time
posted, and those wait only for groups that start earlier (induction on the start time).

Backends (the `Backend` protocol): `NcclBackend` (one rank per process, torch.distributed P2P
ops grouped by `batch_isend_irecv` on the comm stream, a CUDA graph), `CudaVirtualBackend` (p
virtual ranks on one GPU, device-to-device copies stand for the network: correctness and the
device's cost per op on one GPU) and `CpuVirtualBackend` (the same on CPU tensors, in issue
order: the exact-sum check without a GPU). NONE OF THE CUDA PATHS HAS RUN ON A GPU YET
(docs/gpu_runner.md, "The graph runner"); the grouping and capture logic is tested on CPU.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import torch

from gpu_runner.executor import Executor, RunnerError, _flat
from gpu_runner.proof import gate
from optcc.lowering.step import RankPlan, build_all_plans
from verifier.step_check import check_plans

REPLAY_TIMEOUT_S = 300.0   # policy: a replay not finished by then ends the rank with an error (a dead peer)
POLL_S = 50e-6             # how often the host polls a replay's end event


@dataclass
class Half:
    """One rank's side of a P2P group: (flow, peer, buffer) per send and per receive, in posting order."""
    rank: int
    stream: Any
    sends: list[tuple[int, int, Any]] = field(default_factory=list)
    recvs: list[tuple[int, int, Any]] = field(default_factory=list)


class Backend(Protocol):
    """What `emit` needs of a device: streams, events, three in-place ops, grouped P2P, capture."""

    def stream(self, rank: int, name: str) -> Any:
        """A new stream of `rank` ("compute" or "comm")."""

    def event(self) -> Any: ...

    def record(self, event: Any, stream: Any) -> None: ...

    def wait(self, stream: Any, event: Any) -> None:
        """Work issued to `stream` after this starts once `event`'s recorded work has finished."""

    def copy(self, stream: Any, dst: Any, src: Any) -> None: ...

    def add(self, stream: Any, dst: Any, src: Any, coef: int) -> None: ...

    def scale(self, stream: Any, view: Any, coef: int) -> None: ...

    def group(self, time: Any, halves: Sequence[Half]) -> None:
        """One P2P group on every half's stream (one half per process on NCCL; every rank's half
        of the start time in a virtual backend); it completes as one."""

    def capture(self, emit: Callable[[Any], None]) -> Any:
        """A graph of what emit(origin) issues (origin: the capture stream every stream forks from)."""

    def replay(self, graph: Any) -> None: ...

    def finish(self, timeout: float) -> None:
        """Wait for the replays issued; RunnerError after `timeout` seconds."""


@dataclass
class _Bound:
    """One rank's plan bound to its tensor and scratch."""
    rank: int
    plan: RankPlan
    flat: Any
    scratch: Any

    def view(self, lo: int, hi: int) -> Any:
        return self.flat[lo:hi]

    def slot(self, t: Any) -> Any:
        return self.scratch[t.slot:t.slot + t.length]


def emit(backend: Backend, ranks: Sequence[_Bound], origin: Any) -> int:
    """Issue the plans of `ranks` (one rank on NCCL; all p in a virtual backend) to `backend`, every
    stream forked from `origin` and joined back into it (what capture needs); module docstring.
    Returns the number of device ops issued (copies, adds, scales and groups)."""
    streams = {b.rank: (backend.stream(b.rank, "compute"), backend.stream(b.rank, "comm")) for b in ranks}
    begin = backend.event()
    backend.record(begin, origin)
    for pair in streams.values():
        for s in pair:
            backend.wait(s, begin)
    steps = {b.rank: {s.time: s for s in b.plan.steps} for b in ranks}
    times = sorted({t for per in steps.values() for t in per})
    done: dict[tuple[int, Any], Any] = {}           # (rank, start time) -> its group's done event
    waited: dict[int, set] = {b.rank: set() for b in ranks}
    busy = {b.rank: False for b in ranks}           # the compute stream has issued work since the fork
    n_ops = 0
    for t in times:
        halves = []
        for b in ranks:
            s = steps[b.rank].get(t)
            if s is None:
                continue
            compute, comm = streams[b.rank]
            for start in sorted({x.start for x in s.sends_done} | {x.start for x in s.landings}):
                if start not in waited[b.rank]:     # a group waited once covers every later step
                    waited[b.rank].add(start)
                    backend.wait(compute, done[(b.rank, start)])
            for x in s.landings:
                if x.op == "copy":
                    backend.copy(compute, b.view(x.lo, x.hi), b.slot(x))
                else:
                    backend.add(compute, b.view(x.lo, x.hi), b.slot(x), x.coef)
            for lo, hi, coef in s.local_ops:
                backend.scale(compute, b.view(lo, hi), coef)
            for x in s.snapshots:
                backend.copy(compute, b.slot(x), b.view(x.lo, x.hi))
            issued = len(s.landings) + len(s.local_ops) + len(s.snapshots)
            n_ops += issued
            busy[b.rank] = busy[b.rank] or issued > 0
            if s.posts:
                if busy[b.rank]:                   # nothing on the compute stream yet: nothing to wait for
                    ready = backend.event()
                    backend.record(ready, compute)
                    backend.wait(comm, ready)
                half = Half(b.rank, comm)
                for x in s.posts:
                    buf = b.slot(x) if x.slot is not None else b.view(x.lo, x.hi)
                    (half.sends if x.send else half.recvs).append((x.flow, x.peer, buf))
                halves.append(half)
        if halves:
            backend.group(t, halves)
            n_ops += 1
            for h in halves:
                ev = done[(h.rank, t)] = backend.event()
                backend.record(ev, h.stream)
    for pair in streams.values():
        for s in pair:
            end = backend.event()
            backend.record(end, s)
            backend.wait(origin, end)
    return n_ops


def _scratch(plan: RankPlan, flat: Any) -> Any:
    return torch.empty(max(plan.scratch_numel, 1), dtype=flat.dtype, device=flat.device)


class GraphExecutor:
    """One rank's AllReduce as a captured graph (a gpu_runner.runners.RankExecutor). `prepare`
    binds the rank's checked plan to the tensor and captures it once per tensor; `run` replays it
    and waits (RunnerError after `timeout_s`). The backend defaults to `NcclBackend` (a CUDA tensor
    and an NCCL process group; anything else is refused with the reason)."""

    def __init__(self, schedule, rank: int, group=None, group_ranks=None, watchdog=None, *,
                 certificate: str | None = None, unsafe: bool = False, backend: Backend | None = None,
                 timeout_s: float = REPLAY_TIMEOUT_S):
        self._plans = Executor(schedule, rank, group=group, group_ranks=group_ranks,
                               certificate=certificate, unsafe=unsafe)   # the gate and the checked plans
        self.schedule, self.rank, self.group, self.group_ranks = schedule, rank, group, group_ranks
        self.watchdog = watchdog
        self.backend = backend
        self.timeout_s = timeout_s
        self._graphs: dict = {}
        self._failed = False
        self.build_s = 0.0                 # seconds the last capture took (plan, scratch, capture)

    @property
    def proof(self) -> str:
        return self._plans.proof

    @property
    def failed(self) -> bool:
        return self._failed

    def close(self, timeout: float | None = None) -> bool:
        """Nothing to end: replays run on the device, waited for inside run()."""
        return True

    def _backend_for(self, flat: Any) -> Backend:
        if self.backend is None:
            self.backend = NcclBackend(self.group, self.group_ranks)
        check = getattr(self.backend, "check", None)     # NCCL: a CUDA tensor and an NCCL group
        if check is not None:
            check(flat)
        return self.backend

    def prepare(self, tensor: Any) -> Any:
        flat = _flat(tensor)
        key = (flat.data_ptr(), flat.numel(), flat.dtype, flat.device)
        graph = self._graphs.get(key)
        if graph is not None:
            return graph
        backend = self._backend_for(flat)
        t0 = time.perf_counter()
        plan = self._plans.plan(flat.numel())
        warm = getattr(backend, "warm_up", None)
        if warm is not None:              # NCCL: an eager run on zeros connects the peers before capture
            warm(lambda origin, z: emit(backend, [_Bound(self.rank, plan, z, _scratch(plan, z))], origin), flat)
        bound = _Bound(self.rank, plan, flat, _scratch(plan, flat))
        graph = backend.capture(lambda origin: emit(backend, [bound], origin))
        self.build_s = time.perf_counter() - t0
        if len(self._graphs) > 8:
            self._graphs.clear()
        self._graphs[key] = (graph, bound)
        return self._graphs[key]

    def run(self, tensor: Any) -> Any:
        """AllReduce `tensor` in place (one graph replay); returns it."""
        graph, _ = self.prepare(tensor)
        if self.watchdog is not None:
            self.watchdog.waiting(lambda: "the graph replay to finish")
        try:
            self.backend.replay(graph)
            self.backend.finish(self.timeout_s)
        except BaseException:
            self._failed = True
            raise
        if self.watchdog is not None:
            self.watchdog.beat()
        return tensor


class VirtualGraph:
    """p virtual ranks in one process: every rank's checked plan emitted into one graph, whose
    groups the backend carries out as copies (`CudaVirtualBackend` on one GPU, `CpuVirtualBackend`
    on CPU). `run()` replays it: tensors[r] becomes the AllReduce of all of them, in place."""

    def __init__(self, schedule, tensors: Sequence[Any], backend: Backend, *, certificate: str | None = None,
                 unsafe: bool = False):
        gate(schedule, certificate, unsafe)
        p = schedule.cluster.p
        if len(tensors) != p:
            raise RunnerError(f"expected {p} tensors, got {len(tensors)}")
        flats = [_flat(t) for t in tensors]
        if any(f.numel() != flats[0].numel() or f.dtype != flats[0].dtype for f in flats):
            raise RunnerError("all ranks' tensors must have the same number of elements and dtype")
        t0 = time.perf_counter()
        plans = build_all_plans(schedule, flats[0].numel())
        ok, cx = check_plans(schedule, plans)
        if not ok:
            raise RunnerError(f"runnable: {cx['message']}; refusing to run it")
        self.bound = [_Bound(r, pl, f, _scratch(pl, f)) for r, (pl, f) in enumerate(zip(plans, flats))]
        self.backend = backend
        self.n_ops = 0

        def body(origin):
            self.n_ops = emit(backend, self.bound, origin)
        self.graph = backend.capture(body)
        self.build_s = time.perf_counter() - t0

    def run(self, timeout_s: float = REPLAY_TIMEOUT_S) -> None:
        self.backend.replay(self.graph)
        self.backend.finish(timeout_s)


def _match(halves: Sequence[Half]) -> list[tuple[Any, Any]]:
    """(receive buffer, send buffer) per flow of a virtual group; RunnerError where a flow's two
    ends are not in the one group (both ends post it at its start)."""
    sent = {flow: (h.rank, peer, buf) for h in halves for flow, peer, buf in h.sends}
    pairs = []
    for h in halves:
        for flow, peer, buf in h.recvs:
            src = sent.pop(flow, None)
            if src is None or src[0] != peer or src[1] != h.rank:
                raise RunnerError(f"internal: flow {flow}'s receive on rank {h.rank} has no send from rank {peer} "
                                  "in its group")
            pairs.append((buf, src[2]))
    if sent:
        raise RunnerError(f"internal: flows {sorted(sent)} are sent but not received in their group")
    return pairs


class CpuVirtualBackend:
    """Virtual ranks on CPU tensors. Capture records closures; a replay runs them in issue order,
    which `emit` makes a valid order of the device's (so the sums are exact where the device's
    would be); a wait on an event not yet recorded in the replay is an error, not a no-op."""

    def __init__(self) -> None:
        self._tape: list[Callable[[], None]] | None = None
        self._recorded: set[int] = set()
        self._n = 0

    def stream(self, rank: int, name: str) -> Any:
        return (rank, name)

    def event(self) -> Any:
        self._n += 1
        return self._n

    def _put(self, fn: Callable[[], None]) -> None:
        if self._tape is None:
            raise RunnerError("internal: CpuVirtualBackend issues work only inside capture()")
        self._tape.append(fn)

    def record(self, event: Any, stream: Any) -> None:
        self._put(lambda: self._recorded.add(event))

    def wait(self, stream: Any, event: Any) -> None:
        def check() -> None:
            if event not in self._recorded:
                raise RunnerError(f"internal: stream {stream} waits for event {event}, not recorded before it")
        self._put(check)

    def copy(self, stream: Any, dst: Any, src: Any) -> None:
        self._put(lambda: dst.copy_(src))

    def add(self, stream: Any, dst: Any, src: Any, coef: int) -> None:
        self._put(lambda: dst.add_(src) if coef == 1 else dst.add_(src, alpha=coef))

    def scale(self, stream: Any, view: Any, coef: int) -> None:
        self._put(lambda: view.mul_(coef))

    def group(self, time: Any, halves: Sequence[Half]) -> None:
        pairs = _match(halves)

        def run() -> None:
            for dst, src in pairs:
                dst.copy_(src)
        self._put(run)

    def capture(self, emit: Callable[[Any], None]) -> Any:
        self._tape = []
        try:
            emit(("origin", "origin"))
            return self._tape
        finally:
            self._tape = None

    def replay(self, graph: Any) -> None:
        self._recorded = set()
        for fn in graph:
            fn()

    def finish(self, timeout: float) -> None:
        pass


class _CudaOps:
    """Streams, events, in-place ops, capture and a polled finish on the current CUDA device."""

    def stream(self, rank: int, name: str) -> Any:
        return torch.cuda.Stream()

    def event(self) -> Any:
        return torch.cuda.Event()

    def record(self, event: Any, stream: Any) -> None:
        event.record(stream)

    def wait(self, stream: Any, event: Any) -> None:
        stream.wait_event(event)

    def copy(self, stream: Any, dst: Any, src: Any) -> None:
        with torch.cuda.stream(stream):
            dst.copy_(src)

    def add(self, stream: Any, dst: Any, src: Any, coef: int) -> None:
        with torch.cuda.stream(stream):
            if coef == 1:
                dst.add_(src)
            else:
                dst.add_(src, alpha=coef)

    def scale(self, stream: Any, view: Any, coef: int) -> None:
        with torch.cuda.stream(stream):
            view.mul_(coef)

    def capture(self, emit: Callable[[Any], None]) -> Any:
        graph = torch.cuda.CUDAGraph()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.graph(graph, stream=side):
            emit(torch.cuda.current_stream())
        return graph

    def replay(self, graph: Any) -> None:
        graph.replay()

    def finish(self, timeout: float) -> None:
        end = torch.cuda.Event()
        end.record()
        deadline = time.monotonic() + timeout
        while not end.query():
            if time.monotonic() > deadline:
                raise RunnerError(f"the graph replay did not finish within {timeout:.0f} s (a peer died or hangs)")
            time.sleep(POLL_S)


class CudaVirtualBackend(_CudaOps):
    """Virtual ranks on one GPU: a group is a barrier of its halves' streams around the copies
    of its flows (issued on the first half's stream), so it completes as one, like NCCL's."""

    def group(self, time: Any, halves: Sequence[Half]) -> None:
        pairs = _match(halves)
        lead = halves[0].stream
        for h in halves[1:]:
            ev = torch.cuda.Event()
            ev.record(h.stream)
            lead.wait_event(ev)
        with torch.cuda.stream(lead):
            for dst, src in pairs:
                dst.copy_(src)
        done = torch.cuda.Event()
        done.record(lead)
        for h in halves[1:]:
            h.stream.wait_event(done)


class NcclBackend(_CudaOps):
    """One rank per process: a group is torch.distributed.batch_isend_irecv on the comm stream
    (NCCL groups the P2P ops of one call), its works waited by that stream. Untested on GPUs."""

    def __init__(self, group=None, group_ranks=None) -> None:
        self.pg, self.group_ranks = group, group_ranks

    def check(self, flat: Any) -> None:
        import torch.distributed as dist
        if flat.device.type != "cuda":
            raise RunnerError(f"the graph runner needs CUDA tensors (got a {flat.device.type} tensor); "
                              "use --runner streaming or step")
        if not dist.is_initialized() or dist.get_backend(self.pg) != "nccl":
            raise RunnerError("the graph runner needs an NCCL process group; use --runner streaming or step")

    def _peer(self, r: int) -> int:
        return r if self.group_ranks is None else self.group_ranks[r]

    def group(self, time: Any, halves: Sequence[Half]) -> None:
        import torch.distributed as dist
        (h,) = halves
        ops = [dist.P2POp(dist.isend, buf, self._peer(peer), self.pg) for _, peer, buf in h.sends]
        ops += [dist.P2POp(dist.irecv, buf, self._peer(peer), self.pg) for _, peer, buf in h.recvs]
        with torch.cuda.stream(h.stream):
            for w in dist.batch_isend_irecv(ops):
                w.wait()                  # NCCL: the current (comm) stream waits, not the host

    def warm_up(self, run_eager: Callable[[Any, Any], None], flat: Any) -> None:
        """One eager run on zeros (not the caller's data): NCCL connects the pairs outside capture."""
        zeros = torch.zeros_like(flat)
        run_eager(torch.cuda.current_stream(), zeros)
        torch.cuda.synchronize()
