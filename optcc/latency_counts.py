"""Latency counts A, B and knees of the ring and the OptCC constructions (all derived), the
`Latency` records of optcc.algorithms.registry read them; optcc.model_time combines them:

    T(k) ≤ slot(k) + A(k)·o + B(k)·(Li + L)        (units of n/B; o, Li, L from the cluster)

A counts the overheads o and B the latencies Li + L on the critical path. Li and L enter only
as their sum: a chain of m flows pays Li before each start and L after each landing
(docs/latency.md, "Counts"). docs/latency.md has the arguments:
- ring (g = 1, k segments in turn) and the flat ring (g > 1): 2(p−1)·k synchronous steps. A
  chain takes at most one flow per step, and stretching every step by o + Li + L keeps every
  dependency, so A = B = 2(p−1)k is an upper bound for every o, Li, L (no knee); for the
  fault-free ring at k = 1 it is exact (one shard's 2(p−1) zero-slack hops form a chain).
- OptCC, one straggler (optcc_single): A = 2(p−1)(k+1) (the α count of issue 7), B = 2(p−1) + 4k:
  the prologue and epilogue rings (2(H−1) zero-slack hops) plus ≈ 3 zero-slack edges per
  segment (last reduce-scatter hop → upload → download → first all-gather hop).
- OptCC, m ≥ 2 stragglers (optcc_multi): with Li + L > 0 it builds the latency-robust pattern
  (hop spread 3, optcc_multi.hop_spread): A = 2(p−1)(k+2) + (p−m) − 1 (one period more than
  spread 1's), B = (p−1) + 2k: every ring hop has 2 slots of slack, so what remains is about one
  zero-slack ring (H − 1 hops) plus the ℓ < 2 relay fill's chain (up to ≈ 1.7k at ℓ = (8/7, 8/7));
  measured ≤ B up to Li + L = 2/(kp) for p ≤ 24, k ≤ 64 (docs/optcc_multi.md "Latency"). With
  Li = L = 0 it builds spread 1 (issue 8): A = 2(p−1)(k+1) + (p−m) − 1; B does not matter there
  (its slope was about (p−1)k/2: a delay wave across the links, the reason for spread 3).
- OptCC, straggler server (optcc_servers): A as paper_checks had it (max of the NIC instance's
  and the NVLink chain's count plus 4(g−1)), B = 2(q−1) + 4k + 2g.
- optcc_rails and all_slow: optcc.algorithms.rails.counts, and the reduced cluster's construction
  (optcc.algorithms.all_slow.build scales time by ℓ_min, so a chain has the same flows).
The knee: B is an upper bound on the event model's slope only for Li + L ≤ KNEE/(k·p), a
fraction of the smallest shard's transfer time 1/(k·p), tested in tests/optcc/test_model_time.py
(p ≤ 64): 3/4 for one straggler and the straggler server (the single-straggler slope stays
2(p−1) + 3(k−1) up to 7/8 and jumps at 1, measured to p = 128); 1 for m ≥ 2 stragglers with
spread 3, whose hops have 2 slots of slack; 1/2 for spread 1, whose count exceeds its B past
3/4 at p = 20. A is tested for o up to 0.1 n/B (as in issue 7).
"""
from __future__ import annotations

from fractions import Fraction

from optcc.cluster import Cluster


def _pipelined(cluster: Cluster) -> bool:
    """Li + L > 0: optcc_multi builds its latency-robust pattern (hop spread 3)."""
    return cluster.issue_delay + cluster.latency > 0


# ---- the ring (g = 1) and the flat ring (g > 1) --------------------------------------------
def ring_overheads(cluster: Cluster, k: int) -> int:
    """A = 2(p−1)·k steps (g = 1, k segments in turn), 2(p−1) for the flat ring (g > 1)."""
    return 2 * (cluster.p - 1) * (k if cluster.g == 1 else 1)


def ring_latencies(cluster: Cluster, k: int) -> Fraction:
    """B = A: the same synchronous-step argument, for every o, Li, L."""
    return Fraction(ring_overheads(cluster, k))


# ---- optcc_single ----------------------------------------------------------------------------
SINGLE_KNEE = Fraction(3, 4)


