"""ForestColl's cut formula for allgather/reduce-scatter on a switch topology, exact, units of n/B.

Formula (paper (ForestColl, Zhao et al., arXiv 2402.06787), as stated in the README of the
authors' repository liangyuRain/ForestColl; the paper itself was read only to its abstract): on
a directed graph with compute nodes V_c and switch nodes, link capacities B(u, v), the optimal
allgather (and reduce-scatter) time for M bytes in all is

    (M/N) · max over S ⊂ V with S ∩ V_c ≠ ∅ and V_c ⊄ S of |S ∩ V_c| / B⁺(S),

N = |V_c|, B⁺(S) the capacity of the links leaving S (every compute node of S must get its
shard out of S). Here M = n and capacities are in units of B, so the time is in units of n/B.

Mapping from a per-NIC cluster (derived; `cluster_topology`): GPU i ↔ one network switch at
1/ℓ_i each way (its NIC into a non-blocking fabric) and, for g > 1, GPU ↔ its server's NVLink
switch at s_nv each way. Relation to AllReduce (derived): an AllReduce also solves
reduce-scatter (each GPU ends with the whole sum, so with its shard), so this time is a lower
bound on AllReduce in both models; tests/bounds/test_bounds_literature.py compares it with
Theorem 1 and the server-aggregate bound.
"""
from __future__ import annotations

import itertools
from collections.abc import Hashable, Mapping, Sequence
from fractions import Fraction

from optcc.cluster import Cluster
from optcc.errors import OptccError

MAX_NODES = 20  # the formula enumerates all 2^|V| subsets
NETWORK = "network-switch"

Edge = tuple[Hashable, Hashable]


def forestcoll_allgather_time(capacity: Mapping[Edge, Fraction], compute: Sequence[Hashable]) -> Fraction:
    """(n/N)·max_S |S∩V_c|/B⁺(S), n/B (paper, ForestColl; module docstring)."""
    nodes = sorted({u for edge in capacity for u in edge} | set(compute), key=repr)
    comp = set(compute)
    if len(comp) < 2:
        raise OptccError("compute", f"needs at least 2 compute nodes, got {len(comp)}")
    if len(nodes) > MAX_NODES:
        raise OptccError("capacity", f"at most {MAX_NODES} nodes, got {len(nodes)}")
    if any(Fraction(c) < 0 for c in capacity.values()):
        raise OptccError("capacity", "link capacities must be ≥ 0")
    worst = Fraction(0)
    for r in range(1, len(nodes)):
        for side in itertools.combinations(nodes, r):
            s = set(side)
            inside = len(s & comp)
            if inside == 0 or comp <= s:
                continue
            out = sum((Fraction(c) for (u, v), c in capacity.items() if u in s and v not in s), Fraction(0))
            if out == 0:
                raise OptccError("capacity", f"no link leaves {sorted(s, key=repr)}: no allgather can finish")
            worst = max(worst, Fraction(inside) / out)
    return worst / len(comp)


def cluster_topology(cluster: Cluster) -> tuple[dict[Edge, Fraction], list[Hashable]]:
    """The per-NIC cluster as a ForestColl graph: GPUs, one network switch, NVLink switches."""
    cap: dict[Edge, Fraction] = {}
    for i, ell in enumerate(cluster.slowdown):
        cap[i, NETWORK] = cap[NETWORK, i] = 1 / Fraction(ell)
        if cluster.g > 1:
            nv = ("nvlink-switch", cluster.server_of(i))
            cap[i, nv] = cap[nv, i] = Fraction(cluster.nvlink_speedup)
    return cap, list(range(cluster.p))
