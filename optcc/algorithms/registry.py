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

Each construction has a folder (optcc.algorithms.single, multi, servers, few_servers, rails,
all_slow, ring, direct, baselines) whose __init__ defines its record beside its builder; this
module only lists them, in dispatch order, and never is imported by a construction. Adding one:
its folder with `RECORD = Algorithm(...)`, and one line below (or `register(record, before=…)`
at run time; `registered(...)` adds one for the duration of a `with` block, as the tests do). Records of higher layers register
themselves when imported: the LP schedules in lp_models.algorithms (the CLI imports it).
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from fractions import Fraction

from optcc.algorithms import flat
from optcc.algorithms.baselines.record import HIERARCHICAL_RING, R2CCL
from optcc.algorithms.direct.record import RECORD as DIRECT
from optcc.algorithms.few_servers.record import RECORD as FEW_SERVERS
from optcc.algorithms.rails.record import RECORD as RAILS
from optcc.algorithms.ring.record import RECORD as RING
from optcc.algorithms.servers.record import RECORD as SERVERS
from optcc.algorithms.record import Algorithm, Latency, build_record, first_accepting
from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.schedule import Schedule

__all__ = ["Algorithm", "Latency", "algorithm", "build", "choose", "construction", "constructions", "generation",
           "names", "optcc_closed_form", "register", "registered", "served", "table", "unregister"]

_CONSTRUCTIONS = [FEW_SERVERS, SERVERS, RAILS, *flat.RECORDS]


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


_BASELINES = [RING, HIERARCHICAL_RING, R2CCL, DIRECT]

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
    return first_accepting(constructions(), cluster)


def served(name: str, cluster: Cluster) -> Algorithm:
    """The record that runs when `name` is asked for on this cluster (a dispatcher's choice)."""
    a = algorithm(name)
    while a.choose is not None:
        a = a.choose(cluster)
    return a


def optcc_closed_form(cluster: Cluster, segments: int) -> Fraction:
    """OptCC's closed-form slot time (n/B) for the construction `choose` picks."""
    return choose(cluster).slot_time(cluster, segments)


def build(name: str, cluster: Cluster, segments: int) -> Schedule:
    """The named record's schedule (optcc.algorithms.build_schedule)."""
    return build_record(algorithm(name), cluster, segments)
