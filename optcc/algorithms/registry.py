"""The OptCC constructions, one table: which one serves a cluster, how to build it, its time.

`CONSTRUCTIONS` lists them in the order they are tried; the first whose `accepts(cluster)`
says yes serves the cluster (`choose`). `accepts` tests the cluster's shape (g, number and
placement of stragglers: optcc_servers takes one straggler server at one ℓ, optcc_rails every
other g > 1 cluster, all_slow g = 1 clusters without a healthy GPU, wrapping the construction
`choose` picks for the time-scaled cluster); a construction may still refuse finer cases when
it builds (an OptccError naming the field), and that refusal is the user's answer. `build(cluster, k)` returns the
Schedule with k pipeline segments; `slot_time(cluster, k)` its closed-form slot time in n/B
(derived from the construction, tested equal to the generated schedule's slot time).

Used by `build_schedule("optcc", …)`, the comparison table (optcc_app.compose.comparison) and the paper
checks (paper_checks.optcc_model), so that all three agree on which construction runs.

Adding a construction (a later issue): write its module with `build` and `slot_time`, then add
one `Construction(...)` entry to `CONSTRUCTIONS`, placed before the entries it should take
precedence over; nothing else changes.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from collections.abc import Callable

from optcc.algorithms import all_slow, optcc_rails
from optcc.algorithms.optcc_multi import optcc_multi_allreduce, optcc_multi_slot_time
from optcc.algorithms.optcc_servers import optcc_server_allreduce, optcc_server_slot_time, straggler_server
from optcc.algorithms.optcc_single import optcc_allreduce, optcc_slot_time
from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.schedule import Schedule


@dataclass(frozen=True)
class Construction:
    name: str
    build: Callable[[Cluster, int], Schedule]
    slot_time: Callable[[Cluster, int], Fraction]
    accepts: Callable[[Cluster], tuple[bool, str]]   # (True, "") or (False, why not)


def _servers(cluster: Cluster) -> tuple[bool, str]:
    if cluster.g < 2:
        return False, "covers g > 1 GPUs per server"
    try:
        straggler_server(cluster)
    except OptccError as e:             # several slow servers or mixed ℓ in one: optcc_rails
        return False, e.message
    return True, ""


def _all_slow(cluster: Cluster) -> tuple[bool, str]:
    if cluster.g > 1:
        return False, "covers one GPU per server (g = 1; optcc_rails scales its own rails)"
    if not all_slow.applies(cluster):
        return False, "some GPU is healthy"
    return True, ""


def _all_slow_build(cluster: Cluster, k: int) -> Schedule:
    return all_slow.build(cluster, k, lambda red, kk: choose(red).build(red, kk))


def _all_slow_slot_time(cluster: Cluster, k: int) -> Fraction:
    return all_slow.slot_time(cluster, k, optcc_closed_form)


def _multi(cluster: Cluster) -> tuple[bool, str]:
    if cluster.g > 1:
        return False, "covers one GPU per server (g = 1)"
    if len(cluster.stragglers) < 2:
        return False, "needs m ≥ 2 stragglers"
    return True, ""


def _single(cluster: Cluster) -> tuple[bool, str]:
    if cluster.g > 1:
        return False, "covers one GPU per server (g = 1)"
    if len(cluster.stragglers) > 1:
        return False, "covers at most one straggler"
    return True, ""


CONSTRUCTIONS: tuple[Construction, ...] = (
    Construction("optcc_servers", optcc_server_allreduce, optcc_server_slot_time, _servers),
    Construction(optcc_rails.NAME, optcc_rails.build, optcc_rails.slot_time, optcc_rails.accepts),
    Construction("all_slow", _all_slow_build, _all_slow_slot_time, _all_slow),
    Construction("optcc_multi", optcc_multi_allreduce, optcc_multi_slot_time, _multi),
    Construction("optcc_single", optcc_allreduce, optcc_slot_time, _single),
)


def construction(name: str) -> Construction:
    """The construction of that name (OptccError "algo" for an unknown one)."""
    for c in CONSTRUCTIONS:
        if c.name == name:
            return c
    raise OptccError("algo", f"unknown construction {name!r} (known: {', '.join(c.name for c in CONSTRUCTIONS)})")


def choose(cluster: Cluster) -> Construction:
    """The first construction that accepts this cluster's shape."""
    reasons = []
    for c in CONSTRUCTIONS:
        ok, why = c.accepts(cluster)
        if ok:
            return c
        reasons.append(f"{c.name}: {why}")
    raise OptccError("stragglers", "no OptCC construction accepts this cluster (" + "; ".join(reasons) + ")")


def optcc_closed_form(cluster: Cluster, segments: int) -> Fraction:
    """OptCC's closed-form slot time (n/B) for the construction `choose` picks."""
    return choose(cluster).slot_time(cluster, segments)
