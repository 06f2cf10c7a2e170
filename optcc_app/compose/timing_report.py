"""A Schedule's timing report: slot time, event time, capacity check (optcc.timing) beside T0
and the cluster's lower bound (bounds.closed_form), so that every time can be read as a ratio."""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from bounds.closed_form import fault_free_optimum, lower_bound
from optcc.errors import OptccError
from optcc.latency import units as latency_units
from optcc.schedule import Schedule
from optcc.event_timer import fast_event_time
from optcc.timing import CapacityViolation, IntegerTimes, capacity_model, check_capacity, event_time, slot_time


@dataclass
class TimingReport:
    slot_time: Fraction
    event_time: Fraction
    t0: Fraction
    lower_bound: Fraction | None
    capacity: str
    violation: CapacityViolation | None
    n_bytes: int

    def ratio_to_t0(self) -> float | None:
        """None where T0 is 0 (a single server: no traffic has to cross a NIC)."""
        return float(self.slot_time / self.t0) if self.t0 else None

    def ratio_to_lower_bound(self) -> float | None:
        return float(self.slot_time / self.lower_bound) if self.lower_bound else None


def _lower_bound(cluster) -> Fraction | None:
    """The cluster's lower bound, None where no closed form covers it."""
    try:
        return lower_bound(cluster)
    except OptccError:
        return None


def time_schedule(schedule: Schedule, n_bytes: int = 2**30, nvlink: str = "stated") -> TimingReport:
    """Slot time, event time (the cluster's o, Li, L at message size n; NVLink streams below rate 1
    as `nvlink` says, optcc.timing.NVLINK_SHARING), T0, lower bound, capacity check."""
    c = schedule.cluster
    grid = IntegerTimes(schedule)
    model = capacity_model(schedule)
    violation = check_capacity(schedule, model, grid)
    o, li, lat = latency_units(c, n_bytes)
    event = (fast_event_time(schedule, o, li, lat, grid) if nvlink == "stated"      # a slot group at a time
             else event_time(schedule, o, grid, li, lat, nvlink=nvlink))
    return TimingReport(
        slot_time=slot_time(schedule, grid),
        event_time=event,
        t0=fault_free_optimum(c.p, c.g),
        lower_bound=_lower_bound(c),
        capacity=model,
        violation=violation,
        n_bytes=n_bytes,
    )


def array_record(algo: str, cluster):
    """The registry record that would build `algo` on this cluster, when it has an array form."""
    from optcc.algorithms.registry import algorithm
    record = algorithm(algo)
    if record.choose is not None:
        record = record.choose(cluster)
    return record if record.arrays is not None else None


def time_algorithm(algo: str, cluster, k: int, n_bytes: int = 2**30, nvlink: str = "stated"):
    """(report, algorithm built, flow count, the Schedule or None where only arrays were made) of `algo` on the cluster with k segments. Where the
    serving construction has an array form (registry `arrays`) the flows are timed as
    FlowArrays / EventArrays (optcc.event_timer.Prepared.from_arrays: the same event model,
    exact), so p = 1024 works; otherwise, where the arrays show a port conflict (to describe it)
    or their grid is beyond int64, the schedule is built and timed by time_schedule. NVLink
    streams shared max-min (`nvlink`) need the built schedule's flows (optcc.event_maxmin)."""
    from optcc.algorithms import build_schedule, check_array_work
    from optcc.event_timer import Prepared
    if nvlink != "stated":
        schedule = build_schedule(algo, cluster, k)
        return (time_schedule(schedule, n_bytes, nvlink), schedule.meta.get("algorithm", algo), len(schedule.flows),
                schedule)
    record = array_record(algo, cluster)
    fa = None
    if record is not None:
        check_array_work(cluster, k)
        fa = record.arrays(cluster, k)
    prep = None
    if fa is not None:
        n_flows = len(fa)
        try:
            prep = Prepared.from_arrays(cluster, fa)
        except OverflowError:              # a grid beyond int64: the built schedule's exact timer instead
            prep = None
        del fa
    o, li, lat = latency_units(cluster, n_bytes)
    event = None
    if prep is not None and prep.exclusive_ok():
        try:
            event = prep.event_time(o, li, lat)
        except OverflowError:
            event = None
    if event is None:
        schedule = build_schedule(algo, cluster, k)
        return time_schedule(schedule, n_bytes), schedule.meta.get("algorithm", algo), len(schedule.flows), schedule
    rep = TimingReport(slot_time=prep.slot_time(), event_time=event,
                       t0=fault_free_optimum(cluster.p, cluster.g), lower_bound=_lower_bound(cluster),
                       capacity="exclusive", violation=None, n_bytes=n_bytes)
    return rep, "optcc", n_flows, None
