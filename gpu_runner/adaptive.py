"""The adaptive DDP hook state (`OptccHookState.adaptive()`): the default all-reduce while the
links are even, OptCC for the measured cluster while one host is slow, and back after the repair.

While the links are even each bucket is all-reduced as the default hook does it (gloo's
all_reduce, asynchronous, issued in the hook), except a sample: `sample_bytes` of a timed step's
first bucket go by a timed pairwise exchange (`pairwise_allreduce`). Its reduce-scatter runs in
p − 1 rounds where rank r sends to r + j and receives from r − j (the sample's first half) and
then to r − j from r + j (its second half); every NIC carries one outgoing and one incoming
stream per round, and each receive is the probe's timed flow s → d (gpu_runner.probe, module
docstring), so the probe's own `estimate` and rule (`decide`: slow iff ℓ·(1 − spread) ≥ min_ell)
read the hook's timings unchanged: no probe traffic, the gradients' own messages are timed. A
rank that waited in one round for the slow host starts the next late, and in one direction
that wait lands on the slow host's neighbour every round; so a step's repetition is each flow's
better reading of its two directions (`paired`), and a verdict reads the last two timed steps,
the two repetitions the probe's rule needs. The summed chunks (chunk c summed by rank c in rank
order, so every rank holds the same bits) and every rank's receive times travel in one
all-gather, so every rank decides from the same data, the same way. A barrier first lines the
ranks up: a rank that reaches its first bucket late would otherwise read as a slow sender.
While the links are even, a timed step whose own reading (its one repetition) puts every host
below `min_ell` against the median host (`slowest_against_median`) lets the next step go
untimed (the default hook's all_reduce alone: the barrier and the sample's synchronous rounds
are what a timed step costs over it); so do the first step's reading (its flows are timed, but
no verdict or per-message cost reads them: gloo's first messages on each pair) and the reading
that switches back from OptCC. The step after an untimed one is timed, and so is every step
after one that read a host at `min_ell` or more. So
a slowdown from step u is read, in full, by two timed steps among u, u + 1, u + 2 (u untimed:
u + 1 reads the host slow, so u + 2 is timed too), and OptCC runs by step u + 3 (derived: the
switch takes effect at the step boundary after the second); the rule that names a host, two
slow repetitions, is unchanged.

Every fourth timed step, from the first after the warm-up (the cost is read early, from two
timed steps before any change to the links the job meets), sends each chunk in SPLIT messages:
one flow timed in two message counts gives the per-message cost o (`message_cost`), which the plan's k is chosen for; it is
logged with the k of each bucket size. A host named slow switches the state, from the next
step, to OptCC for the measured cluster (the probe's cluster JSON of the hook's rates and o;
`cluster`, if given, adds its issue delay and latency; `plan_cluster`), planned by
AutoHookState, which proves each schedule and all-gathers its digest (the gate of every run);
the plan's own digest is agreed first, and the schedules of the bucket sizes seen are admitted
at the boundary. While OptCC runs, every `check_every`-th step times its first bucket's sample
(in the hook, before the bucket is handed to the communication thread) so the repair is seen:
not by the pairwise all-reduce, whose even shares the slow host would carry at its own rate,
but by the shift exchange (`shift_exchange`: each half moved one ring neighbour on, each receive
timed; OptCC then sums the whole bucket, the moved sample included): flows of the pairwise
exchange's size, one out of each host per half where the pairwise exchange sends p − 1 per half
and then all-gathers (derived from the two exchanges' rounds).
So is the step after a timed one that reads a named host between recovered and still slow
(below the planned ℓ^RETAKE_BELOW: its reading is taken again), by the window where that no
longer names the host, or by the latest step alone (the window still holds a step from before a
repair); once no host is named and each named one measures ℓ below the square root
of the ℓ OptCC was planned for (policy: halfway between healthy and that slowdown on a log scale;
a host merely no longer named, its slowdown within the spread, keeps OptCC: no flapping on
noise) the state switches back.
Each switch is logged (logger `gpu_runner.adaptive`, rank 0) with the measured ℓ and recorded
in `switches`.
"""
from __future__ import annotations

import hashlib
import json
import logging
import math
import time

import torch
import torch.distributed as dist

