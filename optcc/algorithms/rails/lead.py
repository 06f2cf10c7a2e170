"""The NVLink lead's bisection, shared by optcc_rails' two layouts of the same passes (the Python
loop in rails.build and the numpy passes in rails.layout)."""
from __future__ import annotations

from collections.abc import Callable

LEAD_STEPS = 16         # halvings of the lead's bisection (derived: the plan's grid holds 2^LEAD_STEPS)


def bisect_lead(hi: int, need: Callable[[int], int], steps: int) -> int:
    """`steps` halvings of [0, hi] keeping need(hi) ≤ hi (`_smallest_lead`'s rule; need does not
    grow with the lead). Every midpoint is exact: the grid holds 2^steps."""
    lo = 0
    for _ in range(steps):
        assert (lo + hi) % 2 == 0, "the grid holds 2^LEAD_STEPS"
        mid = (lo + hi) // 2
        if need(mid) <= mid:
            hi = mid
        else:
            lo = mid
    return hi
