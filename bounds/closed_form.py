"""Closed-form lower bounds, evaluated exactly. All results are in units of n/B.

These are the evaluations of the sympy expressions in `bounds.symbolic` (tests/bounds/test_bounds.py
checks symbolically that each function here, called with sympy symbols, equals the sympy
bound). They take numbers and return exact Fractions without importing sympy, so single points
stay fast. Sources (see shared/PAPER.md "Lower bounds"):
- T0 = 2(p−1)/p (g = 1), 2(p−g)/(g·p) (g GPUs per server): paper, Theorem 3's T0.
- Theorem 1 (paper): T ≥ max{2ℓ(p−1)/(ℓ(p−1)+1), ℓ}.
- Theorem 3 (paper): T ≥ max{2ℓ(p−g)/(g(ℓ(p−g)+g)), ℓ/g}, one straggler server.
- Several stragglers, g = 1 (derived, bounds/symbolic.py): T ≥ max{ℓ1, 2(p−1)/(p−m+Σ1/ℓi)}.
- Any stragglers, g per server (derived, bounds/symbolic.py servers_cut/servers_volume):
  T ≥ max{1/min_j b_j, 2(q−1)/Σ_j b_j}, b_j = Σ_{k on server j} 1/ℓ_k, q = p/g servers.
- Exclusive rule (one flow per NIC direction), one straggler, g = 1 (derived, in
  `exclusive_single_straggler_optimum`): T ≥ max{ℓ, 2ℓ(p−1)/(ℓ(p−2)+2)}.
"""
from __future__ import annotations

from fractions import Fraction
from typing import NamedTuple

from optcc.cluster import Cluster
from optcc.errors import OptccError


def _num(x):
    """Exact Fraction for numbers; sympy objects pass through (so tests can check symbolically)."""
    return x if hasattr(x, "free_symbols") else Fraction(x)


def _max(*xs):
    if any(hasattr(x, "free_symbols") for x in xs):
        import sympy
        return sympy.Max(*xs)
    return max(xs)


class Terms(NamedTuple):
    """The two ingredients of a bound (units of n/B); the bound is their maximum."""

    cut: Fraction
    volume: Fraction

    @property
    def bound(self) -> Fraction:
        return _max(self.cut, self.volume)

    @property
    def binding(self) -> str:
        """"cut" or "volume": the larger term (ties, as at the crossing point ℓ*, say "cut")."""
        return "cut" if self.cut >= self.volume else "volume"


def fault_free_optimum(cluster: Cluster | int, g: int = 1) -> Fraction:
    """T0 (paper): the fault-free optimum, 2(p−g)/(g·p); with g = 1 NCCL's ring 2(p−1)/p.

    Takes a Cluster, as `lower_bound` does (its p and g; its stragglers do not matter), or p and g."""
    if isinstance(cluster, Cluster):
        if g != 1:
            raise OptccError("g", "give a Cluster (which has its own g) or p and g, not both")
        cluster, g = cluster.p, cluster.g
    p = cluster
    return _num(2 * (p - g)) / (g * p)


def single_straggler_terms(p: int, ell) -> Terms:
    """Theorem 1's terms (paper): cut ℓ, volume 2ℓ(p−1)/(ℓ(p−1)+1)."""
    ell = _num(ell)
    return Terms(ell, 2 * ell * (p - 1) / (ell * (p - 1) + 1))


def lower_bound_single_straggler(p: int, ell) -> Fraction:
    """Theorem 1 (paper): max{2ℓ(p−1)/(ℓ(p−1)+1), ℓ} for one straggler, g = 1."""
    return single_straggler_terms(p, ell).bound


def straggler_server_terms(p: int, g: int, ell) -> Terms:
    """Theorem 3's terms (paper): cut ℓ/g, volume 2ℓ(p−g)/(g(ℓ(p−g)+g))."""
    ell = _num(ell)
    return Terms(ell / g, 2 * ell * (p - g) / (g * (ell * (p - g) + g)))


def lower_bound_straggler_server(p: int, g: int, ell) -> Fraction:
    """Theorem 3 (paper): max{2ℓ(p−g)/(g(ℓ(p−g)+g)), ℓ/g}, one straggler server of g GPUs."""
    return straggler_server_terms(p, g, ell).bound


def multi_straggler_terms(p: int, ells) -> Terms:
    """Derived terms for m stragglers, g = 1: cut max ℓi, volume 2(p−1)/(p−m+Σ1/ℓi)."""
    ells = [_num(x) for x in ells]
    volume = _num(2 * (p - 1)) / (p - len(ells) + sum((1 / x for x in ells), _num(0)))
    return Terms(_max(*ells) if ells else _num(1), volume)


def lower_bound_multi_straggler(p: int, ells) -> Fraction:
    """Derived: max{ℓ1, 2(p−1)/(p − m + Σ 1/ℓi)} for m stragglers, g = 1 (cut and volume)."""
    return multi_straggler_terms(p, ells).bound


