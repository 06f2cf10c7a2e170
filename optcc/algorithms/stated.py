"""`states_slot_time`: a generator's Schedule states its closed-form slot time (Schedule.stated_slot_time).

The verifier's `time` property proves a schedule ends exactly at the time it states, so the
stated time must come from the construction's own formula (never from timing the schedule it
states it for). Decorating a generator with its formula makes every direct call state it;
optcc.algorithms.build_schedule states the registry record's formula for the rest. Where the
formula refuses a cluster (an OptccError: no closed form there), the schedule states none.
"""
from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from fractions import Fraction
from types import FunctionType
from typing import TYPE_CHECKING, Any, ParamSpec, cast

from optcc.errors import OptccError

if TYPE_CHECKING:
    from optcc.schedule import Schedule

_P = ParamSpec("_P")


def state(schedule: Schedule, formula: Callable[..., Fraction], *args: Any, **kwargs: Any) -> Schedule:
    """Set `schedule`'s stated slot time to `formula(*args, **kwargs)` unless it states one
    already; none where the formula refuses (OptccError: no closed form on this cluster)."""
    if schedule.stated_slot_time is None:
        try:
            schedule.stated_slot_time = formula(*args, **kwargs)
        except OptccError:
            pass
    return schedule


def states_slot_time(slot_time_of: str) -> Callable[[Callable[_P, Schedule]], Callable[_P, Schedule]]:
    """Decorator: `build(cluster, …)`'s schedule states `slot_time_of(cluster, …)` (the same
    arguments, defaults as `build` has them); `slot_time_of` names a function of build's module
    (looked up at call time, so it may be defined below the generator)."""
    def wrap(build: Callable[_P, Schedule]) -> Callable[_P, Schedule]:
        signature = inspect.signature(build)

        @functools.wraps(build)
        def generator(*args: _P.args, **kwargs: _P.kwargs) -> Schedule:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            module = cast(FunctionType, build).__globals__
            return state(build(*args, **kwargs), module[slot_time_of], *bound.args, **bound.kwargs)
        return generator
    return wrap
