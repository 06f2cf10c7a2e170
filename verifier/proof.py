"""prove_allreduce: run the four properties on a Schedule and collect a Proof.

Every property reads the schedule in the one order the runners execute it (landings of one
instant in posting order; verifier.events.piece_events). docs/verifier.md has the statements:
  sum        Z3 proof that every rank ends with Σ inputs of every piece (verifier.sum_property)
  causality  same-instant landings on one (rank, piece) commute or are dead, so the values do
             not hinge on the tie-break (verifier.causality)
  capacity   optcc.timing.check_capacity under the schedule's capacity model
  time       ends exactly at the schedule's stated slot time, not below
             bounds.closed_form.lower_bound; a schedule that states none has no `time` entry
             in `properties` ("not stated" in facts), unless it beats the bound (refuted)
"runnable" (the step runner's per-rank plans, optcc.lowering.step, realize the schedule) is
verifier.step_check: its plans depend on the tensor length, so `optcc verify` adds it for one
length and every rank checks its own plan before it runs.
Reported beside them, not part of `proved` (a correct AllReduce may lack them; callers that
need one check `Proof.reported`):
  deterministic  every rank's final value of a piece has the same summation tree, so all
                 ranks end bitwise equal (verifier.determinism)
  numerics       for `dtype` (default float32) the rigorous worst-case rounding error is no
                 worse than the ring's, or for integers no intermediate can overflow where
                 the result does not (verifier.numerics; its report is facts["numerics"])
"""
from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import z3

from optcc.errors import OptccError
from optcc.timing import IntegerTimes
from verifier.causality import check_causality
from verifier.determinism import check_determinism
from verifier.events import piece_events
from verifier.numerics import analyze_numerics
from verifier.port_checks import check_capacity_property
from verifier.sum_property import SumChecker
from verifier.time_property import check_time

if TYPE_CHECKING:
    from optcc.schedule import Schedule

PROPERTIES = ("sum", "causality", "capacity", "time")


def required_properties(schedule: Schedule) -> tuple[str, ...]:
    """The properties a proof of `schedule` must hold: all of PROPERTIES, less `time` where the
    schedule states no slot time (then its time is "not stated", never proved)."""
    return PROPERTIES if schedule.stated_slot_time is not None else PROPERTIES[:-1]
REPORTED = ("deterministic", "numerics")


@dataclass
class Proof:
    proved: bool
    properties: dict[str, bool]
    counterexample: dict[str, Any] | None
    seconds: float
    counterexamples: dict[str, dict[str, Any]] = field(default_factory=dict)   # every failed property
    facts: dict[str, Any] = field(default_factory=dict)                         # finish, bound, stats, notes
    reported: dict[str, bool] = field(default_factory=dict)           # REPORTED name -> holds
    reported_counterexamples: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"proved": self.proved, "properties": dict(self.properties),
                "counterexample": self.counterexample, "seconds": self.seconds,
                "failed": {k: v for k, v in self.counterexamples.items()},
                "facts": {k: (str(v) if v is not None and not isinstance(v, (int, float, str, dict, list, bool)) else v)
                          for k, v in self.facts.items()},
                "z3_version": z3.get_version_string(), "reported": dict(self.reported),
                "reported_counterexamples": dict(self.reported_counterexamples)}


def prove_allreduce(schedule: Schedule, *, properties: Iterable[str] | None = None, reported: Iterable[str] | None = None,
                    dtype: str = "float32") -> Proof:
    """Prove (or refute, with a counterexample) that `schedule` is a correct AllReduce.

    `properties`: an iterable of names from PROPERTIES to check (default: all of them); the
    Proof's `properties` dict has exactly the checked names. `reported`: names from REPORTED
    to evaluate into `Proof.reported` (default: all of them when `properties` is None, else
    none). Raises OptccError on bad input.
    """
    wanted = PROPERTIES if properties is None else tuple(properties)
    extra = (REPORTED if properties is None else ()) if reported is None else tuple(reported)
    for name in wanted:
        if name not in PROPERTIES:
            raise OptccError("properties", f"unknown property {name!r} (known: {', '.join(PROPERTIES)})")
    for name in extra:
        if name not in REPORTED:
            raise OptccError("reported", f"unknown property {name!r} (known: {', '.join(REPORTED)})")
    t0 = time.perf_counter()
    schedule.validate()
    grid = IntegerTimes(schedule)
    results: dict[str, bool] = {}
    failures: dict[str, dict[str, Any]] = {}
    facts: dict[str, Any] = {"property_seconds": {}}
    events = piece_events(schedule, grid) if "sum" in wanted or "causality" in wanted else None
    ok: bool | None
    cx: dict[str, Any] | None
    for name in PROPERTIES:
        if name not in wanted:
            continue
        started = time.perf_counter()
        if name == "sum":
            assert events is not None
            checker = SumChecker(schedule, grid, events)
            ok, cx = checker.check()
            facts.update(checker.stats)
        elif name == "causality":
            ok, cx = check_causality(schedule, grid, events)
        elif name == "capacity":
            ok, cx = check_capacity_property(schedule, grid)
        else:
            ok, cx, time_facts = check_time(schedule, grid)
            facts.update(time_facts)
        if ok is not None:                       # None: time not stated, nothing to prove, nothing refuted
            results[name] = ok
        facts["property_seconds"][name] = round(time.perf_counter() - started, 4)
        if ok is False:
            assert cx is not None                # a failure has its counterexample
            failures[name] = cx
    reported_ok: dict[str, bool] = {}
    reported_cx: dict[str, dict[str, Any]] = {}
    for name in extra:
        started = time.perf_counter()
        holds: bool
        why: dict[str, Any] | None
        if name == "deterministic":
            holds, why = check_determinism(schedule, grid)
        else:
            report = analyze_numerics(schedule, dtype, grid)
            facts["numerics"] = report.to_json()
            holds, why = report.ok, {"property": "numerics", "dtype": dtype, "message": report.message}
        reported_ok[name] = holds
        facts["property_seconds"][name] = round(time.perf_counter() - started, 4)
        if not holds:
            assert why is not None
            reported_cx[name] = why
    first = next((failures[n] for n in PROPERTIES if n in failures), None)
    if first is not None:
        first = dict(first)
        also = [n for n in PROPERTIES if n in failures and n != first["property"]]
        if also:
            first["also_failed"] = also
    return Proof(proved=all(results.values()), properties=results, counterexample=first,
                 seconds=time.perf_counter() - t0, counterexamples=failures, facts=facts,
                 reported=reported_ok, reported_counterexamples=reported_cx)
