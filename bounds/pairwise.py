"""The cut-set bound on a network of pairwise links (Zhou & Sun's model), exact, units of n/B.

Their model (Zhou & Sun, "On the Computation Rate of All-Reduce", arXiv 2602.22482; read: the
abstract and the opening of §1 only, their theorem statements were not available to us): K nodes,
each ordered pair (i, j) joined by a link of bandwidth β_ij; the computation rate R is the number
of sum instances computed per network use; they give a cut-set upper bound on R and a lower bound
from time sharing over Reduce-then-Broadcast schemes. What is implemented here is the plain
cut-set argument on that model (derived), not a transcription of their theorem:

    for every proper nonempty S, the n values Σ_{i∈S} x_i must cross from S to S̄ (S̄ knows
    only its own inputs), over the links i∈S → j∉S, so T ≥ n / (B·c(S)), c(S) = Σ β_ij;
    T ≥ 1 / min_S c(S) in units of n/B (β in units of B), i.e. R ≤ min_S c(S).

The argument is information-theoretic (coded messages allowed), like the cut term ℓ of
Theorem 1; the volume term of Theorem 1 assumes element-wise messages (docs/bounds.md).

Mapping from a per-NIC cluster (derived). A link matrix β *fits* a cluster (g = 1) when every
node's out-links sum to at most 1/ℓ_i and its in-links to at most 1/ℓ_i: then every schedule on
the links is a schedule on the per-NIC cluster, so Theorem 1 (bounds.closed_form.lower_bound;
its volume term for element-wise messages) bounds the link network too: both bounds hold for it. `per_nic_links` is one such β (each
NIC split evenly over its p−1 peers); tests/bounds/test_bounds_literature.py compares them.
"""
from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from fractions import Fraction

from optcc.cluster import Cluster
from optcc.errors import OptccError

MAX_NODES = 16  # the bound enumerates all 2^K cuts


def _links(beta: Sequence[Sequence[Fraction]]) -> list[list[Fraction]]:
    k = len(beta)
    if not 2 <= k <= MAX_NODES:
        raise OptccError("beta", f"needs 2 to {MAX_NODES} nodes, got {k}")
    rows = [[Fraction(x) for x in row] for row in beta]
    for i, row in enumerate(rows):
        if len(row) != k:
            raise OptccError(f"beta[{i}]", f"needs {k} entries, got {len(row)}")
        if any(x < 0 for x in row):
            raise OptccError(f"beta[{i}]", "link bandwidths must be ≥ 0")
    return rows


def cut_links(beta: Sequence[Sequence[Fraction]], side: Iterable[int]) -> Fraction:
    """c(S) = Σ_{i∈S, j∉S} β_ij: what S can send to the rest per unit time (units of B)."""
    rows, inside = _links(beta), set(side)
    return sum((rows[i][j] for i in inside for j in range(len(rows)) if j not in inside), Fraction(0))


def pairwise_cut_set_bound(beta: Sequence[Sequence[Fraction]]) -> Fraction:
    """1 / min over proper nonempty S of c(S), n/B (derived; module docstring)."""
    rows = _links(beta)
    k = len(rows)
    caps = [cut_links(rows, side) for r in range(1, k) for side in itertools.combinations(range(k), r)]
    if min(caps) == 0:
        raise OptccError("beta", "some cut has no link across it: no AllReduce can finish")
    return 1 / min(caps)


def fits_per_nic(cluster: Cluster, beta: Sequence[Sequence[Fraction]]) -> bool:
    """Whether every node's out- and in-links sum to at most its NIC, 1/ℓ_i (g = 1)."""
    rows = _links(beta)
    if cluster.g != 1 or len(rows) != cluster.p:
        raise OptccError("cluster", "needs g = 1 and one node per GPU")
    nic = [1 / Fraction(x) for x in cluster.slowdown]
    return all(sum(rows[i]) <= nic[i] and sum(r[i] for r in rows) <= nic[i] for i in range(cluster.p))


def per_nic_links(cluster: Cluster) -> list[list[Fraction]]:
    """β_ij = min(1/ℓ_i, 1/ℓ_j)/(p−1): each NIC split evenly over its peers; fits the cluster."""
    if cluster.g != 1:
        raise OptccError("cluster.g", "the pairwise mapping is for one GPU per server")
    p, nic = cluster.p, [1 / Fraction(x) for x in cluster.slowdown]
    return [[min(nic[i], nic[j]) / (p - 1) if i != j else Fraction(0) for j in range(p)]
            for i in range(p)]
