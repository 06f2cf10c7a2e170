"""Byte sizes as people type them: '8', '64K', '128M', '1G' (binary units, as nccl-tests' -b/-e).

The one parser of sizes: every size flag of the command line (--n, --size, --sizes, -b, -e) and
the benchmarks read sizes through `parse_bytes`."""
from __future__ import annotations

import re

from optcc.errors import OptccError

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_bytes(text: object, field: str) -> int:
    """'8', '64K', '128M', '1G' (binary units; a trailing B is allowed) -> a positive number of
    bytes; an int passes through. OptccError on `field` otherwise."""
    if isinstance(text, int) and not isinstance(text, bool):
        value = text
    else:
        m = re.fullmatch(r"\s*(\d+)\s*([KMGT]?)(?:i?B)?\s*", str(text), re.IGNORECASE)
        if not m:
            raise OptccError(field, f"expected a size like 8, 64K, 128M or 1G, got {text!r}")
        value = int(m.group(1)) * _UNITS[m.group(2).upper()]
    if value <= 0:
        raise OptccError(field, f"expected a positive size in bytes, got {text!r}")
    return value
