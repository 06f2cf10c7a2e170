"""OptCC for m ≥ 2 stragglers on g = 1 (derived, docs/optcc_multi.md): `build` from `pattern`,
`fill` and `drain`; `arrays` is the same schedule as EventArrays; `RECORD` its table row."""
from __future__ import annotations

from typing import TYPE_CHECKING

from optcc import latency_counts as LC
from optcc.algorithms.multi.build import optcc_multi_allreduce, optcc_multi_slot_time
from optcc.algorithms.record import Algorithm, Latency
from optcc.cluster import Cluster

if TYPE_CHECKING:
    from optcc.event_arrays import EventArrays


def accepts(cluster: Cluster) -> tuple[bool, str]:
    if cluster.g > 1:
        return False, "covers one GPU per server (g = 1)"
    if len(cluster.stragglers) < 2:
        return False, "needs m ≥ 2 stragglers"
    return True, ""


def multi_event_arrays(cluster: Cluster, k: int) -> EventArrays:
    """The array form, imported when first used (numpy: commands that only build schedules skip it)."""
    from optcc.algorithms.multi.arrays import multi_event_arrays
    return multi_event_arrays(cluster, k)


RECORD = Algorithm("optcc_multi", optcc_multi_allreduce, optcc_multi_slot_time, accepts,
                   Latency(LC.multi_overheads, LC.multi_latencies, LC.multi_knee,
                           "derived: optcc.latency_counts (multi), docs/optcc_multi.md 'Latency'; tested in "
                           "tests/optcc/test_model_time.py and tests/optcc/test_optcc_multi_latency.py"),
                   "derived: m ≥ 2 stragglers (docs/optcc_multi.md)", construction=True, arrays=multi_event_arrays)