def single_pieces(q: int, ell: Fraction, k: int) -> int:
    """Pieces of optcc_single on q nodes: k·H shards plus k − 1 point-to-point pieces when
    ℓ < 2 (H = q − 1 ≥ 2); one piece at q = 2 (optcc_single.optcc_allreduce, its pieces line)."""
    h = q - 1
    if h == 1:
        return 1
    return k * h + (k - 1 if Fraction(ell) < 2 else 0)


def single_overheads(cluster: Cluster, k: int) -> int:
    """A = 2(p−1)(k+1). A healthy NIC carries about 2(p−1)·k shard flows (k segments, ring hops
    of stages 1 and 4 plus its upload/download share), each holding a busy port o longer.
    Measured: event_time ≤ slot + A·o for ℓ ∈ {8/7, 4/3, 3/2, 2, 3}, p ≤ 12, k ≤ 16, o up to
    0.1 n/B, with equality for ℓ < 2, k ≥ 3."""
    return 2 * (cluster.p - 1) * (k + 1)


def single_latencies(cluster: Cluster, k: int) -> Fraction:
    """B = 2(p−1) + 4k (module docstring)."""
    return Fraction(2 * (cluster.p - 1) + 4 * k)


# ---- optcc_multi -----------------------------------------------------------------------------
def multi_overheads(cluster: Cluster, k: int) -> int:
    """A = L(k+1) + H − 1 = 2(p−1)(k+1) + (p−m) − 1 with period L = 2(H + m − 1) slots, one flow
    per port direction per slot: the drain's last hop starts by slot L(k+1) − 1 and the last F
    to a straggler by L(k+1) (optcc_multi_drain.drain_last_slot, Pattern.f_slot); a chain of
    dependent flows starts in strictly later slots, so it has at most L(k+1) + 1 flows. The
    count kept is the old synchronous epilogue's (H − 2 slots of slack). Fill flows start inside
    windows, so this is tested, not proved (slopes 6–159 against counts 13–169, p ≤ 10, k ≤ 8).
    With Li + L > 0 (hop spread 3) the last flows are one period later: L(k+2) + H − 1, tested
    the same way (tests/optcc/test_model_time.py)."""
    p = cluster.p
    periods = k + 2 if _pipelined(cluster) else k + 1        # hop spread 3 | 1
    return 2 * (p - 1) * periods + (p - len(cluster.stragglers)) - 1


def multi_latencies(cluster: Cluster, k: int) -> Fraction:
    """B = (p−1) + 2k with hop spread 3; spread 1 (only built at Li = L = 0) keeps its old count."""
    p = cluster.p
    if _pipelined(cluster):
        return Fraction(p - 1 + 2 * k)
    return 2 * (p - 1) + Fraction((p - 1) * (k + 1), 2) + 4 * k


def multi_knee(cluster: Cluster) -> Fraction:
    """1 with hop spread 3; 1/2 (issue 13's, for the old count) with spread 1."""
    return Fraction(1) if _pipelined(cluster) else Fraction(1, 2)


# ---- optcc_servers ---------------------------------------------------------------------------
SERVERS_KNEE = Fraction(3, 4)


def servers_overheads(cluster: Cluster, k: int) -> int:
    """A = max(2(q−1)(k+1), 2(g−1)·P) + 4(g−1): the NIC instance on q nodes, or the NVLink
    reduce-scatter block and all-gather queue (P batches of g − 1 rounds on one NVLink port;
    P = instance pieces, k at q = 2), plus lead (2 batches), tail (1) and one switch. Tested ≥
    event_time − slot_time over o on generated schedules, not proved."""
    g = cluster.g
    q = cluster.p // g
    ell = max(cluster.slowdown)
    nic = 2 * (q - 1) * (k + 1)
    pieces = k if q == 2 else single_pieces(q, ell, k)   # q = 2: k segments swapped in turn
    return max(nic, 2 * (g - 1) * pieces) + 4 * (g - 1)


def servers_latencies(cluster: Cluster, k: int) -> Fraction:
    """B = 2(q−1) + 4k + 2g."""
    q = cluster.p // cluster.g
    return Fraction(2 * (q - 1) + 4 * k + 2 * cluster.g)
