"""OptCC for g GPUs per server and any set of slow GPUs (derived, docs/optcc_rails.md): one g = 1
construction per rail (optcc.algorithms.flat) with NVLink lead and tail (`build`, laid out by
`layout`; the borrowing sub-rails in `borrow`), its counts (`counts`) and array form (`arrays`);
`RECORD` its table row."""
from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING

from optcc.algorithms.limits import check_segments
from optcc.algorithms.rails import build as R
from optcc.algorithms.rails.counts import counts
from optcc.algorithms.record import Algorithm, Latency
from optcc.cluster import Cluster

if TYPE_CHECKING:
    from optcc.event_arrays import EventArrays


def slot_time(cluster: Cluster, k: int) -> Fraction:
    """build.slot_time's value from the plan its counts use (one computation, cached)."""
    check_segments(k)
    R._check(cluster)
    return counts(cluster, k).slot


def rails_event_arrays(cluster: Cluster, k: int) -> EventArrays:
    """The array form, imported when first used (numpy: commands that only build schedules skip it)."""
    from optcc.algorithms.rails.arrays import rails_event_arrays
    return rails_event_arrays(cluster, k)


RECORD = Algorithm(R.NAME, R.build, slot_time, R.accepts,
                   Latency(lambda c, k: counts(c, k).overheads, lambda c, k: counts(c, k).latencies,
                           lambda c: Fraction(1), "derived: optcc.algorithms.rails.counts; tested in tests/optcc/test_model_time_rails.py",
                           knee_at=lambda c, k: counts(c, k).knee,
                           latency_free_only=lambda c, k: counts(c, k).latency_free_only),
                   "derived: one g = 1 construction per rail, NVLink lead and tail (docs/optcc_rails.md)",
                   construction=True, arrays=rails_event_arrays)
