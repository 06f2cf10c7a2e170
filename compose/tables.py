"""Printing for people and programs: an aligned table (nccl-tests style) and JSON with exact
Fractions written as floats. Used by the CLI commands and the benchmarks."""
from __future__ import annotations

import json
import sys
from fractions import Fraction


def print_json(obj) -> None:
    json.dump(obj, sys.stdout, indent=2, default=_json_default)
    sys.stdout.write("\n")


def _json_default(x):
    if isinstance(x, Fraction):
        return float(x)
    raise TypeError(f"not JSON serializable: {type(x).__name__}")


def print_table(headers, rows, file=None) -> None:
    """A plain aligned table, right-aligned numbers, as nccl-tests prints."""
    file = file or sys.stdout
    cells = [[str(h) for h in headers]] + [[_cell(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    numeric = [i > 0 and all(_is_number(row[i]) for row in rows) for i in range(len(headers))]
    for r in cells:
        print("  ".join(c.rjust(w) if numeric[i] else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip(),
              file=file)


def _is_number(v) -> bool:
    if v is None or isinstance(v, (int, float, Fraction)):
        return True
    try:
        float(str(v))
        return True
    except ValueError:
        return str(v) in {"-", ""}


def _cell(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, Fraction):
        v = float(v)
    if isinstance(v, float):
        return f"{v:.4f}"
    return str(v)
