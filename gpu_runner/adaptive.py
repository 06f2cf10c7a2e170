"""The adaptive DDP hook state (`OptccHookState.adaptive()`): the default exchange while the links
are even, OptCC for the measured cluster while one host is slow, and back after the repair.

What runs while the links are even is a pairwise exchange (`pairwise_allreduce`): a reduce-scatter
then an all-gather, each in p − 1 rounds where rank r sends to r + j and receives from r − j.
Every NIC carries one outgoing and one incoming stream per round and 2·(p−1)/p·n bytes in all,
as the ring does (derived); unlike the ring, whose p − 1 chained steps each wait for the slowest
link upstream, its rounds meet every peer in both directions, so each receive is the probe's
timed flow s → d (gpu_runner.probe, module docstring) and the probe's own `estimate` and rule
(`decide`: slow iff ℓ·(1 − spread) ≥ min_ell) read the hook's timings unchanged: no probe
traffic, the gradients' own messages are timed. A rank that waited in one round for the slow
host starts the next late, and its receiver counts that wait; the rounds of one round-robin
direction pass that wait on to the slow host's successor in every round, so successive timed
steps alternate the direction (r + j, then r − j) and a repetition is two successive timed steps,
each flow's better reading of the two (`paired`); a verdict reads the last three timed steps, two
overlapping repetitions (the probe's rule needs two to measure a spread; overlapping, they
understate it somewhat). Chunk c is summed by rank c in rank order and
sent out as it is, so every rank holds the same bits.

At each step boundary (DDP's last bucket of a backward) of a timed step every rank all-gathers
its receive times (3·p numbers) and every rank computes the verdict from the same data, so the
decision is the same everywhere. A host named slow in the last three timed steps switches the
state to OptCC: the measured cluster (the probe's cluster JSON of the hook's rates, with the
per-message cost of `cluster` if given, else none, and `OptccHookState.auto` times k under
optcc.segments.auto_timed_cluster) is planned by AutoHookState, which proves each schedule and
all-gathers its digest (the gate of every run); the plan's own digest is agreed first, and the
schedules of the bucket sizes already seen are admitted at the boundary. While OptCC runs, every
`check_every`-th step sends its first bucket by the pairwise exchange (the gradients' own
traffic, at the default's speed) so the repair is seen; once no host is named the state
switches back. Each switch is logged (logger `gpu_runner.adaptive`, rank 0) with the measured ℓ
and recorded in `switches`.
"""
from __future__ import annotations

import hashlib
import json
import logging
import time

import torch
import torch.distributed as dist

from gpu_runner.executor import RunnerError
from gpu_runner.gate import agree_on_schedule
from gpu_runner.worker import DEFAULT_TIMEOUT_S
from optcc.errors import OptccError

log = logging.getLogger("gpu_runner.adaptive")

WINDOW = 3                 # timed steps a verdict reads: two overlapping pairs, the two repetitions the probe's rule needs
DEFAULT_MIN_ELL = 1.25     # policy: a switch costs a plan and a proof, so a small slowdown does not
DEFAULT_CHECK_EVERY = 3    # policy: while OptCC runs, one step in 3 times the links (repair seen within 3 steps)


def _isend(tensor, dst, group):
    return dist.isend(tensor, dst, group=group)


def _irecv(tensor, src, group):
    return dist.irecv(tensor, src, group=group)


class FlowTimes:
    """One rank's receive record of a step: per source rank, seconds, bytes and messages."""

    def __init__(self, p: int):
        self.seconds = [0.0] * p
        self.nbytes = [0.0] * p
        self.messages = [0.0] * p

    def add(self, src: int, seconds: float, nbytes: int) -> None:
        self.seconds[src] += seconds
        self.nbytes[src] += nbytes
        self.messages[src] += 1

    def row(self) -> list[float]:
        return self.seconds + self.nbytes + self.messages


def _exchange(send: torch.Tensor, recv: torch.Tensor, dst: int, src: int, group, peer, times: FlowTimes) -> None:
    """One round: send `send` to dst while receiving `recv` from src; the receive is timed from
    the post (the probe's receiver-timed flow)."""
    t0 = time.perf_counter()
    s = _isend(send, peer(dst), group)
    r = _irecv(recv, peer(src), group)
    r.wait()
    times.add(src, time.perf_counter() - t0, recv.numel() * recv.element_size())
    s.wait()


