"""Clusters where every GPU is slow (derived, all_slow.build): time scaled by ℓ_min onto a cluster
with a healthy GPU. A construction over others: `record(choose)` is its table row, given the
dispatcher that serves the reduced cluster (optcc.algorithms.flat passes its own)."""
from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import TYPE_CHECKING

from optcc.algorithms.all_slow import build as AS
from optcc.algorithms.record import Algorithm, Latency
from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.schedule import Schedule

if TYPE_CHECKING:
    from optcc.algorithms.families.arrays import FlowArrays
    from optcc.event_arrays import EventArrays


def accepts(cluster: Cluster) -> tuple[bool, str]:
    if cluster.g > 1:
        return False, "covers one GPU per server (g = 1; optcc_rails scales its own rails)"
    if not AS.applies(cluster):
        return False, "some GPU is healthy"
    return True, ""


def record_over(choose: Callable[[Cluster], Algorithm]) -> Algorithm:
    """The all_slow row over `choose`, the dispatcher for the reduced cluster (which has a healthy GPU)."""
    def reduced(cluster: Cluster) -> Cluster:
        return AS.reduced(cluster)[0]

    def build(cluster: Cluster, k: int) -> Schedule:
        return AS.build(cluster, k, lambda red, kk: choose(red).build(red, kk))

    def slot_time(cluster: Cluster, k: int) -> Fraction:
        return AS.slot_time(cluster, k, lambda red, kk: choose(red).slot_time(red, kk))

    def arrays(cluster: Cluster, k: int) -> FlowArrays | EventArrays | None:
        def inner(red: Cluster, kk: int) -> FlowArrays | EventArrays | None:
            inner_record = choose(red)
            return inner_record.arrays(red, kk) if inner_record.arrays is not None else None
        return AS.arrays(cluster, k, inner)

    def latency(cluster: Cluster) -> Latency:
        lat = choose(reduced(cluster)).latency
        if not isinstance(lat, Latency):
            raise OptccError("segments", f"all_slow: no latency counts derived for the reduced cluster's construction ({lat})")
        return lat

    return Algorithm("all_slow", build, slot_time, accepts,
                     Latency(lambda c, k: latency(c).overheads(reduced(c), k),
                             lambda c, k: latency(c).latencies(reduced(c), k),
                             lambda c: latency(c).knee(reduced(c)),
                             "derived: the reduced cluster's construction's (time scaled by ℓ_min, the same chains)"),
                     "derived: time scaled by ℓ_min onto a cluster with a healthy GPU (optcc.algorithms.all_slow.build)",
                     construction=True, arrays=arrays)
