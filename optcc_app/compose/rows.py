"""One row of every comparison the tool prints (`optcc compare`, `optcc demo`): a time in n/B
beside T0 and the lower bound, and how that time was obtained.

A row is a JSON-ready dict with one key order: time, [seconds], ratio_to_t0,
ratio_to_lower_bound, then the row's own fields (proved, source, note, ...). A ratio is None
where there is no time or no reference (a lower bound we do not know, or T0 = 0 on one server).
"""
from __future__ import annotations

from fractions import Fraction

NO_SECONDS = object()    # the row has no seconds column (compare); None means "no number" (demo)


def ratio(time_units, reference) -> float | None:
    """time / reference as a float, None without a time or a (nonzero) reference."""
    if time_units is None or not reference:
        return None
    return float(time_units / reference)


def row(time_units: Fraction | None, t0: Fraction | None, lower_bound: Fraction | None,
        seconds=NO_SECONDS, **fields) -> dict:
    """The row of one time (units of n/B, None when there is no number) and its fields."""
    out = {"time": None if time_units is None else float(time_units)}
    if seconds is not NO_SECONDS:
        out["seconds"] = seconds
    out["ratio_to_t0"] = ratio(time_units, t0)
    out["ratio_to_lower_bound"] = ratio(time_units, lower_bound)
    out.update(fields)
    return out
