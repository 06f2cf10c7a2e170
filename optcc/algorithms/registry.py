"""Every algorithm, one table: OptCC's constructions and the baselines, one record each.

A record (`Algorithm`) holds what every caller needs: `build(cluster, k)` (the Schedule),
`slot_time(cluster, k)` (its exact slot time in n/B, tested equal to the built schedule's),
`accepts(cluster) -> (bool, reason)` (the cluster shapes it covers; a build may still refuse
finer cases with an OptccError naming the field, and that refusal is the user's answer),
`latency` (model_time's counts A, B and knee as a `Latency`, or a string saying why none is
derived) and `source` (paper or derived, with the citation). Where `slot_time` is a closed form
(`closed_form`, the default), build_schedule writes it into the schedule as its stated slot
time, which the verifier's `time` property proves the schedule meets exactly. `arrays(cluster, k)`, where a
construction has it, gives the same flows as numpy index arrays (families.arrays.FlowArrays or
optcc.event_arrays.EventArrays, or None where it has none for that cluster), so that `optcc time --algo` times it at p = 1024
without building Flow objects.

The name "optcc" is a dispatcher: the first record marked `construction` that accepts the
cluster serves it (`choose`, in table order). `build_schedule`, `optcc.model_time`,
`optcc.segments` (`--segments auto`), `optcc compare` (optcc_app.compose.comparison), the paper checks
(paper_checks.optcc_model) and the CLI's `--algo` choices all read this table.

Adding an algorithm: write its module with `build` and `slot_time`, then `register(Algorithm(...))`
(a construction `before=` the entry it should take precedence over; `registered(...)` adds one
for the duration of a `with` block, as the tests do). Records of higher layers register
themselves when imported: the LP schedules in lp_models.algorithms (the CLI imports it).
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

from optcc import latency_counts as LC
from optcc.algorithms import all_slow, direct, few_servers, optcc_rails
from optcc.algorithms import baselines as BL
from optcc.algorithms.optcc_multi import optcc_multi_allreduce, optcc_multi_slot_time
from optcc.algorithms.optcc_servers import optcc_server_allreduce, optcc_server_slot_time
from optcc.algorithms.optcc_single import optcc_allreduce, optcc_flow_arrays, optcc_slot_time
from optcc.algorithms.server_lift import straggler_server
from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.schedule import Schedule

if TYPE_CHECKING:
    from optcc.algorithms.families.arrays import FlowArrays
    from optcc.event_arrays import EventArrays
    from optcc.model_time_rails import RailsCounts


def _lazy_arrays(module: str, name: str) -> Callable[[Cluster, int], FlowArrays | EventArrays | None]:
    """The array form `module.name`, imported when first used: the array modules need numpy,
    which commands that only build or read schedules (optcc schedule) do not load."""
    def arrays(cluster: Cluster, k: int) -> FlowArrays | EventArrays | None:
        import importlib
        build: Callable[[Cluster, int], FlowArrays | EventArrays | None] = getattr(importlib.import_module(module), name)
        return build(cluster, k)
    arrays.__name__ = name
    return arrays


multi_event_arrays = _lazy_arrays("optcc.algorithms.arrays_multi", "multi_event_arrays")
server_event_arrays = _lazy_arrays("optcc.algorithms.arrays_servers", "server_event_arrays")
rails_event_arrays = _lazy_arrays("optcc.algorithms.arrays_servers", "rails_event_arrays")


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
    closed_form: bool = True        # slot_time is a formula (build_schedule states it in the schedule, the
                                    # verifier's `time` proves it); False: it is the built schedule's own timing


# ---- OptCC's constructions -------------------------------------------------------------------
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


def _reduced(cluster: Cluster) -> Cluster:
    return all_slow.reduced(cluster)[0]


def _all_slow_build(cluster: Cluster, k: int) -> Schedule:
    return all_slow.build(cluster, k, lambda red, kk: choose(red).build(red, kk))


def _all_slow_slot_time(cluster: Cluster, k: int) -> Fraction:
    return all_slow.slot_time(cluster, k, optcc_closed_form)


def _all_slow_arrays(cluster: Cluster, k: int) -> FlowArrays | EventArrays | None:
    def inner(red: Cluster, kk: int) -> FlowArrays | EventArrays | None:
        record = choose(red)
        return record.arrays(red, kk) if record.arrays is not None else None
    return all_slow.arrays(cluster, k, inner)


def _reduced_latency(cluster: Cluster) -> Latency:
    lat = choose(_reduced(cluster)).latency
    if not isinstance(lat, Latency):
        raise OptccError("segments", f"all_slow: no latency counts derived for the reduced cluster's construction ({lat})")
    return lat


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


def _rails_counts(cluster: Cluster, k: int) -> RailsCounts:
    from optcc.model_time_rails import counts
    return counts(cluster, k)


def _rails_slot_time(cluster: Cluster, k: int) -> Fraction:
    """optcc_rails.slot_time's value from the plan its counts use (one computation, cached)."""
    from optcc.algorithms import check_segments
    check_segments(k)
    optcc_rails._check(cluster)
    return _rails_counts(cluster, k).slot


