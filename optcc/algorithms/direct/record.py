"""The direct AllReduce (derived): shards sized by an exact LP, every node to every node (`build`);
`RECORD` its table row (a baseline; optcc_rails also runs it on rails where it is faster)."""
from __future__ import annotations

from optcc.algorithms.direct import build as D
from optcc.algorithms.record import Algorithm
from optcc.cluster import Cluster
from optcc.errors import OptccError


def accepts(cluster: Cluster) -> tuple[bool, str]:
    try:
        D._check(cluster)
    except OptccError as e:
        return False, e.message
    return True, ""


RECORD = Algorithm(D.NAME, D.build, D.slot_time, accepts,
                   "none derived: B = k + 1 (optcc.algorithms.rails.counts, direct rails), A not counted",
                   "derived: shards sized by an exact LP, every node to every node (optcc.algorithms.direct.build)")
