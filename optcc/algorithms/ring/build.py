"""NCCL's ring AllReduce: reduce-scatter then all-gather over all p GPUs, k segments in turn.

Each segment is cut into p shards (pieces of size 1/(k·p)). In reduce-scatter step t
(t = 0..p−2) GPU i adds its shard (i − t) mod p into GPU i+1; after p−1 steps GPU i holds the
full sum of shard (i+1) mod p, which the all-gather steps copy around the ring. Steps are
synchronous, as in NCCL: every step lasts as long as its slowest link, shard · max ℓ. So the
slot time is max ℓ · 2(p−1)/p = ℓ·T0: a straggler on the ring slows the whole collective by ℓ
(paper, Section 1; PAPER.md "NCCL ring with the straggler on the ring (PXN rerouting)").
"""
from __future__ import annotations

from typing import Any
from fractions import Fraction

from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.algorithms.families import INT, Params
from optcc.algorithms.ring.families import piece_sizes, ring_flows, slot
from optcc.algorithms.stated import states_slot_time
from optcc.schedule import Schedule


def ring_step(t: int, n: int) -> tuple[int, str]:
    """Step t = 0..2(n−1)−1 of a ring AllReduce over n positions: position i sends shard
    (i + offset) mod n to position i+1 with `op`. Reduce-scatter (t < n−1) adds shard i − t;
    all-gather (t' = t − (n−1)) copies shard i + 1 − t', the full sum i holds after it."""
    if t < n - 1:
        return -t, "add"
    return 1 - (t - (n - 1)), "copy"


def ring_slot_time(cluster: Cluster, segments: int = 1) -> Fraction:
    """ℓ_max · 2(p−1)/p = ℓ·T0, for every k (paper, Section 1; module docstring)."""
    return max(cluster.slowdown) * Fraction(2 * (cluster.p - 1), cluster.p)


@states_slot_time("ring_slot_time")
def ring_allreduce(cluster: Cluster, segments: int = 1) -> Schedule:
    if cluster.g != 1:
        raise OptccError("g", "the ring generator covers one GPU per server (g = 1); "
                                "for g > 1 use baselines.flat_ring_allreduce (build_schedule picks it)")
    p, k = cluster.p, segments
    # The flows, slot and pieces are the ring families' (optcc.algorithms.ring.families), the
    # formulas verifier.parametric proves for every p, k, ℓ and straggler rank; ℓ is the slowest
    # rank's, which sets the synchronous step.
    P = Params(p, k, Fraction(max(cluster.slowdown)), -1)
    flows = ring_flows(p, k, slot(INT, P))
    return Schedule(cluster, piece_sizes(P), flows, meta=ring_meta(cluster, k))


def ring_meta(cluster: Cluster, segments: int) -> dict[str, Any]:
    """The ring schedule's meta (its generated form, optcc.generated, states the same)."""
    return {"algorithm": "ring", "segments": segments, "capacity": "exclusive"}
