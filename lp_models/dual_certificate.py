"""An exact dual of the shared fluid LP for one cluster: a lower bound on every schedule's time
that a reader checks with arithmetic alone.

The LP (lp_models.fluid, shared ports, one row per node; the NVLink row left out, as in
lp_models.schedule_point): nodes v (GPUs, or servers with P = g NICs pooled at the harmonic-mean
slowdown ℓ_v), root shares x_v ≥ 0 with Σ_v x_v = 1, and per node the port load

    L_v(x) = ℓ_v·(1 + (n − 2)·x_v) ≤ P·T,

(row v of lp_models.schedule_point.exact_load_matrix: ℓ_v on every other root, (n − 1)·ℓ_v on its
own). The certificate is (π_v ≥ 0 per node, μ) with

    (D1) P·Σ_v π_v ≤ 1,   (D2) Σ_u π_u·A[u][v] ≥ μ for every node v,

where the column sum of (D2) is S + (n − 2)·ℓ_v·π_v, S = Σ_u π_u·ℓ_u. Weak duality, by hand:
for any feasible (x, T), μ = μ·Σ_v x_v ≤ Σ_v x_v·Σ_u π_u·A[u][v] = Σ_u π_u·L_u(x) ≤
Σ_u π_u·P·T ≤ T. So every schedule whose flows induce a feasible point (every correct AllReduce
in the model: docs/bounds.md "Why every correct AllReduce satisfies the LP") takes T ≥ μ.

Found (derived): nodes with one ℓ are interchangeable, so the dual is searched on the
class-reduced LP (lp_models.fluid.node_classes, exact_load_matrix of lp_models.fluid_exact: row c
is one member's load, A[c][d] summed over class d's n_d members), whose dual is
max μ s.t. π_c ≥ 0, P·Σ_c π_c ≤ 1, Σ_c π_c·A[c][d] ≥ μ·n_d, by exact enumeration of its vertices
(lp_models.fluid_exact.best_vertex, as the primal: m + 1 unknowns; the feasible set is pointed, μ is bounded above), and
spread over the members (π_v = π_c/n_c). What is checked is the per-node certificate (D1, D2),
in Fractions, O(n).
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from lp_models.fluid import node_classes
from lp_models.fluid_exact import MAX_CLASSES, best_vertex, exact_load_matrix
from optcc.cluster import Cluster
from optcc.errors import OptccError


@dataclass(frozen=True)
class DualCertificate:
    """π per node class (π_v = pi[c]/count[c] for each of its members), μ, the nodes' ports."""

    level: str                      # "gpu" or "server"
    ports: int
    classes: list[tuple[str, int, Fraction]]     # (name, members, ℓ)
    pi: list[Fraction]              # per class, summed over its members
    mu: Fraction

    def node_duals(self) -> list[tuple[Fraction, Fraction, int]]:
        """(ℓ_v, π_v, members) per class: every member of a class has the same π_v."""
        return [(ell, p / count, count) for (_, count, ell), p in zip(self.classes, self.pi)]

    def problems(self) -> list[str]:
        """Every way (D1) or (D2) fails, checked per node in exact arithmetic; [] means T ≥ μ holds
        for every schedule of the model on this cluster."""
        nodes = self.node_duals()
        n = sum(count for _, _, count in nodes)
        out = []
        for ell, p, _ in nodes:
            if p < 0:
                out.append(f"π = {p} < 0 on a node with ℓ = {ell}")
        total = sum((p * count for _, p, count in nodes), Fraction(0))
        if self.ports * total > 1:
            out.append(f"(D1) P·Σπ = {self.ports * total} > 1")
        s = sum((ell * p * count for ell, p, count in nodes), Fraction(0))
        for ell, p, _ in nodes:
            column = s + (n - 2) * ell * p
            if column < self.mu:
                out.append(f"(D2) the column of a node with ℓ = {ell} sums to {column} < μ = {self.mu}")
        return out

    def to_json(self) -> dict[str, Any]:
        return {"mu": str(self.mu), "ports": self.ports, "level": self.level,
                "classes": [{"nodes": name, "count": count, "ell": str(ell), "pi_per_node": str(p / count)}
                            for (name, count, ell), p in zip(self.classes, self.pi)],
                "checks": "P·Σπ ≤ 1 and, for every node v, S + (n−2)·ℓ_v·π_v ≥ μ with S = Σ_u π_u·ℓ_u: "
                          "then μ ≤ T for every feasible (x, T) of the shared fluid LP"}


def lp_dual(cluster: Cluster) -> DualCertificate:
    """The shared fluid LP's optimal dual for `cluster`, exact (module docstring). Raises OptccError
    (field "cluster") beyond MAX_CLASSES distinct node slowdowns."""
    level, classes = node_classes(cluster)
    m = len(classes)
    if m > MAX_CLASSES:
        raise OptccError("cluster", f"{m} distinct node slowdowns: the exact dual is searched up to {MAX_CLASSES}")
    ports = classes[0].ports
    a = exact_load_matrix(classes, "shared")
    counts = [c.count for c in classes]
    # Constraints over y = (π_1..π_m, μ), written as rows·y ≤ h
    le: list[tuple[list[Fraction], Fraction]] = []
    for c in range(m):
        le.append(([-Fraction(int(i == c)) for i in range(m)] + [Fraction(0)], Fraction(0)))          # π_c ≥ 0
    le.append(([Fraction(ports)] * m + [Fraction(0)], Fraction(1)))                                    # P·Σπ ≤ 1
    for d in range(m):
        le.append(([-Fraction(a[c][d]) for c in range(m)] + [Fraction(counts[d])], Fraction(0)))       # column d ≥ μ·n_d
    best = best_vertex(le, [], m + 1, lambda v, b: v[m] > b[m])
    if best is None:                                  # cannot happen: π = 0, μ = 0 is feasible and a vertex
        raise OptccError("cluster", "no dual vertex found")
    return DualCertificate(level, ports, [(c.name, c.count, Fraction(c.ell)) for c in classes], best[:m], best[m])
