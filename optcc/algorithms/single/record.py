"""OptCC's single-straggler construction (paper): `build` makes the schedule from `families`, the
terms the all-p proof states; `RECORD` is its row of the algorithm table."""
from __future__ import annotations

from optcc import latency_counts as LC
from optcc.algorithms.record import Algorithm, Latency
from optcc.algorithms.single.build import optcc_allreduce, optcc_flow_arrays, optcc_slot_time
from optcc.cluster import Cluster


def accepts(cluster: Cluster) -> tuple[bool, str]:
    if cluster.g > 1:
        return False, "covers one GPU per server (g = 1)"
    if len(cluster.stragglers) > 1:
        return False, "covers at most one straggler"
    return True, ""


LATENCY = Latency(LC.single_overheads, LC.single_latencies, lambda c: LC.SINGLE_KNEE,
                  "derived: optcc.latency_counts (single), docs/latency.md; tested in tests/optcc/test_model_time.py")

RECORD = Algorithm("optcc_single", optcc_allreduce, optcc_slot_time, accepts, LATENCY,
                   "paper: OptCC's single-straggler construction (PAPER.md 'OptCC'; Theorem 2's time)",
                   construction=True, arrays=optcc_flow_arrays, generator="optcc")
