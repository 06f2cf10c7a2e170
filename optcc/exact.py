"""Exact numbers: parse '8/7', '1.5', 2 into Fractions and write them back as short strings."""
from __future__ import annotations

import math
import re
from fractions import Fraction

from optcc.errors import OptccError


def parse_fraction(value: object, field: str) -> Fraction:
    """Parse an int, a decimal string, an exact fraction string ('8/7') or a finite float.

    Floats are taken at their exact binary value only when they are integral; otherwise the
    shortest decimal repr is used, so that 1.5 stays 3/2 and 1.14 stays 57/50.
    Sizes are bounded (MAX_DIGITS digits in numerator and denominator, text of at most
    MAX_TEXT characters, exponents checked before they are expanded): '1e999999999' would
    otherwise build a billion-digit integer and every later step would hang on it.
    """
    if isinstance(value, bool):
        raise OptccError(field, f"expected a number, got {value!r}")
    if isinstance(value, Fraction):
        return value
    if isinstance(value, int):
        return _bounded(Fraction(value), field, value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise OptccError(field, f"expected a finite number, got {value!r}")
        return _bounded(Fraction(repr(value)), field, value)
    if isinstance(value, str):
        text = value.strip()
        if text.lower() in {"nan", "inf", "-inf", "+inf", "infinity", "-infinity"}:
            raise OptccError(field, f"expected a finite number, got {value!r}")
        if len(text) > MAX_TEXT:
            raise OptccError(field, f"expected a number of at most {MAX_TEXT} characters, got {len(text)}")
        exponent = _EXPONENT.search(text)
        if exponent and abs(int(exponent.group(1))) > MAX_DIGITS:
            raise OptccError(field, f"exponent {exponent.group(1)} is out of range (at most ±{MAX_DIGITS})")
        try:
            return _bounded(Fraction(text), field, value)
        except (ValueError, ZeroDivisionError):
            raise OptccError(field, f"expected a number like 2, 1.5 or 8/7, got {value!r}") from None
    raise OptccError(field, f"expected a number, got {type(value).__name__} {value!r}")


MAX_DIGITS = 60      # digits of numerator / denominator accepted on input (derived: far above
MAX_TEXT = 200       # any real parameter, far below what slows exact arithmetic down)
_EXPONENT = re.compile(r"[eE]\s*([+-]?\d+)")
_LIMIT = 10**MAX_DIGITS


def _bounded(x: Fraction, field: str, value: object) -> Fraction:
    if abs(x.numerator) >= _LIMIT or x.denominator >= _LIMIT:
        shown = value if len(str(value)) <= 40 else str(value)[:37] + "..."
        raise OptccError(field, f"{shown!r} is too large or too precise (at most {MAX_DIGITS} digits "
                                f"in numerator and denominator)")
    return x


def show(x: object) -> str:
    """A value for a message: Fractions as '8/7' or '-1' (not Fraction(8, 7)), long ones shortened."""
    if isinstance(x, Fraction):
        text = str(x)
        return text if len(text) <= 40 else f"≈{float(x):.6g}"
    return repr(x)


def fraction_to_json(x: Fraction) -> int | str:
    """Integers as JSON ints, everything else as an exact 'num/den' string."""
    if type(x) is not Fraction:
        x = Fraction(x)
    if x.denominator == 1:
        return x.numerator
    return f"{x.numerator}/{x.denominator}"
