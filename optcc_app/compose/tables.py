"""Printing for people and programs: an aligned table (nccl-tests style) and strict JSON
(optcc.jsonout: Fractions as floats, never NaN/Infinity). Used by the CLI commands and the
benchmarks."""
from __future__ import annotations

import sys
from fractions import Fraction

from optcc.jsonout import dumps


def print_json(obj) -> None:
    """Strict JSON (optcc.jsonout: non-finite floats as strings, never NaN/Infinity)."""
    sys.stdout.write(dumps(obj, indent=2) + "\n")


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
