"""Schedule generators. Each returns a Schedule for a Cluster; `build_schedule` picks by name."""
from __future__ import annotations

from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.schedule import Schedule


def check_segments(segments) -> int:
    """The pipeline segment count k: a positive int (OptccError on field --segments otherwise)."""
    if isinstance(segments, bool) or not isinstance(segments, int) or segments < 1:
        raise OptccError("--segments", f"expected a positive integer, got {segments!r}")
    return segments


def build_schedule(algo: str, cluster: Cluster, segments: int = 1) -> Schedule:
    """Build the named algorithm's schedule ('ring' or 'optcc') with `segments` pipeline segments."""
    check_segments(segments)
    if algo == "ring":
        if cluster.g > 1:
            from optcc.algorithms.baselines import flat_ring_allreduce
            return flat_ring_allreduce(cluster)
        from optcc.algorithms.ring import ring_allreduce
        return ring_allreduce(cluster, segments)
    if algo == "optcc":
        if cluster.g > 1:
            from optcc.algorithms import optcc_rails
            from optcc.algorithms.optcc_servers import optcc_server_allreduce, straggler_server
            try:
                straggler_server(cluster)
            except OptccError:                # several slow servers or mixed ℓ in a server
                return optcc_rails.build(cluster, segments)
            return optcc_server_allreduce(cluster, segments)
        if len(cluster.stragglers) >= 2:
            from optcc.algorithms import all_slow
            if all_slow.applies(cluster):      # no healthy GPU: scale time (all_slow, derived)
                return all_slow.build(cluster, segments, lambda c, k: build_schedule("optcc", c, k))
            from optcc.algorithms.optcc_multi import optcc_multi_allreduce
            return optcc_multi_allreduce(cluster, segments)
        from optcc.algorithms.optcc_single import optcc_allreduce
        return optcc_allreduce(cluster, segments)
    raise OptccError("--algo", f"unknown algorithm {algo!r} (known: ring, optcc)")


ALGORITHMS = ("ring", "optcc")