from gpu_runner.executor import RunnerError
from gpu_runner.gate import agree_on_schedule
from gpu_runner.worker import DEFAULT_TIMEOUT_S
from optcc.errors import OptccError

log = logging.getLogger("gpu_runner.adaptive")

WINDOW = 2                 # timed steps a verdict reads: the two repetitions the probe's rule needs
COST_WINDOW = 8            # timed steps the per-message cost is taken over (upper quartile, message_cost) (a cost, unlike a rate, does not
                           # change when a link degrades; one step's dozen flows give it to ±1 ms on a busy host)
DEFAULT_MIN_ELL = 1.25     # policy: a switch costs a plan and a proof, so a small slowdown does not
DEFAULT_CHECK_EVERY = 3    # policy: while OptCC runs, one step in 3 times the links (a timed step's even sample
                           # costs the slow host a full share at its rate: +80 ms on a 0.28 s step at ℓ = 2 on
                           # the testbed; with one step in 2 the degraded median was a timed step), and a reading
                           # that no longer names the host but does not read it recovered is taken again at the
                           # next step: a repair just after a timed step is read 2 steps later, and OptCC stops
                           # from the step after that, 3 after the repair
RETAKE_BELOW = 0.75         # policy: while OptCC runs, a named host that reads ℓ below planned ℓ^0.75 (1.68 for 2),
                           # in the window where that no longer names it or in the latest step alone, is read
                           # again at the next step (a repair's first reading can land there: on the testbed the
                           # window of a degraded step and the repaired one read 1.67 at planned 1.83, and OptCC
                           # stopped 4 steps after the repair); above it, it is still slow
DEFAULT_SAMPLE_BYTES = 384 * 1024   # policy: bytes of a timed step's first bucket sent by the pairwise exchange
                                    # (48 KiB per flow and direction at p = 4, 3x a shaped link's burst; on the
                                    # busy 2-core testbed 256 KiB let noise delay a switch, 512 KiB cost 1.27x)
SPLIT = 8                  # policy: every fourth timed step sends each chunk in 8 messages: one flow timed in
                           # two message counts gives the per-message cost (message_cost), 7·o apart

SEVERAL_PER_HOST = ("With several ranks per host, probe the cluster (`optcc probe`: all of a host's ranks send at "
                    "once, so its NIC is measured; it writes g and the slow hosts) and use "
                    "OptccHookState.auto(cluster); re-planning while training is per rank, not per host.")


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

    def add(self, src: int, seconds: float, nbytes: int, messages: int = 1) -> None:
        self.seconds[src] += seconds
        self.nbytes[src] += nbytes
        self.messages[src] += messages

    def row(self) -> list[float]:
        return self.seconds + self.nbytes + self.messages


def _exchange(send: torch.Tensor, recv: torch.Tensor, dst: int, src: int, group, peer, times: FlowTimes,
              split: int = 1) -> None:
    """One round: send `send` to dst while receiving `recv` from src, each in `split` messages
    posted at once; the receive is timed from the post to its last message (the probe's
    receiver-timed flow)."""
    t0 = time.perf_counter()
    sends = [_isend(x, peer(dst), group) for x in torch.tensor_split(send, split)]
    recvs = [_irecv(x, peer(src), group) for x in torch.tensor_split(recv, split)]
    for r in recvs:
        r.wait()
    times.add(src, time.perf_counter() - t0, recv.numel() * recv.element_size(), split)
    for s in sends:
        s.wait()


