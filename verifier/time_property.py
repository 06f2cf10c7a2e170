"""Property "time": the schedule ends when `optcc time` says, and not below the lower bound.

- finish = the last instant a value changes (the latest landing end or local op): that is
  optcc.timing.slot_time, what `optcc time` reports as "slot time";
- it must equal meta["slot_time"] when the schedule states one;
- it must not be below bounds.closed_form.lower_bound(cluster): a schedule faster than a
  proven bound means a bug in the schedule, the timing model or the bound, so this fails
  loudly naming both numbers. When no bound is known for the cluster this is said in
  `note` and only the first two checks apply.
"""
from __future__ import annotations

from bounds.closed_form import lower_bound
from optcc.errors import OptccError
from optcc.exact import parse_fraction
from optcc.timing import slot_time


def check_time(schedule, grid):
    """Return (ok, counterexample or None, facts dict)."""
    finish = slot_time(schedule, grid)
    facts = {"finish": finish, "slot_time": finish}
    try:
        bound = lower_bound(schedule.cluster)
    except OptccError as e:
        bound = None
        facts["note"] = f"no lower bound is known for this cluster ({e.message}); time checked against slot_time only"
    facts["lower_bound"] = bound
    stated = schedule.meta.get("slot_time")
    if stated is not None:
        try:
            stated_value = parse_fraction(stated, "meta.slot_time")
        except OptccError:
            stated_value = None
        if stated_value != finish:
            return False, {"property": "time", "finish": str(finish), "stated": str(stated),
                           "message": f"meta.slot_time states {stated} n/B but the schedule ends at {finish} n/B"}, facts
    if bound is not None and finish < bound:
        return False, {"property": "time", "finish": str(finish), "lower_bound": str(bound),
                       "message": f"SCHEDULE BEATS THE LOWER BOUND: it ends at {finish} ≈ {float(finish):.6g} n/B, "
                                  f"below the lower bound {bound} ≈ {float(bound):.6g} n/B for "
                                  f"{schedule.cluster.describe()} — a bug in the schedule, the timing "
                                  f"model or the bound"}, facts
    return True, None, facts
