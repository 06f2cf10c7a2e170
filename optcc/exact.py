"""Exact numbers: parse '8/7', '1.5', 2 into Fractions and write them back as short strings."""
from __future__ import annotations

import math
from fractions import Fraction

from optcc.errors import OptccError


def parse_fraction(value, field: str) -> Fraction:
    """Parse an int, a decimal string, an exact fraction string ('8/7') or a finite float.

    Floats are taken at their exact binary value only when they are integral; otherwise the
    shortest decimal repr is used, so that 1.5 stays 3/2 and 1.14 stays 57/50.
    """
    if isinstance(value, bool):
        raise OptccError(field, f"expected a number, got {value!r}")
    if isinstance(value, Fraction):
        return value
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise OptccError(field, f"expected a finite number, got {value!r}")
        return Fraction(repr(value))
    if isinstance(value, str):
        text = value.strip()
        if text.lower() in {"nan", "inf", "-inf", "+inf", "infinity", "-infinity"}:
            raise OptccError(field, f"expected a finite number, got {value!r}")
        try:
            return Fraction(text)
        except (ValueError, ZeroDivisionError):
            raise OptccError(field, f"expected a number like 2, 1.5 or 8/7, got {value!r}") from None
    raise OptccError(field, f"expected a number, got {type(value).__name__} {value!r}")


def fraction_to_json(x: Fraction):
    """Integers as JSON ints, everything else as an exact 'num/den' string."""
    x = Fraction(x)
    if x.denominator == 1:
        return x.numerator
    return f"{x.numerator}/{x.denominator}"
