"""An aligned text table (nccl-tests style: numbers right-aligned, text left), as lines: the one
formatter behind optcc_app.compose.tables.print_table and what the runner's probe prints
(gpu_runner sits below the application, so the formatter lives in the core)."""
from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any


def _is_number(v: Any) -> bool:
    if v is None or isinstance(v, (int, float, Fraction)):
        return True
    try:
        float(str(v))
        return True
    except ValueError:
        return str(v) in {"-", ""}


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, Fraction):
        v = float(v)
    if isinstance(v, float):
        return f"{v:.4f}"
    return str(v)


def table_lines(headers: Sequence[Any], rows: Sequence[Sequence[Any]]) -> list[str]:
    """The table's lines: header, then rows; a column right-aligned when every row's cell in it
    reads as a number (the first column is always left-aligned)."""
    cells = [[str(h) for h in headers]] + [[_cell(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    numeric = [i > 0 and all(_is_number(row[i]) for row in rows) for i in range(len(headers))]
    return ["  ".join(c.rjust(w) if numeric[i] else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()
            for r in cells]
