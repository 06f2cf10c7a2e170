"""Clusters where every GPU is slow, reduced to one with a healthy GPU by scaling time.

Derived: a flow's duration is size·max(ℓ_src, ℓ_dst)/rate on a NIC (optcc.cluster), so
multiplying every ℓ by c multiplies every NIC duration by c. Dividing all ℓ by ℓ_min makes the
fastest GPUs healthy; a schedule for that cluster, with every start and local-op time
multiplied by ℓ_min, is a schedule for the original one (NVLink flows, whose speed does not
depend on ℓ, only get longer gaps, so ports stay within capacity). Its time is ℓ_min times the
reduced cluster's, and the lower bounds scale the same way (every term is linear in the ℓ's).
"""
from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.schedule import Flow, LocalOp, Schedule


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


def build(cluster: Cluster, k: int, inner) -> Schedule:
    """`inner(reduced cluster, k)`'s schedule with times scaled by ℓ_min, on `cluster`."""
    red, c = reduced(cluster)
    s = inner(red, k)
    flows = [Flow(f.src, f.dst, f.piece, f.op, f.start * c, f.link, f.rate, f.coef) for f in s.flows]
    ops = [LocalOp(o.rank, o.piece, o.time * c, o.coef) for o in s.local_ops]
    meta = dict(s.meta)
    meta["time_scaled_by"] = str(c)
    meta.pop("slot_time", None)
    return Schedule(cluster, s.pieces, flows, ops, meta=meta)


def slot_time(cluster: Cluster, k: int, inner_slot_time) -> Fraction:
    """ℓ_min × the reduced cluster's slot time (NIC-bound parts scale; see module docstring:
    only exact when the inner schedule ends with a NIC flow, which callers check by test)."""
    red, c = reduced(cluster)
    return c * inner_slot_time(red, k)
