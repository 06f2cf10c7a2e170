"""DDP communication hook that all-reduces each gradient bucket with a proved optcc Schedule.

Usage, like torch.distributed.algorithms.ddp_comm_hooks.default_hooks.allreduce_hook:

    state = OptccHookState(schedule)              # proves it (or checks `certificate`)
    model.register_comm_hook(state, optcc_hook)

`schedule` may be a generated schedule (optcc.generated.load_any of a parameter file): then the
state re-proves its generator and each rank builds and checks only its own part and program
(the per-rank path of docs/gpu_runner.md), so a hook at p = 4096 starts in seconds.

At the first bucket, before any message, the state decides what `optcc run` decides
(gpu_runner.gate): every rank of the group holds the same schedule (sha256 all-gathered, the
ranks that differ named) and the schedule's numerics for the bucket's dtype are no worse than
the ring's (`allow_worse_numerics=True` to run it anyway). A watchdog times every collective
(`timeout` seconds without progress, default 60): a dead or stuck peer ends the process with an
error naming what it waited for instead of hanging training; `timeout=None` turns it off.

The hook divides the bucket by the world size (DDP averages gradients, as the default hook
does) and hands the bucket to the state's communication thread, which runs the schedule in
place (streaming runner by default, `runner="step"` for the step runner) and completes the
returned Future; the hook itself returns at once, so communication overlaps the rest of the
backward pass. Buckets run one after another in the order DDP hands them over (the same on
every rank, so messages pair up). On CUDA the thread runs on a side stream that first waits for
the bucket's gradients (an event recorded by the hook). `asynchronous=False` runs the schedule
inside the hook and returns a completed Future. Plans and scratch are cached per bucket size.

Call `state.close()` (or use the state as a context manager) before destroy_process_group: it
finishes every submitted bucket, then joins the communication thread and the runner's threads.
A thread left running is killed by interpreter shutdown, and one killed while it re-enters Python
from a C++ call (Future.set_result, a gloo wait) aborts the process with "terminate called
without an active exception"; so an atexit handler closes every state still open.
"""
import atexit
import queue
import threading
import weakref

import torch
import torch.distributed as dist

from gpu_runner import streaming   # imported first: its atexit handler must run after ours
from gpu_runner.executor import RunnerError
from gpu_runner.gate import admit_numerics, agree_on_schedule, dtype_name
from gpu_runner.proof import built_program
from gpu_runner.runners import make_executor, program_key, runner_named
from gpu_runner.worker import DEFAULT_TIMEOUT_S    # the workers' default --timeout is the hook's too
from optcc.errors import OptccError

EXIT_JOIN_S = streaming.EXIT_JOIN_S


