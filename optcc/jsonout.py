"""The one JSON writer for everything optcc prints or saves: strict JSON, never NaN/Infinity.

`json.dumps` writes the non-standard tokens NaN/Infinity by default, which strict parsers
(JavaScript, jq, Go) reject. Here a non-finite float becomes the *string* "nan", "inf" or
"-inf" (the value stays visible; a consumer doing arithmetic fails loudly instead of silently),
a Fraction becomes a float (or its string when it does not fit one), and encoding runs with
allow_nan=False as a backstop. docs/verifier.md ("JSON output") states this convention.
"""
from __future__ import annotations

import json
import math
from fractions import Fraction
from typing import Any


def jsonable(obj: object) -> Any:
    """A copy of obj with non-finite floats as strings and Fractions as floats (recursively)."""
    if isinstance(obj, bool) or obj is None or isinstance(obj, (int, str)):
        return obj
    if isinstance(obj, float):
        if math.isfinite(obj):
            return obj
        return "nan" if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    if isinstance(obj, Fraction):
        try:
            return jsonable(float(obj))
        except OverflowError:
            return str(obj)
    if isinstance(obj, dict):
        return {(k if isinstance(k, str) else str(k)): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if hasattr(obj, "item") and callable(obj.item):       # numpy / torch scalars
        return jsonable(obj.item())
    raise TypeError(f"not JSON serializable: {type(obj).__name__}")


def dumps(obj: object, **kw: Any) -> str:
    """Strict JSON text of obj (see the module docstring); keyword arguments go to json.dumps."""
    return json.dumps(jsonable(obj), allow_nan=False, **kw)
