"""Baseline AllReduce schedules the paper compares against, by family (each a module):

- optcc.algorithms.baselines_rings: NCCL's rings (`pxn_ring_allreduce`, `flat_ring_allreduce`,
  `hierarchical_ring_allreduce` and their slot times);
- optcc.algorithms.baselines_r2ccl: R2CCL-AllReduce (`r2ccl_allreduce`, g = 1, and
  `r2ccl_server_allreduce`, g > 1, with their slot times).

This module gathers their public names so callers can write `baselines.flat_ring_allreduce`.
"""
__all__ = ["r2ccl_allreduce", "r2ccl_server_allreduce", "r2ccl_server_slot_time", "r2ccl_slot_time",
           "flat_ring_allreduce", "flat_ring_slot_time", "hierarchical_ring_allreduce",
           "hierarchical_ring_slot_time", "pxn_ring_allreduce"]

from optcc.algorithms.baselines_r2ccl import (  # noqa: F401
    r2ccl_allreduce,
    r2ccl_server_allreduce,
    r2ccl_server_slot_time,
    r2ccl_slot_time,
)
from optcc.algorithms.baselines_rings import (  # noqa: F401
    flat_ring_allreduce,
    flat_ring_slot_time,
    hierarchical_ring_allreduce,
    hierarchical_ring_slot_time,
    pxn_ring_allreduce,
)