def pairwise_allreduce(flat: torch.Tensor, rank: int, p: int, group=None, peer=lambda r: r,
                       times: FlowTimes | None = None, reverse: bool = False) -> torch.Tensor:
    """Sum `flat` (1-D, contiguous) over the p ranks in place by the pairwise exchange (module
    docstring); each receive is recorded in `times`. `peer` maps a group rank to the rank the
    point-to-point calls take; `reverse`: round j sends to r − j and receives from r + j."""
    times = times if times is not None else FlowTimes(p)
    way = -1 if reverse else 1
    chunks = torch.tensor_split(flat, p)
    mine = chunks[rank]
    parts = [mine if r == rank else torch.empty_like(mine) for r in range(p)]
    for j in range(1, p):
        dst, src = (rank + way * j) % p, (rank - way * j) % p
        _exchange(chunks[dst], parts[src], dst, src, group, peer, times)
    total = parts[0].clone()
    for r in range(1, p):                 # rank order: the same sum whoever owns the chunk
        total.add_(parts[r])
    mine.copy_(total)
    for j in range(1, p):
        dst, src = (rank + way * j) % p, (rank - way * j) % p
        _exchange(mine, chunks[src], dst, src, group, peer, times)
    return flat


def flow_rates(history: list[list[list[float]]], overhead_s: float) -> tuple[list, float]:
    """(rates[rep][src][dst] in bytes/s, the per-message cost c subtracted) from gathered rows
    (history[rep][dst] = FlowTimes.row() of rank dst). A flow's rate is bytes / (seconds − m·c)
    over its m messages (derived: T(x) = c + x / rate per message, the probe's model), with c the
    cluster's overhead kept within half the shortest message time, as the probe keeps its own."""
    p = len(history[0])
    per_msg = [row[s] / row[2 * p + s] for rep in history for d, row in enumerate(rep) for s in range(p)
               if s != d and row[2 * p + s] > 0]
    c = min(max(overhead_s, 0.0), min(per_msg) / 2) if per_msg else 0.0
    rates = [[[0.0] * p for _ in range(p)] for _ in history]
    for k, rep in enumerate(history):
        for d, row in enumerate(rep):
            for s in range(p):
                if s != d:
                    rates[k][s][d] = row[p + s] / (row[s] - row[2 * p + s] * c)
    return rates, c


def paired(rates: list) -> list:
    """Each two successive timed steps as one repetition: every flow's better reading of the two
    (they ran the rounds in opposite directions; module docstring)."""
    return [[[max(a, b) for a, b in zip(ra, rb)] for ra, rb in zip(x, y)] for x, y in zip(rates, rates[1:])]


def verdict(history: list[list[list[float]]], hosts: list[str], overhead_s: float = 0.0,
            min_ell: float = DEFAULT_MIN_ELL) -> dict:
    """The probe's estimate (rates, ℓ, the significance rule, the cluster JSON) of the hook's
    timed steps, successive steps paired (`paired`); the same on every rank that holds the same
    history."""
    from gpu_runner.probe import estimate
    rates, c = flow_rates(history, overhead_s)
    p = len(hosts)
    sent = [row[p + s] / row[2 * p + s] for rep in history for d, row in enumerate(rep) for s in range(p)
            if s != d and row[2 * p + s] > 0]
    return estimate(paired(rates), round(sum(sent) / len(sent)), hosts, None, min_ell, c)


def complete(history: list[list[list[float]]]) -> bool:
    """Every flow of every step was timed (a bucket of fewer elements than ranks leaves some empty)."""
    p = len(history[0]) if history else 0
    return bool(history) and all(row[2 * p + s] > 0 for rep in history for d, row in enumerate(rep)
                                 for s in range(p) if s != d)


def plan_cluster(est: dict, base=None):
    """The cluster OptCC is planned for: the verdict's (stragglers, B, the c it used), with the
    issue delay and latency of `base` when given."""
    from optcc.cluster import Cluster
    cluster = Cluster.from_json(est["cluster"])
    if base is not None and (base.issue_delay or base.latency):
        cluster = cluster.with_latency(cluster.overhead, base.issue_delay, base.latency, "custom")
    return cluster


def cluster_digest(cluster) -> str:
    return hashlib.sha256(json.dumps(cluster.to_json(), sort_keys=True).encode()).hexdigest()