def pairwise_allreduce(flat: torch.Tensor, rank: int, p: int, group=None, peer=lambda r: r,
                       times: tuple[FlowTimes, FlowTimes] | None = None, split: int = 1,
                       gather_times: bool = False) -> list | None:
    """Sum `flat` (1-D, contiguous, a multiple of 2·p elements) over the p ranks in place: its first
    half reduce-scattered in rounds j = 1..p−1 that send to r + j and receive from r − j, its
    second half in rounds that send to r − j and receive from r + j (module docstring), each
    receive timed into `times` (forward, backward), each chunk sent in `split` messages; then one
    all-gather of the summed chunks (untimed). `peer` maps a group rank to the rank the
    point-to-point calls take. `gather_times`: every rank's two rows ride along in that
    all-gather (their float64 bits after the chunks' bytes, one collective instead of two);
    returns the p rows, each forward row + backward row."""
    if flat.numel() % (2 * p):
        raise OptccError("flat", f"the pairwise exchange needs a multiple of 2·p = {2 * p} elements, "
                                 f"got {flat.numel()}")
    times = times if times is not None else (FlowTimes(p), FlowTimes(p))
    totals, owned = [], []
    for half, way, rec in zip(torch.tensor_split(flat, 2), (1, -1), times):
        chunks = list(torch.tensor_split(half, p))
        mine = chunks[rank]
        parts = [mine if r == rank else torch.empty_like(mine) for r in range(p)]
        for j in range(1, p):
            dst, src = (rank + way * j) % p, (rank - way * j) % p
            _exchange(chunks[dst], parts[src], dst, src, group, peer, rec, split)
        total = parts[0].clone()
        for r in range(1, p):             # rank order: the same sum whoever owns the chunk
            total.add_(parts[r])
        totals.append(total.view(torch.uint8))
        owned.append(chunks)
    row = times[0].row() + times[1].row()
    extra = [torch.tensor(row, dtype=torch.float64).view(torch.uint8)] if gather_times else []
    mine_out = torch.cat(totals + extra)
    outs = [torch.empty_like(mine_out) for _ in range(p)]
    dist.all_gather(outs, mine_out, group=group)     # every rank then holds the owners' bits
    width = totals[0].numel()
    for r in range(p):
        for h in range(2):
            owned[h][r].view(torch.uint8).copy_(outs[r][h * width:(h + 1) * width])
    if not gather_times:
        return None
    return [outs[r][2 * width:].clone().view(torch.float64).tolist() for r in range(p)]


def shift_exchange(flat: torch.Tensor, rank: int, p: int, group=None, peer=lambda r: r,
                   times: tuple[FlowTimes, FlowTimes] | None = None, split: int = 1,
                   gather_times: bool = False) -> list | None:
    """Move `flat` (1-D, contiguous, a multiple of 2·split elements) between ring neighbours in
    place: its first half to r + 1 while r − 1's first half takes its place, then (after a
    barrier: no rank starts a round late for waiting on a slow one) its second half to r − 1 while
    r + 1's takes its place; each receive timed into `times` (forward, backward) as in
    `pairwise_allreduce`, each half sent in `split` messages. Every rank then holds another
    rank's values, so the ranks' values together are the same terms: an AllReduce run after it
    sums what it would have summed (in another order). Every NIC carries one outgoing and one
    incoming stream per round: one flow out of each host per half, where `pairwise_allreduce`
    of the same flow size sends p − 1 per half and then all-gathers. `gather_times`: every
    rank's two rows, all-gathered; returns the p rows (forward row + backward row per rank)."""
    if flat.numel() % (2 * split):
        raise OptccError("flat", f"the shift exchange needs a multiple of 2·split = {2 * split} elements, "
                                 f"got {flat.numel()}")
    times = times if times is not None else (FlowTimes(p), FlowTimes(p))
    for i, (half, way, rec) in enumerate(zip(torch.tensor_split(flat, 2), (1, -1), times)):
        if i:
            dist.barrier(group=group)
        dst, src = (rank + way) % p, (rank - way) % p
        inbox = torch.empty_like(half)
        _exchange(half, inbox, dst, src, group, peer, rec, split)
        half.copy_(inbox)
    if not gather_times:
        return None
    row = torch.tensor(times[0].row() + times[1].row(), dtype=torch.float64)
    rows = [torch.empty_like(row) for _ in range(p)]
    dist.all_gather(rows, row, group=group)
    return [r.tolist() for r in rows]


def halves(rows: list) -> tuple[list, list]:
    """One gathered step's rows (forward row + backward row per rank) as two steps' rows."""
    n = len(rows[0]) // 2
    return [r[:n] for r in rows], [r[n:] for r in rows]


