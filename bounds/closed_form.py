"""Closed-form lower bounds, evaluated exactly. All results are in units of n/B.

Sources (see ../shared/PAPER.md):
- T0 = 2(p−1)/p (g = 1), 2(p−g)/(g·p) (g GPUs per server): paper, Section 3 / Theorem 3's T0.
- Theorem 1 (paper): T ≥ max{2ℓ(p−1)/(ℓ(p−1)+1), ℓ}.
- Theorem 3 (paper): T ≥ max{2ℓ(p−g)/(g(ℓ(p−g)+g)), ℓ/g}, one straggler server.
- Several stragglers, g = 1 (derived, bounds/ derivation): T ≥ max{ℓ1, 2(p−1)/(p−m+Σ1/ℓi)}.
"""
from __future__ import annotations

from fractions import Fraction

from optcc.cluster import Cluster
from optcc.errors import OptccError


def fault_free_optimum(p: int, g: int = 1) -> Fraction:
    """T0 (paper): the fault-free optimum, 2(p−g)/(g·p); with g = 1 NCCL's ring 2(p−1)/p."""
    return Fraction(2 * (p - g), g * p)


def lower_bound_single_straggler(p: int, ell) -> Fraction:
    """Theorem 1 (paper): max{2ℓ(p−1)/(ℓ(p−1)+1), ℓ} for one straggler, g = 1."""
    ell = Fraction(ell)
    return max(2 * ell * (p - 1) / (ell * (p - 1) + 1), ell)


def lower_bound_straggler_server(p: int, g: int, ell) -> Fraction:
    """Theorem 3 (paper): max{2ℓ(p−g)/(g(ℓ(p−g)+g)), ℓ/g}, one straggler server of g GPUs."""
    ell = Fraction(ell)
    return max(2 * ell * (p - g) / (g * (ell * (p - g) + g)), ell / g)


def lower_bound_multi_straggler(p: int, ells) -> Fraction:
    """Derived: max{ℓ1, 2(p−1)/(p − m + Σ 1/ℓi)} for m stragglers, g = 1 (cut and volume)."""
    ells = [Fraction(x) for x in ells]
    m = len(ells)
    volume = Fraction(2 * (p - 1)) / (p - m + sum((1 / x for x in ells), Fraction(0)))
    return max([volume] + ells)


def lower_bound(cluster: Cluster) -> Fraction:
    """The best lower bound we know for this cluster, in units of n/B.

    g = 1: the multi-straggler bound (equal to Theorem 1 for one straggler, T0 for none).
    g > 1: Theorem 3 when every slowed GPU sits on one server with a common ℓ (the paper's
    setting: a server that lost NICs slows all its GPUs); T0 when nothing is slow.
    """
    stragglers = cluster.stragglers
    if cluster.g == 1:
        return lower_bound_multi_straggler(cluster.p, stragglers.values())
    if not stragglers:
        return fault_free_optimum(cluster.p, cluster.g)
    servers = {cluster.server_of(r) for r in stragglers}
    ells = set(stragglers.values())
    if len(servers) == 1 and len(ells) == 1:
        return lower_bound_straggler_server(cluster.p, cluster.g, ells.pop())
    raise OptccError("stragglers", "no lower bound is known for stragglers on several servers (or "
                                   "unequal ℓ within one server) with g > 1")