SINGLE_LATENCY = Latency(LC.single_overheads, LC.single_latencies, lambda c: LC.SINGLE_KNEE,
                         "derived: optcc.latency_counts (single), docs/latency.md; tested in tests/test_model_time.py")

_CONSTRUCTIONS = [
    Algorithm(few_servers.NAME, few_servers.build, few_servers.slot_time, few_servers.accepts,
              Latency(few_servers.overheads, few_servers.latencies, few_servers.knee,
                      "derived: optcc.algorithms.few_servers (B = 3 below the knee); tested in tests/test_few_servers.py"),
              "derived: a lagged direct exchange between q ≤ 8 servers with LP shards, NVLink lead and tail "
              "(optcc.algorithms.few_servers, docs/optcc_servers.md 'Few servers')",
              construction=True, arrays=_lazy_arrays("optcc.algorithms.few_servers", "arrays")),
    Algorithm("optcc_servers", optcc_server_allreduce, optcc_server_slot_time, _servers,
              Latency(LC.servers_overheads, LC.servers_latencies, lambda c: LC.SERVERS_KNEE,
                      "derived: optcc.latency_counts (servers); tested in tests/test_model_time.py"),
              "derived: one straggler server, the NIC instance plus NVLink lead and tail (docs/optcc_servers.md)",
              construction=True, arrays=server_event_arrays),
    Algorithm(optcc_rails.NAME, optcc_rails.build, _rails_slot_time, optcc_rails.accepts,
              Latency(lambda c, k: _rails_counts(c, k).overheads, lambda c, k: _rails_counts(c, k).latencies,
                      lambda c: Fraction(1), "derived: optcc.model_time_rails; tested in tests/test_model_time_rails.py",
                      knee_at=lambda c, k: _rails_counts(c, k).knee,
                      latency_free_only=lambda c, k: _rails_counts(c, k).latency_free_only),
              "derived: one g = 1 construction per rail, NVLink lead and tail (docs/optcc_rails.md)",
              construction=True, arrays=rails_event_arrays),
    Algorithm("all_slow", _all_slow_build, _all_slow_slot_time, _all_slow,
              Latency(lambda c, k: _reduced_latency(c).overheads(_reduced(c), k),
                      lambda c, k: _reduced_latency(c).latencies(_reduced(c), k),
                      lambda c: _reduced_latency(c).knee(_reduced(c)),
                      "derived: the reduced cluster's construction's (time scaled by ℓ_min, the same chains)"),
              "derived: time scaled by ℓ_min onto a cluster with a healthy GPU (optcc.algorithms.all_slow)",
              construction=True, arrays=_all_slow_arrays),
    Algorithm("optcc_multi", optcc_multi_allreduce, optcc_multi_slot_time, _multi,
              Latency(LC.multi_overheads, LC.multi_latencies, LC.multi_knee,
                      "derived: optcc.latency_counts (multi), docs/optcc_multi.md 'Latency'; tested in "
                      "tests/test_model_time.py and tests/test_optcc_multi_latency.py"),
              "derived: m ≥ 2 stragglers (docs/optcc_multi.md)", construction=True, arrays=multi_event_arrays),
    Algorithm("optcc_single", optcc_allreduce, optcc_slot_time, _single, SINGLE_LATENCY,
              "paper: OptCC's single-straggler construction (PAPER.md 'OptCC'; Theorem 2's time)",
              construction=True, arrays=optcc_flow_arrays),
]