def message_cost(history: list[list[list[float]]], skip: frozenset = frozenset()) -> float | None:
    """The per-message cost o the hook measured (seconds), None where no flow was timed in two
    message counts: a flow timed in one direction in successive steps (history[i], history[i + 2]:
    `halves` of each step, forward then backward) in m1 messages (x1 bytes, t1 s) and in m2
    (x2, t2) gives, under T = m·o + x/rate, o = (t2 − t1·x2/x1) / (m2 − m1·x2/x1) (derived); the
    upper quartile over the flows and step pairs of `history` (a late peer's wait lands in either
    reading, so the errors are two-sided; policy: the upper quartile, not the median, because
    too large a k costs far more than too small a one: on the testbed static k = 8 and k = 63
    ran degraded steps in 0.34 s and 0.74 s). Flows from or to a rank in `skip` are left out
    (a link whose rate changed between the two steps reads its change as a message cost), unless
    that leaves none."""
    p = len(history[0]) if history else 0
    costs = []
    for a, b in zip(history, history[2:]):
        for d in range(p):
            for s in range(p):
                t1, x1, m1 = (a[d][k * p + s] for k in range(3))
                t2, x2, m2 = (b[d][k * p + s] for k in range(3))
                if s == d or x1 <= 0 or x2 <= 0 or m1 == m2 or s in skip or d in skip:
                    continue
                if m2 < m1:
                    (t1, x1, m1), (t2, x2, m2) = (t2, x2, m2), (t1, x1, m1)
                den = m2 - m1 * x2 / x1
                if den > 0:
                    costs.append((t2 - t1 * x2 / x1) / den)
    if not costs:
        return message_cost(history) if skip else None
    costs.sort()
    return costs[(3 * len(costs)) // 4]


def slow_in_some_step(history: list[list[list[float]]], hosts: list[str], min_ell: float) -> frozenset:
    """The ranks that read ℓ ≥ min_ell in some step of `history` alone (its `halves`, no message
    cost subtracted): the links whose rate may have changed within it."""
    from gpu_runner.probe import estimate
    out: set = set()
    for step in range(0, len(history) - 1, 2):
        pair = history[step:step + 2]
        if not complete(pair):
            continue
        est = estimate(paired(flow_rates(pair, 0.0)[0]), 1, hosts, None, min_ell, 0.0)
        out.update(r["rank"] for r in est["ranks"] if r["ell"] >= min_ell)
    return frozenset(out)


def flow_rates(history: list[list[list[float]]], overhead_s: float) -> tuple[list, float]:
    """(rates[rep][src][dst] in bytes/s, the per-message cost c subtracted) from gathered rows
    (history[rep][dst] = FlowTimes.row() of rank dst). A flow's rate is bytes / (seconds − m·c)
    over its m messages (derived: T(x) = c + x / rate per message, the probe's model), with c the
    measured cost kept within half the shortest message time, as the probe keeps its own."""
    p = len(history[0])
    per_msg = [row[s] / row[2 * p + s] for rep in history for d, row in enumerate(rep) for s in range(p)
               if s != d and row[2 * p + s] > 0]
    c = min(max(overhead_s, 0.0), min(per_msg) / 2) if per_msg else 0.0
    rates = [[[0.0] * p for _ in range(p)] for _ in history]
    for k, rep in enumerate(history):
        for d, row in enumerate(rep):
            for s in range(p):
                if s != d and row[2 * p + s] > 0:       # a flow not timed in this step reads 0: no reading
                    rates[k][s][d] = row[p + s] / (row[s] - row[2 * p + s] * c)
    return rates, c


def paired(rates: list) -> list:
    """Each step's two halves (rates[2i], rates[2i + 1]: forward, backward) as one repetition:
    every flow's better reading of the two (module docstring)."""
    return [[[max(a, b) for a, b in zip(ra, rb)] for ra, rb in zip(x, y)] for x, y in zip(rates[0::2], rates[1::2])]


def verdict(history: list[list[list[float]]], hosts: list[str], min_ell: float = DEFAULT_MIN_ELL,
            cost_history: list | None = None) -> dict:
    """The probe's estimate (rates, ℓ, the significance rule, the cluster JSON) of the hook's
    timed steps (history: each step's `halves`, forward then backward; a step is one repetition,
    `paired`), with the per-message cost the hook measured
    over `cost_history` (default: `history`; `message_cost`, "message_cost_s", without the flows
    of a rank slow in some step of it; its cluster's `overhead` is that cost as subtracted); the
    same on every rank that holds the same history."""
    from gpu_runner.probe import estimate
    costs = cost_history if cost_history is not None else history
    measured = message_cost(costs, slow_in_some_step(costs, hosts, min_ell))
    rates, c = flow_rates(history, measured or 0.0)
    p = len(hosts)
    sent = [row[p + s] / row[2 * p + s] for rep in history for d, row in enumerate(rep) for s in range(p)
            if s != d and row[2 * p + s] > 0]
    est = estimate(paired(rates), round(sum(sent) / len(sent)), hosts, None, min_ell, c)
    est["message_cost_s"] = measured
    return est


def slowest_against_median(est: dict) -> float:
    """The slowest rank's slowdown against the median rank (NIC rate: its better of send and
    receive, as `estimate`'s ℓ): what a step's own reading must keep below min_ell for the next
    step to go untimed. Not against the fastest rank, as the verdict's ℓ is: one flow that read
    fast (a shaped link's burst) would put every other host at its ratio."""
    nic = sorted(min(r["send_bytes_per_s"], r["recv_bytes_per_s"]) for r in est["ranks"])
    n = len(nic)
    median = (nic[(n - 1) // 2] + nic[n // 2]) / 2
    return median / nic[0] if nic[0] > 0 else math.inf


def complete(history: list[list[list[float]]]) -> bool:
    """Every rank was timed sending and receiving in every half of every step (all its flows in
    the pairwise all-reduce, its two neighbours' in the shift exchange; a bucket of fewer
    elements than ranks leaves some flows empty)."""
    p = len(history[0]) if history else 0
    return bool(history) and all(
        any(row[2 * p + s] > 0 for s in range(p) if s != d) and
        any(rep[e][2 * p + d] > 0 for e in range(p) if e != d)
        for rep in history for d, row in enumerate(rep))


def plan_cluster(est: dict, base=None):
    """The cluster OptCC is planned for: the verdict's (stragglers, B, the per-message cost it
    measured), with the issue delay and latency of `base` when given. A cost measured below what
    this host needs to post a message (optcc.segments.HOST_POST_S) is taken as that: a message
    costs at least its post, and a cluster with no latency at all would be timed under a preset.
    Returns (the cluster, where its o came from: "measured" or "host post cost")."""
    from optcc.cluster import Cluster
    from optcc.segments import HOST_POST_S
    cluster = Cluster.from_json(est["cluster"])
    overhead, label = cluster.overhead, "measured"
    if overhead < HOST_POST_S:
        overhead, label = HOST_POST_S, "host post cost"
    issue, latency = (base.issue_delay, base.latency) if base is not None else (0, 0)
    return cluster.with_latency(overhead, issue, latency, "custom"), label


def cluster_digest(cluster) -> str:
    return hashlib.sha256(json.dumps(cluster.to_json(), sort_keys=True).encode()).hexdigest()


class AdaptiveHookState:
    """The hook's state that re-plans while training (module docstring). `mode` is "default" or
    "optcc"; `switches` lists each switch ({step it takes effect, to, ell, hosts, decision,
    message_cost_s}, to OptCC also {segments: k per bucket bytes, overhead_s, overhead_from});
    `trace` holds, per finished step, its mode, whether it was timed, the bytes its sample sent
    and its verdict."""

    def __init__(self, cluster=None, algo: str = "optcc", *, process_group=None, min_ell: float = DEFAULT_MIN_ELL,
                 check_every: int = DEFAULT_CHECK_EVERY, sample_bytes: int = DEFAULT_SAMPLE_BYTES,
                 runner: str = "streaming", asynchronous: bool = True,
                 timeout: float | None = DEFAULT_TIMEOUT_S, allow_worse_numerics: bool = False):
        from gpu_runner.runners import runner_named
        runner_named(runner)
        if not min_ell > 1:
            raise OptccError("min_ell", f"expected a slowdown above 1, got {min_ell!r}")
        if not (isinstance(check_every, int) and check_every >= 1):
            raise OptccError("check_every", f"expected a positive number of steps, got {check_every!r}")
        if not (isinstance(sample_bytes, int) and sample_bytes >= 1):
            raise OptccError("sample_bytes", f"expected a positive number of bytes, got {sample_bytes!r}")
        if timeout is not None and not timeout > 0:
            raise OptccError("timeout", f"expected a positive number of seconds or None, got {timeout!r}")
        if cluster is not None and cluster.g != 1:
            raise OptccError("cluster.g", f"the adaptive state times one rank per host (g = 1); got g = {cluster.g}. "
                                          f"{SEVERAL_PER_HOST}")
        self.base = cluster
        self.algo = algo
        self.process_group = process_group
        self.min_ell = float(min_ell)
        self.check_every = check_every
        self.sample_bytes = sample_bytes
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
        self._planned_ell: dict = {}        # rank -> the ℓ OptCC was planned for
        self._switched_at = 0
        self._timed_steps = 0
        self._history: list = []
        self._cost_history: list = []
        self._times: tuple[FlowTimes, FlowTimes] | None = None
        self._step_timed = False
        # what this step's reading asks of the next step (`_decide`): False, it may go untimed (every
        # host read below min_ell); True, time it again (OptCC: neither slow nor recovered); None, the
        # mode's rule. `_end_step` makes it the next step's `_override` only after a timed step.
        self._asks: bool | None = None
        self._override: bool | None = None
        self._sampled = 0                   # bytes this step's sample sent
        self._verdict: dict | None = None
        self._next: tuple | None = None      # (mode, plan) from the next step
        self._sizes: dict = {}              # bucket bytes -> dtype OptCC would run, seen in this step
        self._last_sizes: dict = {}         # and in the last one
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
                                          f"{sorted(h for h in set(hosts) if hosts.count(h) > 1)} run several. "
                                          f"{SEVERAL_PER_HOST}")
            if self.timeout is not None:
                from gpu_runner.watchdog import Watchdog
                self._watchdog = Watchdog(rank, self.timeout, "optcc-adaptive-hook")
                self._watchdog.rest()
            self._group_info = (rank, p, global_of, hosts)
        return self._group_info

    # -- one bucket ----------------------------------------------------------------------------
    def _timed_step(self) -> bool:
        if self._override is not None:
            return self._override
        return self.mode == "default" or (self.step - self._switched_at) % self.check_every == self.check_every - 1

    def _sample_numel(self, numel: int, element_size: int, p: int) -> int:
        """Elements of a timed step's first bucket that are timed: while the links are even,
        `sample_bytes` summed by the pairwise exchange (a multiple of 2·p·SPLIT; the rest: the
        default all-reduce); while OptCC runs, `sample_bytes`/p moved by the shift exchange (a
        multiple of 2·SPLIT; OptCC then sums the whole bucket), the same bytes per flow, so the
        two modes' readings compare; at most the bucket."""
        unit, want = (2 * p * SPLIT, self.sample_bytes) if self.mode == "default" else \
            (2 * SPLIT, self.sample_bytes // p)
        return min(numel, max(unit, want // element_size)) // unit * unit

    def _begin(self, flat: torch.Tensor) -> int:
        """Each bucket's bookkeeping (a step's first bucket opens it); the elements to sample."""
        p = self._group()[1]
        first = self._times is None
        if first:
            self._times = (FlowTimes(p), FlowTimes(p))
            self._sizes = {}
            self._step_timed = self._timed_step()
        es = flat.element_size()
        n = self._sample_numel(flat.numel(), es, p) if first else 0
        self._sizes[flat.numel() * es] = flat.dtype
        if first and n < flat.numel() and self.mode == "default":   # what OptCC would run of it
            self._sizes[(flat.numel() - n) * es] = flat.dtype
        if first:
            self._sampled = n * es if self._step_timed else 0
        return n if self._step_timed else 0

    def _sample(self, flat: torch.Tensor) -> None:
        """Time `flat`'s flows, every rank's receive times gathered with it (after the warm-up
        step): while the links are even by the pairwise exchange, which sums it; while OptCC runs
        by the shift exchange, which only moves it (OptCC sums the whole bucket after it), so the
        slow host sends one flow per half at its own rate, not p − 1 and an all-gather. Every rank decides
        from the same rows, the same way; a switch takes effect at the next step."""
        rank, p, peer, hosts = self._group()
        wd = self._watchdog
        if wd is not None:
            wd.arm(f"a gradient bucket's timed exchange ({self.mode}) to start")
        try:
            # the ranks reach their first bucket up to milliseconds apart (their own backward); a
            # receive timed from its post would count a late sender's start as a slow link
            dist.barrier(group=self.process_group)
            exchange = pairwise_allreduce if self.mode == "default" else shift_exchange
            rows = exchange(flat, rank, p, self.process_group, peer, self._times,
                            split=SPLIT if self._timed_steps % 4 == 1 else 1,
                            gather_times=True)
            self._decide(rows, hosts, warm_up=self.step == 0)
        finally:
            if wd is not None:
                wd.rest()

    def _decide(self, rows: list, hosts: list, warm_up: bool = False) -> None:
        """Add one timed step's gathered rows; switch (from the next step) if the verdict says so.
        `warm_up`: the first step's rows (gloo's first messages on each pair) only say whether
        the next step may go untimed; no verdict or per-message cost reads them."""
        step = list(halves(rows))
        if not warm_up:
            self._history = (self._history + step)[-2 * WINDOW:]
            self._cost_history = (self._cost_history + step)[-2 * COST_WINDOW:]
        latest = verdict(step, hosts, self.min_ell, self._cost_history) if complete(step) else None   # this step alone
        own = slowest_against_median(latest) if latest is not None else None
        even = own is not None and own < self.min_ell       # every host read below min_ell
        if self.mode == "default":
            self._asks = False if even else None
        if warm_up or len(self._history) < 2 * WINDOW or not complete(self._history):
            if own is not None:
                self._verdict = {"own_ell": round(own, 3)}
            return
        est = verdict(self._history, hosts, self.min_ell, self._cost_history)
        self.last_verdict = est
        self._verdict = {"ell": [round(r["ell"], 3) for r in est["ranks"]], "spread": round(est["spread"], 3),
                         "named": [r["rank"] for r in est["ranks"] if r["straggler"]],
                         "message_cost_s": est["message_cost_s"],
                         **({"own_ell": round(own, 3)} if own is not None else {})}
        named = tuple(r["rank"] for r in est["ranks"] if r["straggler"])
        if named and named != self._named:
            self._next = ("optcc", self._switch_to_optcc(est, named, hosts))
            self._planned_ell = {r: est["ranks"][r]["ell"] for r in named}
        elif not named and self._named and all(est["ranks"][r]["ell"] < math.sqrt(self._planned_ell[r])
                                               for r in self._named):
            self._record("default", est, named, hosts)
            self._next = ("default", None)
            self._asks = False if even else None    # the default mode's rule, from this reading
        else:       # the same hosts slow, or the slow ones no longer named but not recovered either
            if self.mode == "optcc" and self._named:
                # the window still holds a step from before a repair: the latest step alone reads it too
                readings = [latest["ranks"]] + ([] if named else [est["ranks"]])
                if any(ranks[r]["ell"] < self._planned_ell[r] ** RETAKE_BELOW for ranks in readings for r in self._named):
                    self._asks = True
            return
        self._named = named

    def _end_step(self) -> None:
        """At DDP's last bucket: close the step's record, take up a switch decided in it."""
        self.trace.append({"step": self.step, "mode": self.mode, "timed": self._step_timed, "sample_bytes": self._sampled,
                           **({"verdict": self._verdict} if self._verdict else {})})
        self._times, self._verdict, self._last_sizes = None, None, self._sizes
        self._override = self._asks if self._step_timed else None     # never two untimed steps in a row
        self._asks = None
        self.step += 1
        self._timed_steps += self._step_timed
        if self._next is not None:
            self.mode, self._plan = self._next
            self._next = None
            self._switched_at = self.step
            if self.mode == "optcc":    # its timing cadence starts over; back to default, the deciding reading's rule holds
                self._override = None

    def _optcc_rest(self, plan, rest: torch.Tensor) -> None:
        """What OptCC runs of a bucket (the communication thread): `plan`'s schedule for its size."""
        if rest.numel() == 0:
            return
        wd = self._watchdog
        if wd is not None:
            wd.arm("a gradient bucket's AllReduce (OptCC) to start")
        try:
            state = plan.state_for(rest.numel() * rest.element_size())
            state.admit(rest)
            state.submit(rest)
        finally:
            if wd is not None:
                wd.rest()

    def _switch_to_optcc(self, est: dict, named: tuple, hosts: list):
        """Plan OptCC for the measured cluster, agree on it, admit the sizes seen; the plan."""
        from gpu_runner.ddp_hook import AutoHookState
        cluster, source = plan_cluster(est, self.base)
        digest = cluster_digest(cluster)
        agree_on_schedule(digest, self.process_group)     # every rank planned the same cluster
        plan = self._plans.get(digest)
        if plan is None:
            plan = self._plans[digest] = AutoHookState(cluster, self.algo, **self._plan_kw)
        sizes = {**self._last_sizes, **self._sizes}       # the last step's buckets and this one's so far
        for nbytes, dtype in sorted(sizes.items()):
            state = plan.state_for(nbytes)                 # built and proved
            state.admit(torch.empty(0, dtype=dtype))
            state.executor()                               # its schedule's digest all-gathered
        self._record("optcc", est, named, hosts, {
            "segments": {str(n): plan.chosen[n] for n in sorted(sizes)},
            "overhead_s": float(cluster.overhead), "overhead_from": source})
        return plan

    def _record(self, to: str, est: dict, named: tuple, hosts: list, plan: dict | None = None) -> None:
        """Keep the switch in `switches` and log it (rank 0): the measured ℓ, the rule's decision
        and, to OptCC, each bucket size's k and the per-message cost it was chosen for."""
        ranks = est["ranks"]
        watched = named or self._named
        entry = {"step": self.step + 1, "to": to, "hosts": [hosts[r] for r in watched],
                 "ell": {hosts[r]: ranks[r]["ell"] for r in watched}, "spread": est["spread"],
                 "decision": est["decision"], "message_cost_s": est["message_cost_s"], **(plan or {})}
        self.switches.append(entry)
        if self._group_info[0] == 0:
            ells = ", ".join(f"{h} ℓ = {e:.2f}" for h, e in entry["ell"].items())
            how = ""
            if plan is not None:
                ks = ", ".join(f"k = {k} for {n} B" for n, k in plan["segments"].items())
                measured = est["message_cost_s"]
                cost = (f"o = {plan['overhead_s'] * 1e3:.3g} ms measured" if plan["overhead_from"] == "measured" else
                        f"o measured {'nothing' if measured is None else f'{measured * 1e3:.3g} ms'}, below this "
                        f"host's post cost: k timed at o = {plan['overhead_s'] * 1e3:.3g} ms")
                how = f"; {ks} ({cost})"
            log.warning("optcc adaptive: from step %d %s (%s; %s%s)", self.step + 1,
                        "OptCC" if to == "optcc" else "the default all-reduce", ells, est["decision"], how)

    # -- the hook's interface ------------------------------------------------------------------
    def submit(self, tensor: torch.Tensor, step_end: bool = False) -> torch.futures.Future:
        """All-reduce `tensor` in place; `step_end`: DDP's last bucket of the step. A timed step's
        sample runs here, in the hook, while no other message of this state is in flight (DDP
        has waited for the last step's buckets) and no thread of ours competes for the
        interpreter; the rest while the links are even by gloo's all_reduce as the default hook
        does (asynchronous), while OptCC runs by the plan's schedule off this thread."""
        from gpu_runner.ddp_hook import _submit
        if self._closed:
            raise RunnerError("the optcc hook state is closed")
        flat = tensor.view(-1)
        n = self._begin(flat)
        if n:
            self._sample(flat[:n])
        rest = flat[n:] if self.mode == "default" else flat      # OptCC sums a shifted sample too
        if self.mode == "optcc":
            plan = self._plan
            fut = _submit(self, tensor, lambda t: self._optcc_rest(plan, rest), None)
        elif rest.numel():
            work = dist.all_reduce(rest, group=self.process_group, async_op=True)   # the default hook's collective
            fut = work.get_future().then(lambda _: tensor)
        else:
            fut = torch.futures.Future()
            fut.set_result(tensor)
        if step_end:
            self._end_step()
        return fut

    def close(self, timeout: float | None = None) -> None:
        """Finish every submitted bucket, join the thread, close every plan's states."""
        from gpu_runner.ddp_hook import close_states
        self._closed = True
        close_states(self._comm, self._plans.values(), timeout, self._watchdog)

    def __enter__(self) -> AdaptiveHookState:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

