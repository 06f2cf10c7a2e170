"""OptCC on one GPU per server (g = 1): the constructions that serve such a cluster, in the order
the "optcc" dispatcher tries them. optcc_rails builds each of its rails (a g = 1 cluster) with
`choose`, so it composes these records without importing the registry; the registry lists
`RECORDS` in its table.
"""
from __future__ import annotations

from optcc.algorithms.all_slow.record import record_over as all_slow_over
from optcc.algorithms.multi.record import RECORD as MULTI
from optcc.algorithms.single.record import RECORD as SINGLE
from optcc.algorithms.record import Algorithm, first_accepting
from optcc.cluster import Cluster

HEALTHY = (MULTI, SINGLE)                   # a cluster with a healthy GPU


def _choose_healthy(cluster: Cluster) -> Algorithm:
    return first_accepting(HEALTHY, cluster)


RECORDS = (all_slow_over(_choose_healthy), *HEALTHY)


def choose(cluster: Cluster) -> Algorithm:
    """The first of RECORDS that accepts this g = 1 cluster (OptccError "stragglers" if none)."""
    return first_accepting(RECORDS, cluster)
