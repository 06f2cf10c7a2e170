"""Model time of a construction from closed forms, so that p = 1024 needs no event simulation.

    T(k) ≤ slot(k) + A(k)·o + B(k)·(Li + L)        (units of n/B; o, Li, L from the cluster)

slot(k) is the construction's closed-form slot time (optcc.algorithms); A counts the overheads
o and B the latencies Li + L on the critical path. Li and L enter only as their sum: a chain of
m flows pays Li before each start and L after each landing (docs/latency.md, "Counts").

Where the counts come from (all derived; docs/latency.md has the arguments):
- ring (g = 1, k segments in turn) and the flat ring (g > 1): 2(p−1)·k synchronous steps. A
  chain takes at most one flow per step, and stretching every step by o + Li + L keeps every
  dependency, so A = B = 2(p−1)k is an upper bound for every o, Li, L; for the fault-free ring
  at k = 1 it is exact (one shard's 2(p−1) zero-slack hops form a chain).
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
- optcc_rails (g > 1, several straggler servers or mixed ℓ): A = the largest of its rails'
  OptCC counts (each rail a g = 1 construction on q = p/g nodes, built at o = Li = L = 0) + 4
  for the NVLink lead and tail, + the most pieces of a rail under the proportional NVLink rates
  (their lead has no slack); tested ≥ the event model's slope in tests/test_paper_checks.py
  and tests/test_model_time_rails.py; B = the largest B of the schedules its rails run (swap 1,
  direct k + 1, ring 2(q−1)k, OptCC its own) + 2 for the NVLink reduce-scatter → rail and
  rail → all-gather edges, below the knee min_l g·w_l·KNEE_rail,l (w_l the rail's share):
  optcc.model_time_rails, tested against the event model in tests/test_model_time_rails.py.
- all_slow (g = 1, no healthy GPU): time scaled by ℓ_min (optcc.algorithms.all_slow), so a
  chain has the same flows: A, B and the knee are those of the reduced cluster's construction.
B is an upper bound on the event model's slope only below the pipeline's knee: it is tested
(tests/test_model_time.py, p ≤ 64) for Li + L ≤ KNEE[construction]/(k·p), a fraction of the
smallest shard's transfer time 1/(k·p) (3/4 for one straggler and the straggler server, where the
single-straggler slope stays 2(p−1) + 3(k−1) up to 7/8 and jumps at 1, measured to p = 128; 1 for
m ≥ 2 stragglers with spread 3, whose hops have 2 slots of slack; 1/2 for spread 1, whose count
exceeds its B past 3/4 at p = 20); beyond it the pipeline stalls
and `model_time` reports valid = False.
A is tested for o up to 0.1 n/B (as in issue 7). With both o and Li + L the bound follows from
convexity of the event time in (o, Li + L): T(o, λ) ≤ (T(2o, 0) + T(0, 2λ))/2, so the same
formula holds for 2λ below the knee.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from optcc.cluster import Cluster
from optcc.latency import units as latency_units

# B is tested for Li + L ≤ KNEE/(k·p) (n/B), per construction (docs/latency.md, "The knee")
KNEE = {"single": Fraction(3, 4), "servers": Fraction(3, 4), "multi": Fraction(1), "multi_spread1": Fraction(1, 2),
        "rails": Fraction(1)}   # rails: an upper cap; its k-dependent knee is model_time_rails.counts(…).knee ≤ 1


_KIND = {"optcc_single": "single", "optcc_multi": "multi", "optcc_servers": "servers",
         "optcc_rails": "rails", "all_slow": "all_slow"}


def construction(algo: str, cluster: Cluster) -> str:
    """Which generator build_schedule uses: 'ring', 'flat_ring', or for OptCC the registry's
    choice (optcc.algorithms.registry.choose): 'single', 'multi', 'servers', 'rails', 'all_slow'."""
    if algo == "ring":
        return "ring" if cluster.g == 1 else "flat_ring"
    from optcc.algorithms.registry import choose
    return _KIND[choose(cluster).name]


_SLOT_CACHE: dict = {}   # slot times do not depend on the latency model: share them across models


def slot(algo: str, cluster: Cluster, k: int) -> Fraction:
    """Closed-form slot time (n/B) of the construction (its own home in optcc.algorithms)."""
    pipelined = cluster.issue_delay + cluster.latency > 0     # optcc_multi's pattern depends on it
    key = (algo, cluster.p, cluster.g, cluster.slowdown, cluster.bandwidth, cluster.nvlink_bandwidth, k, pipelined)
    value = _SLOT_CACHE.get(key)
    if value is None:
        if len(_SLOT_CACHE) > 200_000:
            _SLOT_CACHE.clear()
        value = _SLOT_CACHE[key] = _slot(algo, cluster, k)
    return value


def _slot(algo: str, cluster: Cluster, k: int) -> Fraction:
    kind = construction(algo, cluster)
    if kind in ("ring", "flat_ring"):
        from optcc.algorithms.baselines import flat_ring_slot_time
        return flat_ring_slot_time(cluster)          # ℓ_max·2(p−1)/(p·g), for every k
    if kind == "rails":                              # the same plan as its counts (one computation)
        from optcc.model_time_rails import counts
        return counts(cluster, k).slot
    from optcc.algorithms.registry import choose
    return choose(cluster).slot_time(cluster, k)    # the registry entry's closed form


def _reduced(cluster: Cluster) -> Cluster:
    from optcc.algorithms.all_slow import reduced
    return reduced(cluster)[0]


def single_pieces(q: int, ell, k: int) -> int:
    """Pieces of optcc_single on q nodes: k·H shards plus k − 1 point-to-point pieces when
    ℓ < 2 (H = q − 1 ≥ 2); one piece at q = 2 (optcc_single.optcc_allreduce, its pieces line)."""
    h = q - 1
    if h == 1:
        return 1
    return k * h + (k - 1 if Fraction(ell) < 2 else 0)


def overhead_count(algo: str, cluster: Cluster, k: int) -> int:
    """A: overheads o on the critical path (derived; issue 7's α counts).

    One straggler: 2(p−1)(k+1). A healthy NIC carries about 2(p−1)·k shard flows (k segments,
    ring hops of stages 1 and 4 plus its upload/download share), each holding a busy port o
    longer. Measured: event_time ≤ slot + A·o for ℓ ∈ {8/7, 4/3, 3/2, 2, 3}, p ≤ 12, k ≤ 16,
    o up to 0.1 n/B, with equality for ℓ < 2, k ≥ 3.
    m ≥ 2 stragglers: L(k+1) + H − 1 = 2(p−1)(k+1) + (p−m) − 1 with period L = 2(H + m − 1)
    slots, one flow per port direction per slot: the drain's last hop starts by slot L(k+1) − 1
    and the last F to a straggler by L(k+1) (optcc_multi_drain.drain_last_slot, Pattern.f_slot); a chain
    of dependent flows starts in strictly later slots, so it has at most L(k+1) + 1 flows. The
    count kept is the old synchronous epilogue's (H − 2 slots of slack). Fill flows start inside
    windows, so this is tested, not proved (slopes 6–159 against counts 13–169, p ≤ 10, k ≤ 8).
    With Li + L > 0 (hop spread 3) the last flows are one period later: L(k+2) + H − 1, tested
    the same way (tests/test_model_time.py).
    Straggler server: max(2(q−1)(k+1), 2(g−1)·P) + 4(g−1): the NIC instance on q nodes, or the
    NVLink reduce-scatter block and all-gather queue (P batches of g − 1 rounds on one NVLink
    port; P = instance pieces, k at q = 2), plus lead (2 batches), tail (1) and one switch.
    Tested ≥ event_time − slot_time over o on generated schedules, not proved.
    """
    p, kind = cluster.p, construction(algo, cluster)
    if kind == "ring":
        return 2 * (p - 1) * k
    if kind == "flat_ring":
        return 2 * (p - 1)
    if kind == "all_slow":
        return overhead_count(algo, _reduced(cluster), k)
    if kind == "rails":
        from optcc.model_time_rails import counts
        return counts(cluster, k).overheads
    if kind == "single":
        return 2 * (p - 1) * (k + 1)
    if kind == "multi":
        periods = k + 2 if cluster.issue_delay + cluster.latency > 0 else k + 1   # hop spread 3 | 1
        return 2 * (p - 1) * periods + (p - len(cluster.stragglers)) - 1
    g = cluster.g
    q = p // g
    ell = max(cluster.slowdown)
    nic = 2 * (q - 1) * (k + 1)
    pieces = k if q == 2 else single_pieces(q, ell, k)   # q = 2: k segments swapped in turn
    return max(nic, 2 * (g - 1) * pieces) + 4 * (g - 1)


def latency_count(algo: str, cluster: Cluster, k: int) -> Fraction:
    """B: latencies Li + L on the critical path below the knee (derived, module docstring)."""
    p, kind = cluster.p, construction(algo, cluster)
    if kind == "ring":
        return Fraction(2 * (p - 1) * k)
    if kind == "flat_ring":
        return Fraction(2 * (p - 1))
    if kind == "all_slow":
        return latency_count(algo, _reduced(cluster), k)
    if kind == "rails":
        from optcc.model_time_rails import counts
        return counts(cluster, k).latencies
    if kind == "single":
        return Fraction(2 * (p - 1) + 4 * k)
    if kind == "multi":
        if cluster.issue_delay + cluster.latency > 0:           # hop spread 3 (latency-robust)
            return Fraction(p - 1 + 2 * k)
        return 2 * (p - 1) + Fraction((p - 1) * (k + 1), 2) + 4 * k   # spread 1: only with Li = L = 0
    q = p // cluster.g
    return Fraction(2 * (q - 1) + 4 * k + 2 * cluster.g)


def knee_fraction(algo: str, cluster: Cluster) -> Fraction:
    """KNEE of the construction (the ring's bound holds for every latency: no knee). optcc_multi
    without Li + L (hop spread 1) keeps issue 13's 1/2 for its old count. optcc_rails: 1, a cap
    on its k-dependent knee (`knee` reads the exact one from optcc.model_time_rails)."""
    kind = construction(algo, cluster)
    if kind == "all_slow":
        return knee_fraction(algo, _reduced(cluster))
    if kind == "multi" and cluster.issue_delay + cluster.latency == 0:
        kind = "multi_spread1"
    return KNEE.get(kind, Fraction(10**9))


def knee(algo: str, cluster: Cluster, k: int, both: bool = False) -> Fraction:
    """Largest Li + L (n/B) where B holds: KNEE/(k·p), halved when o > 0 too (convexity)."""
    if construction(algo, cluster) == "rails":      # its knee depends on k (which rails, shares)
        from optcc.model_time_rails import counts
        limit = counts(cluster, k).knee / (k * cluster.p)
    else:
        limit = knee_fraction(algo, cluster) / (k * cluster.p)
    return limit / 2 if both else limit


@dataclass(frozen=True)
class ModelTime:
    time: Fraction          # units of n/B
    slot: Fraction
    overheads: int          # A
    latencies: Fraction     # B
    valid: bool             # Li + L below the knee (else the pipeline stalls: not modelled)

    def seconds(self, cluster: Cluster, n_bytes: int) -> float:
        return float(self.time * n_bytes / cluster.bandwidth)


def model_time(algo: str, cluster: Cluster, k: int, n_bytes: int) -> ModelTime:
    """slot(k) + A·o + B·(Li + L) for an n-byte AllReduce on the cluster's latency model."""
    o, li, lat = latency_units(cluster, n_bytes)
    lam = li + lat
    a, b = overhead_count(algo, cluster, k), latency_count(algo, cluster, k)
    base = slot(algo, cluster, k)
    exact_ring = construction(algo, cluster) in ("ring", "flat_ring")   # proved for all o, λ
    valid = exact_ring or lam <= knee(algo, cluster, k, both=o > 0)
    if valid and (o > 0 or lam > 0) and construction(algo, cluster) == "rails":
        from optcc.model_time_rails import counts
        valid = not counts(cluster, k).latency_free_only
    return ModelTime(base + a * o + b * lam, base, a, b, valid)
