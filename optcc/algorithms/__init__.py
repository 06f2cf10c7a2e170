"""Schedule generators. Each returns a Schedule for a Cluster; `build_schedule` picks by name."""
from __future__ import annotations

from optcc.cluster import Cluster
from optcc.schedule import Schedule

from optcc.algorithms.limits import (MAX_ARRAY_WORK, MAX_SEGMENTS, MAX_WORK, buildable, check_array_work,
                                     check_segments, check_work, max_buildable_segments)

__all__ = ["MAX_ARRAY_WORK", "MAX_SEGMENTS", "MAX_WORK", "algorithm_names", "build_schedule", "buildable",
           "check_array_work", "check_segments", "check_work", "max_buildable_segments"]


def build_schedule(algo: str, cluster: Cluster, segments: int = 1) -> Schedule:
    """Build the named algorithm's schedule with `segments` pipeline segments: any record of
    optcc.algorithms.registry ('optcc' is the first construction that accepts the cluster),
    stating the record's closed-form slot time (Schedule.stated_slot_time) where it has one."""
    from optcc.algorithms.registry import build
    check_segments(segments)                 # before the name: a bad k is said first
    return build(algo, cluster, segments)


def algorithm_names() -> tuple[str, ...]:
    """Every algorithm `build_schedule` knows (the CLI's --algo choices), in table order."""
    from optcc.algorithms.registry import names
    return names()