class OptccHookState:
    """The schedule, the process group, the cached executor and the communication thread."""

    def __init__(self, schedule, process_group=None, certificate: str | None = None, watchdog=None,
                 runner: str = "streaming", asynchronous: bool = True,
                 timeout: float | None = DEFAULT_TIMEOUT_S, allow_worse_numerics: bool = False):
        from gpu_runner.admission import admission_of
        runner_named(runner)                  # OptccError("runner") for an unknown one
        self.admission = admission_of(schedule)
        # a flow list proved (or its certificate checked) and its streaming programs proved; a
        # generated schedule by its generator's proof, each rank's part and program checked (executor)
        self.proof = self.admission.here(schedule, certificate, None, False, runner)
        if timeout is not None and not timeout > 0:
            raise OptccError("timeout", f"expected a positive number of seconds or None, got {timeout!r}")
        self.schedule = schedule
        self.world = schedule.cluster.p
        self.process_group = process_group
        self.watchdog = watchdog
        self.timeout = timeout
        self.allow_worse_numerics = bool(allow_worse_numerics)
        self._own_watchdog = None             # made with the executor when `watchdog` is None
        self._admitted: dict = {}             # dtype name -> the numerics report accepted
        self.runner = runner
        self.asynchronous = asynchronous
        self._executor = None
        self._comm: tuple | None = None      # (job queue, thread) once the first bucket came
        self._stream = None
        self._closed = False

    @staticmethod
    def auto(cluster, algo: str = "optcc", **kw) -> "AutoHookState":
        """No schedule file: each bucket size gets the k auto chooses for it (AutoHookState)."""
        return AutoHookState(cluster, algo, **kw)

    @staticmethod
    def adaptive(cluster=None, algo: str = "optcc", **kw):
        """No schedule file, no straggler known: the default all-reduce while the links are even,
        OptCC for the measured cluster while a host is slow, back after the repair
        (gpu_runner.adaptive.AdaptiveHookState). The hook measures the stragglers and the
        per-message cost itself; `cluster` (optional) adds its issue delay and latency."""
        from gpu_runner.adaptive import AdaptiveHookState
        return AdaptiveHookState(cluster, algo, **kw)

    def executor(self):
        if self._executor is None:
            group = self.process_group
            world = dist.get_world_size(group)
            if world != self.schedule.cluster.p:
                raise OptccError("schedule", f"the schedule is for p = {self.schedule.cluster.p} ranks, "
                                             f"the process group has {world}")
            watchdog = self.watchdog
            if watchdog is None and self.timeout is not None:
                from gpu_runner.watchdog import Watchdog
                watchdog = self._own_watchdog = Watchdog(dist.get_rank(), self.timeout, "optcc-ddp-hook")
            if self._own_watchdog is not None:
                self._own_watchdog.arm("every rank's schedule digest (the first bucket's start-up)")
            agree_on_schedule(self.schedule.sha256(), group)   # before any rank builds a part
            from gpu_runner.hosts import placement   # stragglers named by host
            rank, ranks, _ = placement(self.schedule, group)
            if ranks is None and group is not None and group is not dist.group.WORLD:
                ranks = [dist.get_global_rank(group, r) for r in range(world)]
            schedule = self.admission.rank_part(self.schedule, rank, self.runner)
            key = program_key(self.runner)
            program = built_program(schedule, *key) if key else None     # the one its rank checked, if any
            self._executor = make_executor(schedule, rank, self.runner, group=group, group_ranks=ranks,
                                           watchdog=watchdog, program=program)
            if self._own_watchdog is not None:
                self._own_watchdog.rest()     # armed again only while a bucket runs
        return self._executor

    def admit(self, tensor: torch.Tensor) -> str:
        """The numerics decision for the bucket's dtype (once per dtype), as `optcc run` makes it."""
        name = dtype_name(tensor.dtype)
        if name not in self._admitted:
            self._admitted[name] = admit_numerics(self.schedule, name, self.allow_worse_numerics)
        return self._admitted[name]

    def submit(self, tensor: torch.Tensor, step_end: bool = False) -> torch.futures.Future:
        """All-reduce `tensor` in place off this thread; the Future completes with it. (`step_end`,
        DDP's last bucket of a step, matters to the adaptive state only.)"""
        if self._closed:
            raise RunnerError("the optcc hook state is closed")
        self.admit(tensor)
        executor = self.executor()
        return _submit(self, tensor, _timed(executor, self._own_watchdog), executor)

    def close(self, timeout: float | None = None) -> None:
        """Finish every submitted bucket (their Futures complete), then join the communication
        thread and the runner's threads. Call before destroy_process_group. Idempotent; later
        submits raise. RunnerError if they did not end within `timeout` seconds."""
        self._closed = True
        done = True
        if self._comm is not None:
            jobs, thread = self._comm
            done = _stop(jobs, thread, self._executor, timeout)
        elif self._executor is not None:
            done = self._executor.close(timeout) or self._executor.failed
        if self._own_watchdog is not None:
            done = self._own_watchdog.stop(timeout) and done
        if not done:
            raise RunnerError(f"the optcc hook's threads did not finish within {timeout} s")

    def __enter__(self) -> "OptccHookState":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _timed(executor, watchdog):
    """executor.run with `watchdog` armed for its duration (None: as it is)."""
    if watchdog is None:
        return executor.run

    def run(tensor):
        watchdog.arm("a gradient bucket's AllReduce to start")
        try:
            executor.run(tensor)
        finally:
            watchdog.rest()
    return run


def _comm_loop(jobs: queue.Queue) -> None:
    """Run each bucket's job in submission order and complete its Future; None ends it."""
    try:
        while True:
            job = jobs.get()
            if job is None:
                return
            tensor, fut, ready, stream, run = job
            del job
            try:
                if ready is not None:
                    with torch.cuda.device(tensor.device), torch.cuda.stream(stream):
                        stream.wait_event(ready)
                        run(tensor)
                    stream.synchronize()
                else:
                    run(tensor)
            except Exception as e:  # noqa: BLE001 - DDP re-raises it from fut.wait()
                fut.set_exception(e)
            else:
                fut.set_result(tensor)
            del tensor, fut, ready, stream, run
    finally:
        _open.pop(threading.current_thread(), None)


def _submit(owner, tensor: torch.Tensor, run, executor) -> torch.futures.Future:
    """`run(tensor)` for a hook state (`owner`: its asynchronous flag, side stream, thread): inside
    the hook when synchronous; else queued to the owner's one communication thread (started on
    first use), after an event on the training stream on CUDA. `executor` is what the thread's
    end closes at interpreter exit (None: the owner's states close their own)."""
    fut: torch.futures.Future = torch.futures.Future()
    if not owner.asynchronous:
        run(tensor)
        fut.set_result(tensor)
        return fut
    ready = None
    if tensor.is_cuda:
        ready = torch.cuda.Event()
        ready.record()                  # the bucket's gradients, on the training stream
        if owner._stream is None:
            owner._stream = torch.cuda.Stream(device=tensor.device)
    if owner._comm is None:
        jobs: queue.Queue = queue.Queue()
        # the thread holds the queue, not the state: a dropped state is collected
        thread = threading.Thread(target=_comm_loop, args=(jobs,), name="optcc-ddp-comm", daemon=True)
        owner._comm = (jobs, thread)
        _open[thread] = (jobs, executor)
        stop = weakref.finalize(owner, jobs.put, None)   # dropped unclosed: end the thread
        stop.atexit = False                              # at exit _close_open joins it
        thread.start()
    owner._comm[0].put((tensor, fut, ready, owner._stream, run))
    return fut