# ---- the "optcc" dispatcher ------------------------------------------------------------------
def _optcc_accepts(cluster: Cluster) -> tuple[bool, str]:
    try:
        return True, f"served by {choose(cluster).name}"
    except OptccError as e:
        return False, e.message


_OPTCC = Algorithm("optcc", lambda c, k: choose(c).build(c, k), lambda c, k: choose(c).slot_time(c, k),
                   _optcc_accepts, "the construction's (see choose)",
                   "the first construction of this table that accepts the cluster", compare=True,
                   choose=lambda c: choose(c))


# ---- baselines -------------------------------------------------------------------------------
def _always(cluster: Cluster) -> tuple[bool, str]:
    return True, ""


def _ring_build(cluster: Cluster, k: int) -> Schedule:
    if cluster.g > 1:
        return BL.flat_ring_allreduce(cluster)       # one channel per NIC; k is not used
    from optcc.algorithms.ring import ring_allreduce
    return ring_allreduce(cluster, k)


def _g_above_1(cluster: Cluster) -> tuple[bool, str]:
    return (True, "") if cluster.g > 1 else (False, "covers g > 1 GPUs per server (at g = 1 it is the ring)")


def _r2ccl_subpieces(cluster: Cluster) -> int:
    """S = max(8, p) broadcast sub-pieces: the chain fill (N−2)·Y/(K·S) stays below Y/K."""
    return max(8, cluster.p)


R2CCL_CHUNKS = 4


def _r2ccl_build(cluster: Cluster, k: int) -> Schedule:
    make = BL.r2ccl_allreduce if cluster.g == 1 else BL.r2ccl_server_allreduce
    return make(cluster, R2CCL_CHUNKS, _r2ccl_subpieces(cluster))


def _r2ccl_slot_time(cluster: Cluster, k: int) -> Fraction:
    closed = BL.r2ccl_slot_time if cluster.g == 1 else BL.r2ccl_server_slot_time
    return closed(cluster, R2CCL_CHUNKS, _r2ccl_subpieces(cluster))


def _r2ccl_accepts(cluster: Cluster) -> tuple[bool, str]:
    try:
        _r2ccl_slot_time(cluster, 1)
    except OptccError as e:
        return False, e.message
    return True, ""


def _direct_accepts(cluster: Cluster) -> tuple[bool, str]:
    try:
        direct._check(cluster)
    except OptccError as e:
        return False, e.message
    return True, ""


