"""NCCL's ring (paper): `build` makes the g = 1 ring from `families`, the terms the all-p proof
states; `RECORD` is the "ring" row of the table (g > 1: the flat ring over all p GPUs)."""
from __future__ import annotations

from fractions import Fraction

from optcc import latency_counts as LC
from optcc.algorithms.record import Algorithm, Latency
from optcc.cluster import Cluster
from optcc.schedule import Schedule


def _build(cluster: Cluster, k: int) -> Schedule:
    from optcc.algorithms.baselines.rings import flat_ring_allreduce
    from optcc.algorithms.ring.build import ring_allreduce
    if cluster.g > 1:
        return flat_ring_allreduce(cluster)       # one channel per NIC; k is not used
    return ring_allreduce(cluster, k)


def _slot_time(cluster: Cluster, k: int) -> Fraction:
    from optcc.algorithms.baselines.rings import flat_ring_slot_time
    return flat_ring_slot_time(cluster)


def _always(cluster: Cluster) -> tuple[bool, str]:
    return True, ""


RECORD = Algorithm("ring", _build, _slot_time, _always,
                   Latency(LC.ring_overheads, LC.ring_latencies, lambda c: None,
                           "derived: 2(p−1)·k synchronous steps (2(p−1) for the flat ring), an upper bound for "
                           "every o, Li, L (optcc.latency_counts); tested in tests/optcc/test_model_time.py"),
                   "paper: NCCL's ring with the straggler on it (PXN); g > 1 the flat ring over all p GPUs, "
                   "PAPER.md's derived reading of NCCLNoFailure (optcc.algorithms.baselines.rings)",
                   auto_segments=1, compare=True, generator="ring")    # k only adds steps to the ring