def _stop(jobs: queue.Queue, thread: threading.Thread, executor, timeout: float | None) -> bool:
    """Drain and end one communication thread, then the executor's threads; True if all ended."""
    jobs.put(None)                       # after every bucket already submitted: FIFO
    if thread is threading.current_thread():
        return False
    thread.join(timeout)
    if thread.is_alive():
        return False
    if executor is None:                 # an AutoHookState's thread: its sizes' states close their own
        return True
    return executor.close(timeout) or executor.failed   # after a failure: best effort


_open: dict = {}     # communication threads not yet ended -> (job queue, executor)


def close_states(comm, states, timeout: float | None, watchdog=None) -> None:
    """Finish the buckets submitted to `comm` (its jobs queue and thread, or None), join its thread,
    close each of `states` and the watchdog: RunnerError where any did not finish within `timeout`."""
    done = True
    if comm is not None:
        jobs, thread = comm
        done = _stop(jobs, thread, None, timeout)
    for state in states:
        try:
            state.close(timeout)
        except RunnerError:
            done = False
    if watchdog is not None:
        done = watchdog.stop(timeout) and done
    if not done:
        raise RunnerError(f"the optcc hook's threads did not finish within {timeout} s")


@atexit.register
def _close_open() -> None:
    """At interpreter exit (before daemon threads are killed) drain and join every hook state's
    threads that the program did not close."""
    for thread, (jobs, executor) in list(_open.items()):
        _stop(jobs, thread, executor, EXIT_JOIN_S)


class AutoHookState:
    """The hook's state without a schedule file: for each bucket size DDP hands over, the k that
    `--segments auto` chooses for that many bytes on `cluster` (its latency: a probe's file
    carries the measured per-message cost; a cluster with none is timed under the default
    preset), kept within what this host can post (optcc.segments.HOST_POST_S), then built (the
    generated form where the flow list would be over the build limit) and admitted by an
    OptccHookState of its own: the same proof gate, digest agreement across ranks and numerics
    decision as every run. One communication thread runs every bucket in submission order, so
    ranks pair their messages whatever the sizes. `chosen` maps each bucket's bytes to its k."""

    def __init__(self, cluster, algo: str = "optcc", *, process_group=None, runner: str = "streaming",
                 asynchronous: bool = True, timeout: float | None = DEFAULT_TIMEOUT_S,
                 allow_worse_numerics: bool = False):
        runner_named(runner)
        self.cluster, self.algo = cluster, algo
        self.world = cluster.p
        self.process_group = process_group
        self._kw = {"process_group": process_group, "runner": runner, "asynchronous": False, "timeout": timeout,
                    "allow_worse_numerics": allow_worse_numerics}
        self.asynchronous = asynchronous
        self._by_k: dict = {}                 # k -> OptccHookState (synchronous: this state's thread runs it)
        self.chosen: dict = {}                # bucket bytes -> k
        self._comm: tuple | None = None
        self._stream = None
        self._closed = False

    def state_for(self, nbytes: int) -> "OptccHookState":
        """The admitted state of the k chosen for `nbytes` (built and proved on first use)."""
        k = self.chosen.get(nbytes)
        if k is None:
            from optcc.segments import HOST_POST_S, choose_segments
            k, _ = choose_segments("auto", self.algo, self.cluster, nbytes, build=False, host_post_s=HOST_POST_S)
            self.chosen[nbytes] = k
        state = self._by_k.get(k)
        if state is None:
            from optcc.algorithms import build_schedule, buildable
            from optcc.generated import GeneratedSchedule, generated_form_of
            gen = generated_form_of(self.algo, self.cluster)
            if gen is not None and not buildable(self.cluster, k):
                schedule = GeneratedSchedule.of(gen, self.cluster, k)
            else:
                schedule = build_schedule(self.algo, self.cluster, k)
            state = self._by_k[k] = OptccHookState(schedule, **self._kw)
        return state

    def submit(self, tensor: torch.Tensor, step_end: bool = False) -> torch.futures.Future:
        """All-reduce `tensor` in place with the state of its size, off this thread."""
        if self._closed:
            raise RunnerError("the optcc hook state is closed")
        state = self.state_for(tensor.numel() * tensor.element_size())
        state.admit(tensor)                   # refused here, in the hook, as the fixed state refuses
        return _submit(self, tensor, lambda t: state.submit(t).wait(), None)

    def close(self, timeout: float | None = None) -> None:
        """Finish every submitted bucket, join the thread, close every size's state."""
        self._closed = True
        close_states(self._comm, self._by_k.values(), timeout)

    def __enter__(self) -> "AutoHookState":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# Real annotation objects, not strings (so no `from __future__ import annotations` here): DDP's
# register_comm_hook compares them with dist.GradBucket and torch.futures.Future[torch.Tensor].
def optcc_hook(state: OptccHookState, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """All-reduce (average) one DDP gradient bucket with the state's schedule; returns at once."""
    tensor = bucket.buffer()
    tensor.div_(state.world)
    return state.submit(tensor, bucket.is_last())
