"""OptCC for one straggler server of g GPUs (derived, docs/optcc_servers.md): the NIC instance on
q = p/g nodes lifted over the g rails (`lift`, `families`), NVLink lead and tail (`build`);
`arrays` is the same schedule as EventArrays; `RECORD` its table row."""
from __future__ import annotations

from typing import TYPE_CHECKING

from optcc import latency_counts as LC
from optcc.algorithms.record import Algorithm, Latency
from optcc.algorithms.servers.build import optcc_server_allreduce, optcc_server_slot_time
from optcc.algorithms.servers.shape import straggler_server
from optcc.cluster import Cluster
from optcc.errors import OptccError

if TYPE_CHECKING:
    from optcc.event_arrays import EventArrays


def accepts(cluster: Cluster) -> tuple[bool, str]:
    if cluster.g < 2:
        return False, "covers g > 1 GPUs per server"
    try:
        straggler_server(cluster)
    except OptccError as e:             # several slow servers or mixed ℓ in one: optcc_rails
        return False, e.message
    return True, ""


def server_event_arrays(cluster: Cluster, k: int) -> EventArrays:
    """The array form, imported when first used (numpy: commands that only build schedules skip it)."""
    from optcc.algorithms.servers.arrays import server_event_arrays
    return server_event_arrays(cluster, k)


RECORD = Algorithm("optcc_servers", optcc_server_allreduce, optcc_server_slot_time, accepts,
                   Latency(LC.servers_overheads, LC.servers_latencies, lambda c: LC.SERVERS_KNEE,
                           "derived: optcc.latency_counts (servers); tested in tests/optcc/test_model_time.py"),
                   "derived: one straggler server, the NIC instance plus NVLink lead and tail (docs/optcc_servers.md)",
                   construction=True, arrays=server_event_arrays)
