"""Baseline AllReduce schedules the paper compares against, by family (each a module):

- optcc.algorithms.baselines.rings: NCCL's rings (`pxn_ring_allreduce`, `flat_ring_allreduce`,
  `hierarchical_ring_allreduce` and their slot times);
- optcc.algorithms.baselines.r2ccl: R2CCL-AllReduce (`r2ccl_allreduce`, g = 1, and
  `r2ccl_server_allreduce`, g > 1, with their slot times).

This module gathers their public names so callers can write `baselines.flat_ring_allreduce`,
and `record` holds their rows of the algorithm table (the ring's is optcc.algorithms.ring.record).
"""
__all__ = ["r2ccl_allreduce", "r2ccl_server_allreduce", "r2ccl_server_slot_time", "r2ccl_slot_time",
           "flat_ring_allreduce", "flat_ring_slot_time", "hierarchical_ring_allreduce",
           "hierarchical_ring_slot_time", "pxn_ring_allreduce"]

from optcc.algorithms.baselines.r2ccl import (  # noqa: F401
    r2ccl_allreduce,
    r2ccl_server_allreduce,
    r2ccl_server_slot_time,
    r2ccl_slot_time,
)
from optcc.algorithms.baselines.rings import (  # noqa: F401
    flat_ring_allreduce,
    flat_ring_slot_time,
    hierarchical_ring_allreduce,
    hierarchical_ring_slot_time,
    pxn_ring_allreduce,
)