def server_terms(slowdowns_by_server) -> Terms:
    """Derived terms for any stragglers, g per server: one list of ℓ_k per server (q ≥ 2 lists).

    b_j = Σ_k 1/ℓ_k is server j's NIC capacity in units of B; cut 1/min b_j, volume
    2(q−1)/Σ b_j. One server (q = 1) needs no NIC traffic: both terms are 0.
    """
    caps = [sum((1 / _num(x) for x in server), _num(0)) for server in slowdowns_by_server]
    q = len(caps)
    if q < 2:
        return Terms(_num(0), _num(0))
    return Terms(_max(*[1 / b for b in caps]), _num(2 * (q - 1)) / sum(caps, _num(0)))


def exclusive_single_straggler_optimum(p: int, ell) -> Fraction:
    """Derived: the best time with one flow per NIC direction (the paper's exclusive rule), fluid
    data, one straggler, g = 1: max(ℓ, 2ℓ(p−1)/(ℓ(p−2)+2)). A lower bound for every schedule in
    that model, reached by lp_models.fluid's exclusive LP and, as k → ∞, by OptCC.

    Let u = bytes per byte of data that the straggler receives (and sends); u ≥ 1 (cut). Any
    AllReduce moves ≥ 2(p−1)·n bytes (volume argument of Theorem 1). A straggler flow occupies
    the healthy end for ℓ per byte too, so the p−1 healthy send ports need 2(p−1) − (2−ℓ)u in
    total, the straggler ℓu. Balancing gives u* = 2(p−1)/(ℓ(p−2)+2), T = ℓu*; for ℓ ≥ 2, u = 1
    and T = ℓ.
    """
    ell = _num(ell)
    return _max(ell, 2 * ell * (p - 1) / (ell * (p - 2) + 2))


def pooling_nvlink_time(cluster: Cluster) -> Fraction:
    """Derived (docs/failures.md "NVLink limit"): the NVLink time a server needs to pool its NICs
    by reduce-scatter/all-gather with NIC traffic in proportion to NIC bandwidth.

    GPU i of server j then carries the share w_i = (1/ℓ_i)/b_j of the data on its NIC, so its
    NVLink receive port takes (g−1)·w_i in the reduce-scatter (the others' parts of its share)
    and 1 − w_i in the all-gather: T ≥ max_{j,i} (1 + (g−2)·w_i)/s_nv. Equal ℓ inside a server
    gives 2(g−1)/(g·s_nv), the server LP's NVLink row. Not a bound on every algorithm: a
    condition of this way of pooling. 0 for g = 1.
    """
    g = cluster.g
    if g == 1:
        return Fraction(0)
    worst = Fraction(0)
    for j in range(cluster.servers):
        ells = cluster.slowdown[j * g:(j + 1) * g]
        b = sum(1 / x for x in ells)
        worst = max(worst, (1 / min(ells)) / b)
    return (1 + (g - 2) * worst) / cluster.nvlink_speedup


def cluster_terms(cluster: Cluster) -> Terms:
    """Cut and volume terms of the best bound we know for this cluster.

    g = 1: the multi-straggler terms (Theorem 1 for one straggler; volume = T0 when none).
    g > 1: the server-aggregate terms, for any set of slowed GPUs. They equal Theorem 3's terms
    when the stragglers are all g GPUs of one server with one ℓ (the paper's setting), and T0's
    when nothing is slow.
    """
    if cluster.g == 1:
        return multi_straggler_terms(cluster.p, cluster.stragglers.values())
    g = cluster.g
    return server_terms([cluster.slowdown[j * g:(j + 1) * g] for j in range(cluster.servers)])


def lower_bound(cluster: Cluster) -> Fraction:
    """The best lower bound we know for this cluster, in units of n/B (see `cluster_terms`)."""
    return cluster_terms(cluster).bound


def describe_case(cluster: Cluster) -> str:
    """Which formula `lower_bound` evaluates for this cluster, with its label."""
    stragglers = cluster.stragglers
    if cluster.g == 1:
        if not stragglers:
            return "T0 (paper): no straggler"
        if len(stragglers) == 1:
            return "Theorem 1 (paper): one straggler"
        return f"multi-straggler bound (derived): {len(stragglers)} stragglers"
    if cluster.servers < 2:
        return "one server: no NIC traffic is needed, the NIC bound is 0"
    if not stragglers:
        return "T0 (paper): no straggler"
    if is_straggler_server(cluster):
        return "Theorem 3 (paper): one straggler server, all its GPUs at one ℓ"
    return "server-aggregate bound (derived): stragglers other than one whole server at one ℓ"


def is_straggler_server(cluster: Cluster) -> bool:
    """True when the stragglers are exactly all g GPUs of one server, all with the same ℓ."""
    stragglers = cluster.stragglers
    servers = {cluster.server_of(r) for r in stragglers}
    return (len(servers) == 1 and len(stragglers) == cluster.g
            and len(set(stragglers.values())) == 1)