_BASELINES = [
    Algorithm("ring", _ring_build, lambda c, k: BL.flat_ring_slot_time(c), _always,
              Latency(LC.ring_overheads, LC.ring_latencies, lambda c: None,
                      "derived: 2(p−1)·k synchronous steps (2(p−1) for the flat ring), an upper bound for "
                      "every o, Li, L (optcc.latency_counts); tested in tests/test_model_time.py"),
              "paper: NCCL's ring with the straggler on it (PXN); g > 1 the flat ring over all p GPUs, "
              "PAPER.md's derived reading of NCCLNoFailure (optcc.algorithms.baselines_rings)",
              auto_segments=1, compare=True),    # k only adds steps to the ring
    Algorithm("hierarchical_ring", lambda c, k: BL.hierarchical_ring_allreduce(c),
              lambda c, k: BL.hierarchical_ring_slot_time(c), _g_above_1,
              "none derived: A and B of the hierarchical ring were never counted",
              "paper: NCCL's hierarchical ring; its time derived (optcc.algorithms.baselines_rings)",
              segmented=False, compare=True),
    Algorithm("r2ccl", _r2ccl_build, _r2ccl_slot_time, _r2ccl_accepts,
              "none derived: R2CCL's critical path was never counted",
              "paper: R2CCL-AllReduce (arXiv 2512.25059, PAPER.md), K = 4, S = max(8, p); g > 1 node level, "
              "derived (optcc.algorithms.baselines_r2ccl)",
              segmented=False, compare=True),
    Algorithm(direct.NAME, direct.build, direct.slot_time, _direct_accepts,
              "none derived: B = k + 1 (optcc.model_time_rails, direct rails), A not counted",
              "derived: shards sized by an exact LP, every node to every node (optcc.algorithms.direct)"),
]

_TABLE: list[Algorithm] = [_OPTCC, *_CONSTRUCTIONS, *_BASELINES]
_GENERATION = [0]          # bumped on every change of the table: caches keyed by it stay right


def table() -> tuple[Algorithm, ...]:
    """Every record, in table order."""
    return tuple(_TABLE)


def names() -> tuple[str, ...]:
    return tuple(a.name for a in _TABLE)


def generation() -> int:
    """A number that changes whenever the table does (a cache key part)."""
    return _GENERATION[0]


def constructions() -> tuple[Algorithm, ...]:
    """OptCC's constructions in the order "optcc" tries them."""
    return tuple(a for a in _TABLE if a.construction)


def register(record: Algorithm, before: str | None = None) -> Algorithm:
    """Add a record (before the named one, else at the end); OptccError "algo" for a taken name."""
    if record.name in names():
        raise OptccError("algo", f"an algorithm named {record.name!r} is already registered")
    at = len(_TABLE) if before is None else names().index(algorithm(before).name)
    _TABLE.insert(at, record)
    _GENERATION[0] += 1
    return record


def unregister(name: str) -> None:
    _TABLE.remove(algorithm(name))
    _GENERATION[0] += 1


@contextmanager
def registered(record: Algorithm, before: str | None = None) -> Iterator[Algorithm]:
    """The table with `record` added for the duration of the block."""
    register(record, before)
    try:
        yield record
    finally:
        unregister(record.name)


def algorithm(name: str) -> Algorithm:
    """The record of that name (OptccError "algo" for an unknown one)."""
    for a in _TABLE:
        if a.name == name:
            return a
    raise OptccError("algo", f"unknown algorithm {name!r} (known: {', '.join(names())})")


def construction(name: str) -> Algorithm:
    """The construction of that name (OptccError "algo" for an unknown one)."""
    for c in constructions():
        if c.name == name:
            return c
    raise OptccError("algo", f"unknown construction {name!r} (known: {', '.join(c.name for c in constructions())})")


def choose(cluster: Cluster) -> Algorithm:
    """The first construction that accepts this cluster's shape."""
    reasons = []
    for c in constructions():
        ok, why = c.accepts(cluster)
        if ok:
            return c
        reasons.append(f"{c.name}: {why}")
    raise OptccError("stragglers", "no OptCC construction accepts this cluster (" + "; ".join(reasons) + ")")


def served(name: str, cluster: Cluster) -> Algorithm:
    """The record that runs when `name` is asked for on this cluster (a dispatcher's choice)."""
    a = algorithm(name)
    while a.choose is not None:
        a = a.choose(cluster)
    return a


def optcc_closed_form(cluster: Cluster, segments: int) -> Fraction:
    """OptCC's closed-form slot time (n/B) for the construction `choose` picks."""
    return choose(cluster).slot_time(cluster, segments)
