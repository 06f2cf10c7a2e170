"""A Schedule's timing report: slot time, event time, capacity check (optcc.timing) beside T0
and the cluster's lower bound (bounds.closed_form), so that every time can be read as a ratio."""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from bounds.closed_form import fault_free_optimum, lower_bound
from optcc.errors import OptccError
from optcc.latency import units as latency_units
from optcc.schedule import Schedule
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


def time_schedule(schedule: Schedule, n_bytes: int = 2**30) -> TimingReport:
    """Slot time, event time (the cluster's o, Li, L at message size n), T0, lower bound, capacity check."""
    c = schedule.cluster
    grid = IntegerTimes(schedule)
    model = capacity_model(schedule)
    violation = check_capacity(schedule, model, grid)
    o, li, lat = latency_units(c, n_bytes)
    try:
        lb = lower_bound(c)
    except OptccError:
        lb = None
    return TimingReport(
        slot_time=slot_time(schedule, grid),
        event_time=event_time(schedule, o, grid, li, lat),
        t0=fault_free_optimum(c.p, c.g),
        lower_bound=lb,
        capacity=model,
        violation=violation,
        n_bytes=n_bytes,
    )
