"""Property "time": the schedule ends at the time its generator states, and not below the lower bound.

- finish = the last instant a value changes (the latest landing end or local op): that is
  optcc.timing.slot_time, what `optcc time` reports as "slot time";
- it must equal the schedule's stated slot time (`Schedule.stated_slot_time`, the closed form
  its generator wrote; JSON "slot_time");
- it must not be below bounds.closed_form.lower_bound(cluster): a schedule faster than a
  proven bound means a bug in the schedule, the timing model or the bound, so this fails
  loudly naming both numbers. When no bound is known for the cluster this is said in
  `note` and only the first two checks apply.

A schedule that states no slot time has nothing to prove its time against: `check_time` then
returns ok = None ("not stated": reported, never proved), unless it ends below the bound.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bounds.closed_form import lower_bound
from optcc.errors import OptccError
from optcc.timing import slot_time

if TYPE_CHECKING:
    from optcc.schedule import Schedule
    from optcc.timing import IntegerTimes

NOT_STATED = "not stated"


def check_time(schedule: Schedule, grid: IntegerTimes) -> tuple[bool | None, dict[str, Any] | None, dict[str, Any]]:
    """Return (ok, counterexample or None, facts dict); ok is None where no slot time is stated."""
    finish = slot_time(schedule, grid)
    stated = schedule.stated_slot_time
    facts: dict[str, Any] = {"finish": finish, "slot_time": finish, "stated_slot_time": NOT_STATED if stated is None else stated}
    try:
        bound = lower_bound(schedule.cluster)
    except OptccError as e:
        bound = None
        facts["note"] = f"no lower bound is known for this cluster ({e.message}); time checked against slot_time only"
    facts["lower_bound"] = bound
    if stated is not None and stated != finish:
        return False, {"property": "time", "finish": str(finish), "stated": str(stated),
                       "message": f"the schedule states slot time {stated} n/B but ends at {finish} n/B"}, facts
    if bound is not None and finish < bound:
        return False, {"property": "time", "finish": str(finish), "lower_bound": str(bound),
                       "message": f"SCHEDULE BEATS THE LOWER BOUND: it ends at {finish} ≈ {float(finish):.6g} n/B, "
                                  f"below the lower bound {bound} ≈ {float(bound):.6g} n/B for "
                                  f"{schedule.cluster.describe()} — a bug in the schedule, the timing "
                                  f"model or the bound"}, facts
    return (None if stated is None else True), None, facts
