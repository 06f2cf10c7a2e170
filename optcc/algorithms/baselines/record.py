"""The baselines' rows of the algorithm table: NCCL's hierarchical ring and R2CCL (the ring's row
is optcc.algorithms.ring.record)."""
from __future__ import annotations

from fractions import Fraction

from optcc.algorithms.baselines.r2ccl import (r2ccl_allreduce, r2ccl_server_allreduce, r2ccl_server_slot_time,
                                              r2ccl_slot_time)
from optcc.algorithms.baselines.rings import hierarchical_ring_allreduce, hierarchical_ring_slot_time
from optcc.algorithms.record import Algorithm
from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.schedule import Schedule


def _g_above_1(cluster: Cluster) -> tuple[bool, str]:
    return (True, "") if cluster.g > 1 else (False, "covers g > 1 GPUs per server (at g = 1 it is the ring)")


def _r2ccl_subpieces(cluster: Cluster) -> int:
    """S = max(8, p) broadcast sub-pieces: the chain fill (N−2)·Y/(K·S) stays below Y/K."""
    return max(8, cluster.p)


R2CCL_CHUNKS = 4


def _r2ccl_build(cluster: Cluster, k: int) -> Schedule:
    make = r2ccl_allreduce if cluster.g == 1 else r2ccl_server_allreduce
    return make(cluster, R2CCL_CHUNKS, _r2ccl_subpieces(cluster))


def _r2ccl_slot_time(cluster: Cluster, k: int) -> Fraction:
    closed = r2ccl_slot_time if cluster.g == 1 else r2ccl_server_slot_time
    return closed(cluster, R2CCL_CHUNKS, _r2ccl_subpieces(cluster))


def _r2ccl_accepts(cluster: Cluster) -> tuple[bool, str]:
    try:
        _r2ccl_slot_time(cluster, 1)
    except OptccError as e:
        return False, e.message
    return True, ""


HIERARCHICAL_RING = Algorithm(
    "hierarchical_ring", lambda c, k: hierarchical_ring_allreduce(c), lambda c, k: hierarchical_ring_slot_time(c),
    _g_above_1, "none derived: A and B of the hierarchical ring were never counted",
    "paper: NCCL's hierarchical ring; its time derived (optcc.algorithms.baselines.rings)",
    segmented=False, compare=True)

R2CCL = Algorithm(
    "r2ccl", _r2ccl_build, _r2ccl_slot_time, _r2ccl_accepts,
    "none derived: R2CCL's critical path was never counted",
    "paper: R2CCL-AllReduce (arXiv 2512.25059, PAPER.md), K = 4, S = max(8, p); g > 1 node level, "
    "derived (optcc.algorithms.baselines.r2ccl)",
    segmented=False, compare=True)
