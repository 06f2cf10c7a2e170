"""The verdict row of every paper check, and the tolerances fixed before any number was
computed (see paper_checks.claims)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

# ---- tolerances (stated before computing; see module docstring) --------------------------
PERCENT_ROUNDING_PP = 0.5        # "6%", "57%": the paper rounds to whole percents
FIT_INTERCEPT_MAX = 0.002        # O(1/p): fitted overhead c0 + c1/p must have |c0| ≤ 0.2%
FIT_R2_MIN = 0.99                # … and explain the data (R² of the fit on [8, 1024])
NOT_VANISHING_MIN = 0.05         # "the opposite" (ℓ = 3): the fitted constant overhead c0 ≥ 5%
R2CCL_SUBPIECES = (4, 16, 64)    # sub-pieces of the R2CCL schedule's chain broadcast

PASS, FAIL, OPEN = "PASS", "FAIL", "OPEN"
# issue 24: `undecided` = only an upper bound is known and it is over the tolerance (a bound may
# PASS a point, never FAIL it); `reading` = the row tests a reading the paper does not state.
UNDECIDED, READING = "undecided", "reading"


@dataclass
class Row:
    id: str
    claim: str
    location: str
    paper: str
    ours: str
    model: str
    tolerance: str
    verdict: str
    paper_value: float | None = None
    our_value: float | None = None
    details: dict = field(default_factory=dict)
    verdicts: dict = field(default_factory=dict)   # per latency preset (paper_checks.per_model)
    verdicts_by_bandwidth: dict = field(default_factory=dict)   # {"50": {preset: verdict}, "100": …} (GB/s)
    reading: str = ""                               # why the verdict is `reading` (one sentence)
    # the event model's port discipline its verdict rests on (optcc.timing.DISCIPLINES); rows
    # without an event time hold under every port rule
    discipline: str = "none (no event time: holds under every port discipline)"

    def to_json(self) -> dict:
        return asdict(self)


def _pct(x) -> str:
    return f"{100 * float(x):.2f}%"


def _within_percent(ours_fraction, limit_percent) -> bool:
    return 100 * float(ours_fraction) <= limit_percent + PERCENT_ROUNDING_PP
