"""The cut-set bound for AllReduce under the per-NIC model (derived), in units of n/B, exact.

Model. GPU i sends and receives at most B/ℓ_i over its NIC into a non-blocking fabric; with
g > 1 it also sends and receives at most s_nv·B over NVLink to its server-mates (s_nv =
Cluster.nvlink_speedup, the per-GPU NVLink capacity optcc's timing uses). No other link exists.

Cut argument. Take any partition (S, S̄) of the GPUs, both sides nonempty. Every GPU of S̄ must
end with Σ_i x_i while it knows only the inputs of S̄, so the n values Σ_{i∈S} x_i must cross
from S to S̄: at least n bytes (real-valued data, no compression), and n bytes from S̄ to S by
the same argument. Those bytes leave through the sending GPUs' ports, at most
out(S) = Σ_{i∈S} (1/ℓ_i + s_nv·[i has a server-mate in S̄]) (units of B) per unit time, and
arrive through S̄'s receive ports, at most the same form out(S̄) with S and S̄ swapped (send and
receive capacities are equal per GPU). So T ≥ n/(B·out(S)) for every proper nonempty S, and the
bound is 1/min_S out(S). A cut needs n bytes, not |S|·n/p: S may reduce internally first.

The minimum over the 2^p cuts (derived). out is a sum of positive per-GPU terms. If S holds a
whole server s (q ≥ 2, so s alone is a proper cut), its GPUs contribute b_s = Σ_{i∈s} 1/ℓ_i
(their mates are all in S), so out(S) ≥ out(s) = b_s. Otherwise every i in S has a mate in S̄
and out(S) ≥ 1/ℓ_i + s_nv = out({i}). Hence

    min_S out(S) = min( min_s b_s  [q ≥ 2],  min_i (1/ℓ_i + s_nv)  [g ≥ 2] ),

and with g = 1 the bound is ℓ_max. Relation to bounds.closed_form (tested in
tests/bounds/test_bounds_cut_set.py): its cut term 1/min_s b_s is the server cut; the cut-set bound is
the larger of that and the single-GPU NVLink cut 1/min_i(1/ℓ_i + s_nv), which exceeds it only when
NVLink is slower than min_s b_s − 1/ℓ_i (NVLink-poor clusters, outside the paper's model). What
Theorem 1/3 add over any cut bound is the volume term (total NIC capacity against 2(q−1)·n
bytes); it binds below ℓ* = 2 − 1/(p−1) (one straggler, g = 1), where the cut-set bound is
strictly below Theorem 1.
"""
from __future__ import annotations

from fractions import Fraction

from optcc.cluster import Cluster


def cut_capacity(cluster: Cluster, side) -> Fraction:
    """out(S) in units of B: what the GPUs of `side` can send across the cut (module docstring)."""
    side = set(side)
    g, s_nv = cluster.g, Fraction(cluster.nvlink_speedup) if cluster.g > 1 else Fraction(0)
    total = Fraction(0)
    for i in side:
        mates = range(cluster.server_of(i) * g, (cluster.server_of(i) + 1) * g)
        across = any(j not in side for j in mates)
        total += 1 / Fraction(cluster.slowdown[i]) + (s_nv if across else 0)
    return total


def cut_set_bound(cluster: Cluster) -> Fraction:
    """1/min over cuts of out(S), n/B (derived; the closed-form minimum of the module docstring)."""
    g = cluster.g
    ells = [Fraction(x) for x in cluster.slowdown]
    caps = []
    if cluster.servers >= 2:
        caps.append(min(sum(1 / x for x in ells[s * g:(s + 1) * g]) for s in range(cluster.servers)))
    if g >= 2:
        caps.append(min(1 / x for x in ells) + Fraction(cluster.nvlink_speedup))
    return 1 / min(caps)
