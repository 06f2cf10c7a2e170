"""The shape the server lift covers (derived): the straggler server, the q-node instance cluster
and every server's ℓ. Read by the servers families (their closed forms), the lift that runs them
(servers.lift), baselines.r2ccl (R2CCL for g > 1) and lp_models.to_schedule (g > 1 LP schedules).
"""
from __future__ import annotations

from fractions import Fraction

from optcc.cluster import Cluster
from optcc.errors import OptccError

ONE = Fraction(1)


def straggler_server(cluster: Cluster) -> tuple[int, Fraction]:
    """(server index, ℓ) of the one straggler server; (0, 1) when no GPU is slow.

    Raises OptccError unless every slow GPU is on one server and all g GPUs there share one ℓ.
    """
    g = cluster.g
    slow = cluster.stragglers
    if not slow:
        return 0, ONE
    servers = sorted({r // g for r in slow})
    if len(servers) > 1:
        raise OptccError("stragglers", f"the multi-GPU OptCC handles one straggler server; slow GPUs sit on "
                                       f"servers {servers}")
    s = servers[0]
    ells = {cluster.slowdown[s * g + i] for i in range(g)}
    if len(ells) != 1:
        raise OptccError("stragglers", f"server {s} mixes slowdowns {sorted(map(str, ells))}; a straggler "
                                       f"server has all its {g} GPUs at the same ℓ (a lost NIC slows the "
                                       f"whole server through PXN)")
    return s, ells.pop()


def instance_cluster(cluster: Cluster) -> tuple[Cluster, Fraction]:
    """The q-node cluster the instances run on (one node per server, the straggler server's ℓ)."""
    s, ell = straggler_server(cluster)
    q = cluster.servers
    return Cluster.build(q, 1, {s: ell} if ell != 1 else None), ell


def server_slowdowns(cluster: Cluster) -> list[Fraction]:
    """ℓ of every server (its GPUs' common ℓ), any number of straggler servers.

    Raises OptccError ("stragglers") where a server's GPUs mix slowdowns: instance l runs on
    local index l of every server, so one ℓ per server is what makes the q-node instance exact."""
    g = cluster.g
    out = []
    for s in range(cluster.servers):
        ells = set(cluster.slowdown[s * g:(s + 1) * g])
        if len(ells) != 1:
            raise OptccError("stragglers", f"server {s} mixes slowdowns {sorted(map(str, ells))}; the server "
                                           f"lift needs all {g} GPUs of a server at one ℓ")
        out.append(ells.pop())
    return out


def node_cluster(cluster: Cluster) -> Cluster:
    """The q-node, one-GPU-per-node cluster of the instances: node s at server s's ℓ."""
    ells = server_slowdowns(cluster)
    return Cluster.build(cluster.servers, 1, {s: e for s, e in enumerate(ells) if e != 1} or None)
