"""The LP schedules as records of the algorithm table (optcc.algorithms.registry): importing this
module registers `lp_shared` and `lp_exclusive` (the CLI does, before it reads `--algo`).

They live here, not in the core table, because they need the fluid LP (lp_models is above core);
each builds lp_models.to_schedule.lp_schedule with k segments and the default LP solver (g = 1), or
lp_server_schedule, its lift to g GPUs per server (g > 1, one ℓ per server, any number of
straggler servers). Their slot
time is the built schedule's own timing, not a closed form (`closed_form=False`): their schedules
state none, and `optcc verify` shows their time as "not stated".
"""
from __future__ import annotations

from fractions import Fraction

from optcc.algorithms import registry
from optcc.cluster import Cluster
from optcc.schedule import Schedule


def _builder(capacity: str):
    def build(cluster: Cluster, k: int) -> Schedule:
        from lp_models.to_schedule import lp_schedule, lp_server_schedule
        return (lp_schedule if cluster.g == 1 else lp_server_schedule)(cluster, k, capacity)
    return build


def _slot_time(capacity: str):
    def slot(cluster: Cluster, k: int) -> Fraction:
        """Exact: the built schedule's slot time (its shares come from the LP solution)."""
        from optcc.timing import slot_time
        return slot_time(_builder(capacity)(cluster, k))
    return slot


def _accepts(cluster: Cluster) -> tuple[bool, str]:
    if cluster.g == 1:
        return True, ""
    if cluster.servers < 2:
        return False, "for g > 1 the LP schedule needs at least 2 servers"
    from optcc.algorithms.servers.shape import server_slowdowns
    from optcc.errors import OptccError
    try:
        server_slowdowns(cluster)
    except OptccError as e:              # a server mixing slowdowns: the lift needs one ℓ per server
        return False, e.message
    return True, ""


RECORDS = tuple(
    registry.Algorithm(f"lp_{capacity}", _builder(capacity), _slot_time(capacity), _accepts,
                       "none derived: the LP schedule's critical path was never counted",
                       f"derived: the {capacity}-capacity fluid LP optimum as a pipelined star schedule "
                       "(lp_models.to_schedule, docs/lp_models.md; g > 1: lifted over the servers with NVLink brackets)",
                       closed_form=False)
    for capacity in ("shared", "exclusive"))

for _record in RECORDS:
    if _record.name not in registry.names():
        registry.register(_record)
