"""Model time of an algorithm from closed forms, so that p = 1024 needs no event simulation.

    T(k) ≤ slot(k) + A(k)·o + B(k)·(Li + L)        (units of n/B; o, Li, L from the cluster)

slot(k) is the record's exact slot time and A, B and the knee its `Latency`, both from the one
table optcc.algorithms.registry (the counts and their derivations: optcc.latency_counts and
optcc.algorithms.rails.counts; docs/latency.md). B is an upper bound on the event model's slope only
below the record's knee, Li + L ≤ KNEE/(k·p) (a record without a knee, the ring's, holds for
every Li + L); beyond it the pipeline stalls and `model_time` reports valid = False. A record
whose latency is "none derived" has no model time: OptccError on field "segments" (give k).
A is tested for o up to 0.1 n/B (as in issue 7). With both o and Li + L the bound follows from
convexity of the event time in (o, Li + L): T(o, λ) ≤ (T(2o, 0) + T(0, 2λ))/2, so the same
formula holds for 2λ below the knee.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from optcc.algorithms import registry
from optcc.algorithms.record import counts_of
from optcc.cluster import Cluster
from optcc.latency import units as latency_units
from optcc.latency_counts import single_pieces  # noqa: F401  (its old home; paper_checks reads it here)

NO_KNEE = Fraction(10**9)          # knee_fraction of a record whose bound holds for every Li + L


def served_by(algo: str, cluster: Cluster) -> str:
    """The name of the record that runs for `algo` on this cluster (for 'optcc' the registry's
    choice: optcc_single, optcc_multi, optcc_servers, optcc_rails, all_slow). A "construction"
    is only ever one of OptCC's records (optcc.algorithms.registry.construction)."""
    return registry.served(algo, cluster).name


def latency_of(algo: str, cluster: Cluster) -> registry.Latency:
    """The counts of the record serving `algo` here (OptccError "segments" where none is derived)."""
    return counts_of(registry.served(algo, cluster))


_SLOT_CACHE: dict[tuple[object, ...], Fraction] = {}   # slot times do not depend on the latency model: share them across models


def slot(algo: str, cluster: Cluster, k: int) -> Fraction:
    """Exact slot time (n/B) of the record serving `algo` (its own home in optcc.algorithms)."""
    pipelined = cluster.issue_delay + cluster.latency > 0     # optcc_multi's pattern depends on it
    key = (registry.generation(), algo, cluster.p, cluster.g, cluster.slowdown, cluster.bandwidth,
           cluster.nvlink_bandwidth, k, pipelined)
    value = _SLOT_CACHE.get(key)
    if value is None:
        if len(_SLOT_CACHE) > 200_000:
            _SLOT_CACHE.clear()
        value = _SLOT_CACHE[key] = registry.served(algo, cluster).slot_time(cluster, k)
    return value


def overhead_count(algo: str, cluster: Cluster, k: int) -> int:
    """A: overheads o on the critical path (the record's Latency.overheads; derived)."""
    return latency_of(algo, cluster).overheads(cluster, k)


def latency_count(algo: str, cluster: Cluster, k: int) -> Fraction:
    """B: latencies Li + L on the critical path below the knee (the record's Latency.latencies)."""
    return latency_of(algo, cluster).latencies(cluster, k)


def knee_fraction(algo: str, cluster: Cluster) -> Fraction:
    """KNEE of the record (NO_KNEE where the bound holds for every latency, the ring's). A
    k-dependent knee (optcc_rails) has this as its cap; `knee` reads the exact one."""
    value = latency_of(algo, cluster).knee(cluster)
    return NO_KNEE if value is None else value


def knee(algo: str, cluster: Cluster, k: int, both: bool = False) -> Fraction:
    """Largest Li + L (n/B) where B holds: KNEE/(k·p), halved when o > 0 too (convexity)."""
    lat = latency_of(algo, cluster)
    fraction = lat.knee_at(cluster, k) if lat.knee_at is not None else knee_fraction(algo, cluster)
    limit = fraction / (k * cluster.p)
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
    counts = latency_of(algo, cluster)
    a, b = counts.overheads(cluster, k), counts.latencies(cluster, k)
    base = slot(algo, cluster, k)
    no_knee = counts.knee_at is None and counts.knee(cluster) is None     # holds for all o, λ
    valid = no_knee or lam <= knee(algo, cluster, k, both=o > 0)
    if valid and (o > 0 or lam > 0) and counts.latency_free_only is not None:
        valid = not counts.latency_free_only(cluster, k)
    return ModelTime(base + a * o + b * lam, base, a, b, valid)
