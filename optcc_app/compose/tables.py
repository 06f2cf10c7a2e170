"""Printing for people and programs: an aligned table (nccl-tests style) and strict JSON
(optcc.jsonout: Fractions as floats, never NaN/Infinity). Used by the CLI commands and the
benchmarks."""
from __future__ import annotations

import sys

from optcc.jsonout import dumps
from optcc.text_table import table_lines


def print_json(obj) -> None:
    """Strict JSON (optcc.jsonout: non-finite floats as strings, never NaN/Infinity)."""
    sys.stdout.write(dumps(obj, indent=2) + "\n")


def print_table(headers, rows, file=None) -> None:
    """A plain aligned table, right-aligned numbers, as nccl-tests prints (optcc.text_table)."""
    print("\n".join(table_lines(headers, rows)), file=file or sys.stdout)