class AdaptiveHookState:
    """The hook's state that re-plans while training (module docstring). `mode` is "default" or
    "optcc"; `switches` lists each switch ({step, to, ell, hosts, decision}); `trace` holds, per
    finished step, its mode and whether it was timed."""

    def __init__(self, cluster=None, algo: str = "optcc", *, process_group=None, min_ell: float = DEFAULT_MIN_ELL,
                 check_every: int = DEFAULT_CHECK_EVERY, runner: str = "streaming", asynchronous: bool = True,
                 timeout: float | None = DEFAULT_TIMEOUT_S, allow_worse_numerics: bool = False):
        from gpu_runner.runners import runner_named
        runner_named(runner)
        if not min_ell > 1:
            raise OptccError("min_ell", f"expected a slowdown above 1, got {min_ell!r}")
        if not (isinstance(check_every, int) and check_every >= 1):
            raise OptccError("check_every", f"expected a positive number of steps, got {check_every!r}")
        if timeout is not None and not timeout > 0:
            raise OptccError("timeout", f"expected a positive number of seconds or None, got {timeout!r}")
        if cluster is not None and cluster.g != 1:
            raise OptccError("cluster.g", f"the adaptive state times one rank per host (g = 1); got g = {cluster.g}")
        self.base = cluster
        self.algo = algo
        self.process_group = process_group
        self.min_ell = float(min_ell)
        self.check_every = check_every
        self.timeout = timeout
        self._plan_kw = {"process_group": process_group, "runner": runner, "asynchronous": False,
                         "timeout": timeout, "allow_worse_numerics": allow_worse_numerics}
        self.asynchronous = asynchronous
        self.mode = "default"
        self.step = 0
        self.switches: list[dict] = []
        self.trace: list[dict] = []
        self.last_verdict: dict | None = None
        self._plans: dict = {}              # cluster digest -> AutoHookState
        self._plan = None
        self._named: tuple = ()
        self._switched_at = 0
        self._timed_steps = 0
        self._history: list = []
        self._times: FlowTimes | None = None
        self._sizes: dict = {}              # bucket bytes -> dtype, seen in the last step
        self._group_info: tuple | None = None
        self._watchdog = None
        self._comm: tuple | None = None
        self._stream = None
        self._closed = False

    @property
    def world(self) -> int:
        """The process group's size (the hook divides each bucket by it)."""
        return dist.get_world_size(self.process_group)

    # -- the group -----------------------------------------------------------------------------
    def _group(self):
        if self._group_info is None:
            from gpu_runner.hosts import host_name
            group = self.process_group
            p, rank = dist.get_world_size(group), dist.get_rank(group)
            if self.base is not None and self.base.p != p:
                raise OptccError("cluster.p", f"the cluster is for p = {self.base.p} ranks, the process group has {p}")
            if p < 3:
                raise OptccError("p", "the adaptive state needs at least 3 ranks (with two, either could be the "
                                      "slow one: gpu_runner.probe)")
            global_of = (lambda r: r) if group is None or group is dist.group.WORLD else \
                (lambda r: dist.get_global_rank(group, r))
            hosts: list = [None] * p
            dist.all_gather_object(hosts, host_name(), group=group)
            if len(set(hosts)) != p:
                raise OptccError("hosts", "the adaptive state times one rank per host; hosts "
                                          f"{sorted(h for h in set(hosts) if hosts.count(h) > 1)} run several")
            if self.timeout is not None:
                from gpu_runner.watchdog import Watchdog
                self._watchdog = Watchdog(rank, self.timeout, "optcc-adaptive-hook")
                self._watchdog.rest()
            self._group_info = (rank, p, global_of, hosts)
        return self._group_info

    # -- one bucket ----------------------------------------------------------------------------
    def _timed_step(self) -> bool:
        return self.mode == "default" or (self.step - self._switched_at) % self.check_every == self.check_every - 1

    def _run(self, tensor: torch.Tensor, step_end: bool) -> None:
        rank, p, peer, hosts = self._group()
        first = self._times is None
        if first:
            self._times = FlowTimes(p)
            self._sizes = {}
            self._step_timed = self._timed_step()
        nbytes = tensor.numel() * tensor.element_size()
        self._sizes[nbytes] = tensor.dtype
        wd = self._watchdog
        if wd is not None:
            wd.arm(f"a gradient bucket's AllReduce ({self.mode}) to start")
        try:
            if self.mode == "default" or (self._step_timed and first):
                pairwise_allreduce(tensor.view(-1), rank, p, self.process_group, peer, self._times,
                                   reverse=self._timed_steps % 2 == 1)
            else:
                state = self._plan.state_for(nbytes)
                state.admit(tensor)
                state.submit(tensor)
            if step_end:
                self._end_step(rank, p, hosts)
        finally:
            if wd is not None:
                wd.rest()

    def _end_step(self, rank: int, p: int, hosts: list) -> None:
        """At DDP's last bucket: gather a timed step's receive times, decide, switch if the verdict says so."""
        timed, times = self._step_timed, self._times
        self._times = None
        self.trace.append({"step": self.step, "mode": self.mode, "timed": timed})
        self.step += 1
        self._timed_steps += timed
        if not timed or self.step == 1:     # step 0 is a warm-up: gloo connects each pair at its first message
            return
        mine = torch.tensor(times.row(), dtype=torch.float64)
        rows = [torch.empty_like(mine) for _ in range(p)]
        if self._watchdog is not None:
            self._watchdog.arm("every rank's receive times (the step boundary)")
        dist.all_gather(rows, mine, group=self.process_group)
        self._history = (self._history + [[r.tolist() for r in rows]])[-WINDOW:]
        if len(self._history) < WINDOW or not complete(self._history):
            return
        est = verdict(self._history, hosts, float(self.base.overhead) if self.base is not None else 0.0, self.min_ell)
        self.last_verdict = est
        self.trace[-1]["verdict"] = {"ell": [round(r["ell"], 3) for r in est["ranks"]], "spread": round(est["spread"], 3),
                                     "named": [r["rank"] for r in est["ranks"] if r["straggler"]]}
        named = tuple(r["rank"] for r in est["ranks"] if r["straggler"])
        if named == self._named:
            return
        if named:
            self._switch_to_optcc(est, named, hosts)
        else:
            self._record("default", est, named, hosts)
            self.mode, self._plan = "default", None
        self._named = named
        self._switched_at = self.step

    def _switch_to_optcc(self, est: dict, named: tuple, hosts: list) -> None:
        """Plan OptCC for the measured cluster, agree on it, admit the sizes already seen."""
        from gpu_runner.ddp_hook import AutoHookState
        cluster = plan_cluster(est, self.base)
        digest = cluster_digest(cluster)
        agree_on_schedule(digest, self.process_group)     # every rank planned the same cluster
        plan = self._plans.get(digest)
        if plan is None:
            plan = self._plans[digest] = AutoHookState(cluster, self.algo, **self._plan_kw)
        for nbytes, dtype in sorted(self._sizes.items()):
            state = plan.state_for(nbytes)                 # built and proved
            state.admit(torch.empty(0, dtype=dtype))
            state.executor()                               # its schedule's digest all-gathered
        self._record("optcc", est, named, hosts)
        self.mode, self._plan = "optcc", plan

    def _record(self, to: str, est: dict, named: tuple, hosts: list) -> None:
        ranks = est["ranks"]
        watched = named or self._named
        entry = {"step": self.step, "to": to, "hosts": [hosts[r] for r in watched],
                 "ell": {hosts[r]: ranks[r]["ell"] for r in watched}, "spread": est["spread"],
                 "decision": est["decision"]}
        self.switches.append(entry)
        if self._group_info[0] == 0:
            ells = ", ".join(f"{h} ℓ = {e:.2f}" for h, e in entry["ell"].items())
            log.warning("optcc adaptive: from step %d %s (%s; %s)", self.step,
                        "OptCC" if to == "optcc" else "the default exchange", ells, est["decision"])

    # -- the hook's interface ------------------------------------------------------------------
    def submit(self, tensor: torch.Tensor, step_end: bool = False) -> torch.futures.Future:
        """All-reduce `tensor` in place off this thread; `step_end`: DDP's last bucket of the step."""
        from gpu_runner.ddp_hook import _submit
        if self._closed:
            raise RunnerError("the optcc hook state is closed")
        return _submit(self, tensor, lambda t: self._run(t, step_end), None)

    def close(self, timeout: float | None = None) -> None:
        """Finish every submitted bucket, join the thread, close every plan's states."""
        from gpu_runner.ddp_hook import _stop
        self._closed = True
        done = True
        if self._comm is not None:
            jobs, thread = self._comm
            done = _stop(jobs, thread, None, timeout)
        for plan in self._plans.values():
            try:
                plan.close(timeout)
            except RunnerError:
                done = False
        if self._watchdog is not None:
            done = self._watchdog.stop(timeout) and done
        if not done:
            raise RunnerError(f"the optcc hook's threads did not finish within {timeout} s")

    def __enter__(self) -> AdaptiveHookState:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

