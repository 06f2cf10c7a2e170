"""Run a RankPlan on a tensor: one batch_isend_irecv per start time, additions in place.

`Executor(schedule, rank)` caches plans and scratch per (numel, dtype, device), so repeated
runs on same-sized tensors (benchmarks, DDP buckets) allocate nothing: every step only posts
pre-built P2POps and does in-place add_/copy_/mul_ on views bound once per tensor.

`run_virtual(schedule, tensors)` executes all ranks in one process with the same plans and
scratch (a "send" copies into the receiver's scratch slot): a fast exact oracle for tests
and the single-GPU data-path check (benchmarks/device/gpu_checks.py), no process group needed.

Both execute only a schedule that passed gpu_runner.proof.gate (proved or certified in this
process, or now; `certificate=` a certificate file); `unsafe=True` skips that, for tests that
must run a wrong schedule. The Executor re-checks the schedule's sha256 before building a
plan, so a schedule edited after its proof is refused too. Every plan is checked against the
schedule (verifier.step_check, the "runnable" property) before it runs.
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from optcc.lowering.step import RankPlan, build_all_plans, build_plan
from verifier.step_check import check_plan, check_plans
from gpu_runner.proof import gate
from optcc.schedule import Schedule

SUPPORTED_DTYPES = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
    "int32": torch.int32,
    "int64": torch.int64,
}


class RunnerError(RuntimeError):
    """A rank could not finish the schedule (peer failure, timeout, bad tensor)."""


def _flat(tensor: torch.Tensor) -> torch.Tensor:
    if not tensor.is_contiguous():
        raise RunnerError("the tensor must be contiguous (its flattened view is what the pieces cut)")
    if tensor.dtype not in SUPPORTED_DTYPES.values():
        raise RunnerError(f"dtype {tensor.dtype} is not supported (supported: {', '.join(SUPPORTED_DTYPES)})")
    return tensor.view(-1)


class _BoundPlan:
    """A plan bound to one tensor: views and P2POps built once."""

    def __init__(self, plan: RankPlan, flat: torch.Tensor, scratch: torch.Tensor, group, group_ranks):
        self.flat = flat
        self.steps = []
        peer_of = (lambda r: r) if group_ranks is None else (lambda r: group_ranks[r])
        for s in plan.steps:
            sends_done = [(t.flow, t.peer) for t in s.sends_done]
            landings = []
            for t in s.landings:
                dst = flat[t.lo:t.hi]
                src = scratch[t.slot:t.slot + t.length]
                landings.append((t.flow, t.peer, t.op, t.coef, dst, src))
            local_ops = [(flat[lo:hi], coef) for lo, hi, coef in s.local_ops]
            snapshots = [(scratch[t.slot:t.slot + t.length], flat[t.lo:t.hi]) for t in s.snapshots]
            posts = []
            flows = []
            for t in s.posts:
                if t.send:
                    buf = scratch[t.slot:t.slot + t.length] if t.slot is not None else flat[t.lo:t.hi]
                    posts.append(dist.P2POp(dist.isend, buf, peer_of(t.peer), group))
                else:
                    buf = scratch[t.slot:t.slot + t.length]
                    posts.append(dist.P2POp(dist.irecv, buf, peer_of(t.peer), group))
                flows.append((t.flow, "send to" if t.send else "receive from", t.peer))
            self.steps.append((s.time, sends_done, landings, local_ops, snapshots, posts, flows))


class Executor:
    """Runs one Schedule on this rank of a process group; caches plans/scratch per tensor shape."""

    def __init__(self, schedule: Schedule, rank: int, group=None, group_ranks=None, watchdog=None, *,
                 certificate: str | None = None, unsafe: bool = False):
        self.proof = gate(schedule, certificate, unsafe)       # OptccError for an unproved schedule
        self._sha = None if unsafe else schedule.sha256()
        self.schedule = schedule
        self.rank = rank
        self.group = group
        self.group_ranks = group_ranks        # schedule rank -> global rank (None: identity)
        self.watchdog = watchdog
        self._plans: dict[int, RankPlan] = {}
        self._scratch: dict = {}
        self._bound: dict = {}

    def plan(self, numel: int) -> RankPlan:
        plan = self._plans.get(numel)
        if plan is None:
            if self._sha is not None and self.schedule.sha256() != self._sha:
                raise RunnerError("the schedule was modified after it was proved; refusing to run it")
            plan = build_plan(self.schedule, self.rank, numel)
            ok, cx = check_plan(self.schedule, plan)
            if not ok:
                raise RunnerError(f"runnable: {cx['message']}; refusing to run it")
            self._plans[numel] = plan
        return plan

    def prepare(self, tensor: torch.Tensor) -> _BoundPlan:
        """Build (or reuse) the plan, scratch and views for this tensor; no work per step later."""
        flat = _flat(tensor)
        key = (flat.data_ptr(), flat.numel(), flat.dtype, flat.device)
        bound = self._bound.get(key)
        if bound is not None and bound.flat.data_ptr() == flat.data_ptr():
            return bound
        plan = self.plan(flat.numel())
        skey = (flat.numel(), flat.dtype, flat.device)
        scratch = self._scratch.get(skey)
        if scratch is None:
            scratch = self._scratch[skey] = torch.empty(max(plan.scratch_numel, 1), dtype=flat.dtype,
                                                         device=flat.device)
        if len(self._bound) > 8:            # DDP re-uses a few bucket buffers; keep the cache small
            self._bound.clear()
        bound = self._bound[key] = _BoundPlan(plan, flat, scratch, self.group, self.group_ranks)
        return bound

    failed = False                           # the step runner holds nothing a failed run leaves behind

    def close(self, timeout: float | None = None) -> bool:
        """Nothing to end: the step runner starts no thread (gpu_runner.runners.RankExecutor)."""
        return True

    def run(self, tensor: torch.Tensor) -> torch.Tensor:
        """AllReduce `tensor` in place by executing the schedule; returns the tensor."""
        bound = self.prepare(tensor)
        wd = self.watchdog
        pending: dict[int, list] = {}
        waited: dict[int, object] = {}   # id -> work (kept alive so that ids stay unique)

        def wait(flow, what):
            works = pending.pop(flow, ())
            for w in works:
                if id(w) in waited:
                    continue
                if wd is not None:
                    wd.waiting(what)
                try:
                    w.wait()
                except Exception as e:  # noqa: BLE001 - name what failed, keep the cause
                    first = (str(e).strip().splitlines() or [type(e).__name__])[0]
                    raise RunnerError(f"peer failure while waiting for {what()}: {first}") from e
                waited[id(w)] = w
            if wd is not None:
                wd.beat()

        for time, sends_done, landings, local_ops, snapshots, posts, flows in bound.steps:
            for flow, peer in sends_done:
                wait(flow, lambda flow=flow, peer=peer, time=time:
                     f"the send of flow {flow} to rank {peer} to complete (t = {time})")
            for flow, peer, op, coef, dst, src in landings:
                wait(flow, lambda flow=flow, peer=peer, time=time:
                     f"the data of flow {flow} from rank {peer} (t = {time})")
                if op == "copy":
                    dst.copy_(src)
                elif coef == 1:
                    dst.add_(src)
                else:
                    dst.add_(src, alpha=coef)
            for view, coef in local_ops:
                view.mul_(coef)
            for dst, src in snapshots:
                dst.copy_(src)
            if posts:
                works = dist.batch_isend_irecv(posts)
                if len(works) == len(posts):
                    for (flow, _, _), w in zip(flows, works):
                        pending[flow] = [w]
                else:                     # coalesced backends (NCCL) return one work per batch
                    for flow, _, _ in flows:
                        pending[flow] = works
        for flow in list(pending):
            wait(flow, lambda flow=flow: f"flow {flow} to complete at the end of the schedule")
        return tensor


def run_virtual(schedule: Schedule, tensors: list[torch.Tensor], *, certificate: str | None = None,
                unsafe: bool = False) -> list[torch.Tensor]:
    """Execute every rank's plan in one process (no communication library); tensors[r] in place.
    Refuses (OptccError) a schedule gpu_runner.proof.gate does not let through."""
    gate(schedule, certificate, unsafe)
    p = schedule.cluster.p
    if len(tensors) != p:
        raise RunnerError(f"expected {p} tensors, got {len(tensors)}")
    flats = [_flat(t) for t in tensors]
    numel = flats[0].numel()
    if any(f.numel() != numel or f.dtype != flats[0].dtype for f in flats):
        raise RunnerError("all ranks' tensors must have the same number of elements and dtype")
    plans = build_all_plans(schedule, numel)
    ok, cx = check_plans(schedule, plans)
    if not ok:
        raise RunnerError(f"runnable: {cx['message']}; refusing to run it")
    scratch = [torch.empty(max(pl.scratch_numel, 1), dtype=f.dtype, device=f.device)
               for pl, f in zip(plans, flats)]
    recv_slot = {}
    for r, pl in enumerate(plans):
        for t in pl.transfers:
            if not t.send:
                recv_slot[t.flow] = (r, t.slot, t.length)
    by_time: dict = {}
    for r, pl in enumerate(plans):
        for s in pl.steps:
            by_time.setdefault(s.time, []).append((r, s))
    for time in sorted(by_time):
        entries = by_time[time]
        for r, s in entries:
            for t in s.landings:
                dst = flats[r][t.lo:t.hi]
                src = scratch[r][t.slot:t.slot + t.length]
                if t.op == "copy":
                    dst.copy_(src)
                else:
                    dst.add_(src, alpha=t.coef)
        for r, s in entries:
            for lo, hi, coef in s.local_ops:
                flats[r][lo:hi].mul_(coef)
        for r, s in entries:
            for t in s.snapshots:
                scratch[r][t.slot:t.slot + t.length].copy_(flats[r][t.lo:t.hi])
        for r, s in entries:
            for t in s.posts:
                if not t.send:
                    continue
                src = scratch[r][t.slot:t.slot + t.length] if t.slot is not None else flats[r][t.lo:t.hi]
                dr, slot, length = recv_slot[t.flow]
                scratch[dr][slot:slot + length].copy_(src)
    return tensors
