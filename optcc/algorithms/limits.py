"""How large a schedule this machine builds: the segment count's type and the p²·k work caps.

A leaf of the construction layer: every construction imports its checks from here, and nothing
here imports a construction (optcc.algorithms re-exports it for callers above)."""
from __future__ import annotations

from optcc.cluster import Cluster
from optcc.errors import OptccError


MAX_SEGMENTS = 4096          # derived: bounds on schedules to build (closed forms take any k)
MAX_WORK = 4 * 10**6         # p²·k ≈ half the flow count of a ring / OptCC schedule
MAX_ARRAY_WORK = 3 * 10**7   # p²·k of a schedule timed as FlowArrays (measured: 3.8 GiB peak at 1024²·25, benchmarks/event_time_scale.py)


def check_segments(segments: object) -> int:
    """The pipeline segment count k: a positive int (OptccError on field "segments" otherwise)."""
    if isinstance(segments, bool) or not isinstance(segments, int) or segments < 1:
        raise OptccError("segments", f"expected a positive integer, got {segments!r}")
    return segments


def check_work(cluster: Cluster, segments: int) -> None:
    """Refuse schedules too large to build in reasonable time and memory (about 2·p²·k flows)."""
    if segments > MAX_SEGMENTS:
        raise OptccError("segments", f"at most {MAX_SEGMENTS} segments are supported when building a "
                                     f"schedule, got {segments}")
    work = cluster.p * cluster.p * segments
    if work > MAX_WORK:
        raise OptccError("segments", f"p²·k = {cluster.p}²·{segments} = {work} is over the limit "
                                     f"{MAX_WORK} (a schedule of about {2 * work} flows); use a smaller p or k")


def buildable(cluster: Cluster, segments: int) -> bool:
    """Whether check_work lets the flow list be built (else the generated form serves it)."""
    try:
        check_work(cluster, segments)
    except OptccError:
        return False
    return True


def check_array_work(cluster: Cluster, segments: int) -> None:
    """Refuse FlowArrays too large for this machine's memory (about 72 bytes per flow at the peak)."""
    work = cluster.p * cluster.p * segments
    if work > MAX_ARRAY_WORK:
        raise OptccError("segments", f"p²·k = {cluster.p}²·{segments} = {work} is over the array limit "
                                     f"{MAX_ARRAY_WORK} (about {2 * work} flows); use a smaller p or k")


def max_buildable_segments(cluster: Cluster) -> int:
    """The largest k check_work accepts on this cluster (at least 1: `--segments auto` then
    picks within it, and check_work still refuses a cluster too large even at k = 1)."""
    return max(1, min(MAX_SEGMENTS, MAX_WORK // (cluster.p * cluster.p)))
