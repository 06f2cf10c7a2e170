"""Clusters where every GPU is slow, reduced to one with a healthy GPU by scaling time.

Derived: a flow's duration is size·max(ℓ_src, ℓ_dst)/rate on a NIC (optcc.cluster), so
multiplying every ℓ by c multiplies every NIC duration by c. Dividing all ℓ by ℓ_min makes the
fastest GPUs healthy; a schedule for that cluster, with every start and local-op time
multiplied by ℓ_min, is a schedule for the original one (NVLink flows, whose speed does not
depend on ℓ, only get longer gaps, so ports stay within capacity). Its time is ℓ_min times the
reduced cluster's, and the lower bounds scale the same way (every term is linear in the ℓ's).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from fractions import Fraction
from typing import TYPE_CHECKING, cast

from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.schedule import Flow, LocalOp, Schedule

if TYPE_CHECKING:
    from optcc.algorithms.families.arrays import FlowArrays
    from optcc.event_arrays import EventArrays


INT64_SAFE = 2**62          # the array forms' int64 guard (optcc.event_arrays.INT64_SAFE, without numpy)


def applies(cluster: Cluster) -> bool:
    """True when no GPU is healthy."""
    return cluster.min_slowdown > 1


def reduced(cluster: Cluster) -> tuple[Cluster, Fraction]:
    """(the cluster with every ℓ divided by ℓ_min, ℓ_min)."""
    c = min(cluster.slowdown)
    if c <= 1:
        raise OptccError("stragglers", "some GPU is healthy; nothing to reduce")
    slow = {r: l / c for r, l in enumerate(cluster.slowdown) if l != c}
    red = Cluster.build(cluster.p, cluster.g, slow or None, cluster.bandwidth, cluster.nvlink_bandwidth,
                        cluster.overhead)
    return replace(red, issue_delay=cluster.issue_delay, latency=cluster.latency,
                   latency_model=cluster.latency_model), c


def build(cluster: Cluster, k: int, inner: Callable[[Cluster, int], Schedule]) -> Schedule:
    """`inner(reduced cluster, k)`'s schedule with times scaled by ℓ_min, on `cluster`."""
    red, c = reduced(cluster)
    s = inner(red, k)
    flows = [Flow(f.src, f.dst, f.piece, f.op, f.start * c, f.link, f.rate, f.coef) for f in s.flows]
    ops = [LocalOp(o.rank, o.piece, o.time * c, o.coef) for o in s.local_ops]
    meta = dict(s.meta)
    meta["time_scaled_by"] = str(c)
    meta.pop("slot_time", None)
    return Schedule(cluster, s.pieces, flows, ops, meta=meta)


def arrays(cluster: Cluster, k: int,
           inner_arrays: Callable[[Cluster, int], FlowArrays | EventArrays | None]) -> FlowArrays | EventArrays | None:
    """`inner_arrays(reduced cluster, k)` (FlowArrays or EventArrays, or None) with every time
    scaled by ℓ_min, on `cluster`: the flows of `build`, without a Schedule. A FlowArrays keeps
    its durations implicit (optcc.event_timer computes them from `cluster`'s ℓ, which are ℓ_min
    times the reduced ones); an EventArrays' durations are scaled too (all its flows are NIC
    flows: all_slow covers g = 1 only). None where the inner has no array form or a scaled value
    would leave int64 (the caller then builds the schedule)."""
    if cluster.g != 1:
        raise OptccError("g", "all_slow covers one GPU per server (g = 1)")
    red, c = reduced(cluster)
    fa = inner_arrays(red, k)
    if fa is None or len(fa) == 0:
        return fa
    num, den = c.numerator, c.denominator
    timed = hasattr(fa, "dur_cls")
    ev = cast("EventArrays", fa)             # read as one only where `timed`
    biggest = max([int(fa.start.max())] + ([int(ev.dur_table.max())] if timed else [])
                  + [t for t, _, _ in getattr(fa, "ops", [])])
    if (biggest + 1) * num >= INT64_SAFE // 4 or fa.scale * den >= INT64_SAFE:
        return None
    if not timed:
        return replace(fa, start=fa.start * num, scale=fa.scale * den)
    if ev.nv is not None and bool(ev.nv.any()):
        raise OptccError("g", "all_slow: the inner schedule has NVLink flows (g = 1 expected)")
    return replace(ev, start=ev.start * num, dur_table=ev.dur_table * num, scale=ev.scale * den,
                   ops=[(t * num, rank, piece) for t, rank, piece in ev.ops])


def slot_time(cluster: Cluster, k: int, inner_slot_time: Callable[[Cluster, int], Fraction]) -> Fraction:
    """ℓ_min × the reduced cluster's slot time (NIC-bound parts scale; see module docstring:
    only exact when the inner schedule ends with a NIC flow, which callers check by test)."""
    red, c = reduced(cluster)
    return c * inner_slot_time(red, k)
