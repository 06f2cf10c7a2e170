"""A lagged direct exchange between q ≤ 8 servers (derived, docs/optcc_servers.md 'Few servers'):
`build` and its counts; `RECORD` its table row, tried before optcc_servers."""
from __future__ import annotations

from typing import TYPE_CHECKING

from optcc.algorithms.few_servers import build as FS
from optcc.algorithms.record import Algorithm, Latency
from optcc.cluster import Cluster

if TYPE_CHECKING:
    from optcc.event_arrays import EventArrays


def event_arrays(cluster: Cluster, k: int) -> EventArrays:
    """The array form (numpy, imported by build.arrays when first used)."""
    return FS.arrays(cluster, k)


RECORD = Algorithm(FS.NAME, FS.build, FS.slot_time, FS.accepts,
                   Latency(FS.overheads, FS.latencies, FS.knee,
                           "derived: optcc.algorithms.few_servers.build (B = 3 below the knee); tested in tests/optcc/test_few_servers.py"),
                   "derived: a lagged direct exchange between q ≤ 8 servers with LP shards, NVLink lead and tail "
                   "(optcc.algorithms.few_servers.build, docs/optcc_servers.md 'Few servers')",
                   construction=True, arrays=event_arrays)
