"""One algorithm's record (`Algorithm`, its latency counts `Latency`), `first_accepting` (how a
dispatcher picks) and `build_record`, what `build_schedule` does once a record is chosen.

A leaf of the construction layer: each construction's folder defines its record here-typed
beside its builder (`RECORD` in its __init__), the registry lists them in one table, and no
construction imports the registry: one built over others (optcc_rails' rails, all_slow's
reduced cluster) takes them from optcc.algorithms.flat or as an argument.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

from optcc.algorithms.limits import check_segments, check_work
from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.schedule import Schedule

if TYPE_CHECKING:
    from optcc.algorithms.families.arrays import FlowArrays
    from optcc.event_arrays import EventArrays


@dataclass(frozen=True)
class Latency:
    """model_time's counts for one record: T ≤ slot + A·o + B·(Li + L) below the knee."""
    overheads: Callable[[Cluster, int], int]           # A
    latencies: Callable[[Cluster, int], Fraction]      # B
    knee: Callable[[Cluster], Fraction | None]         # B holds for Li + L ≤ knee/(k·p); None: for every Li + L
    source: str                                        # where A, B and the knee come from
    knee_at: Callable[[Cluster, int], Fraction] | None = None   # a k-dependent knee ≤ knee(cluster)
    latency_free_only: Callable[[Cluster, int], bool] | None = None  # True: not derived there, valid at o = Li = L = 0 only


@dataclass(frozen=True)
class Algorithm:
    name: str
    build: Callable[[Cluster, int], Schedule]
    slot_time: Callable[[Cluster, int], Fraction]      # exact slot time of build(cluster, k), n/B
    accepts: Callable[[Cluster], tuple[bool, str]]     # (True, why it serves) or (False, why not)
    latency: Latency | str                             # the counts, or "none derived: …"
    source: str                                        # "paper: …" or "derived: …", with the citation
    construction: bool = False                         # one of OptCC's constructions ("optcc" tries them)
    segmented: bool = True                             # False: no pipeline segments, k = 1 only
    auto_segments: int | None = None                   # --segments auto's answer without a search
    compare: bool = False                              # a row of its own in `optcc compare`
    choose: Callable[[Cluster], Algorithm] | None = None   # a dispatcher: the record serving a cluster
    arrays: Callable[[Cluster, int], FlowArrays | EventArrays | None] | None = None  # build's flows as FlowArrays / EventArrays (or None), no Flow objects
    generator: str | None = None    # the generator proved for every size that builds exactly this record's
                                    # schedules in its range (optcc.generated; `optcc prove-all --algo NAME`)
    closed_form: bool = True        # slot_time is a formula (build_schedule states it in the schedule, the
                                    # verifier's `time` proves it); False: it is the built schedule's own timing


def counts_of(record: Algorithm) -> Latency:
    """The record's latency counts (OptccError "segments" where none is derived)."""
    if not isinstance(record.latency, Latency):
        raise OptccError("segments", f"{record.name} has no model time ({record.latency}); give --segments K")
    return record.latency


def first_accepting(records: Sequence[Algorithm], cluster: Cluster) -> Algorithm:
    """The first of `records` that accepts the cluster (OptccError "stragglers" with each one's reason)."""
    reasons = []
    for c in records:
        ok, why = c.accepts(cluster)
        if ok:
            return c
        reasons.append(f"{c.name}: {why}")
    raise OptccError("stragglers", "no OptCC construction accepts this cluster (" + "; ".join(reasons) + ")")


def build_record(record: Algorithm, cluster: Cluster, segments: int) -> Schedule:
    """`record`'s schedule with `segments` pipeline segments, within check_work, stating the
    closed-form slot time of the record that serves (Schedule.stated_slot_time) where it has one."""
    check_segments(segments)
    if not record.segmented and segments != 1:
        raise OptccError("segments", f"{record.name} has no pipeline segments: k = 1 only, got {segments}")
    check_work(cluster, segments)
    if record.choose is None:                # a dispatcher's own choice says why not
        ok, why = record.accepts(cluster)
        if not ok:
            raise OptccError("algo", f"{record.name} does not accept this cluster: {why}")
    schedule = record.build(cluster, segments)
    if (record.choose(cluster) if record.choose else record).closed_form:
        from optcc.algorithms.stated import state
        state(schedule, record.slot_time, cluster, segments)
    return schedule
