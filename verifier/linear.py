"""Hash-consed linear expressions over one piece's inputs, and symbolic execution of a piece.

A value is a linear combination Σ c_r·x_r of the ranks' inputs for the piece, stored once
as a canonical sparse coefficient tuple ((r, c), …) sorted by r, zero coefficients dropped,
and referred to by an integer id. Operations are memoised on ids, so a piece whose p ranks
pass the same partial sums around builds each distinct expression once.
"""
from __future__ import annotations

from collections import Counter
from typing import Protocol

from verifier.events import LAND, READ


def add_scaled(a: dict[int, int], coef: int, b: dict[int, int]) -> dict[int, int]:
    """Coefficients of a + coef·b, zero coefficients dropped (a and b are left unchanged)."""
    out = dict(a)
    for r, c in b.items():
        v = out.get(r, 0) + coef * c
        if v:
            out[r] = v
        else:
            out.pop(r, None)
    return out


class ValueTable(Protocol):
    """What execute_signature runs on: ExpressionTable here, verifier.determinism's TreeTable."""

    def unit(self, rank: int) -> int: ...
    def add(self, a: int, coef: int, b: int) -> int: ...
    def scale(self, a: int, coef: int) -> int: ...


class ExpressionTable:
    """Interned coefficient tuples; add/scale memoised on ids."""

    def __init__(self) -> None:
        self.ids: dict[tuple[tuple[int, int], ...], int] = {}
        self.coefs: list[dict[int, int]] = []
        self._add: dict[tuple[int, int, int], int] = {}
        self._scale: dict[tuple[int, int], int] = {}
        self._unit: dict[int, int] = {}

    def intern(self, coefs: dict[int, int]) -> int:
        key = tuple(sorted(coefs.items()))
        i = self.ids.get(key)
        if i is None:
            i = self.ids[key] = len(self.coefs)
            self.coefs.append(coefs)
        return i

    def unit(self, rank: int) -> int:
        i = self._unit.get(rank)
        if i is None:
            i = self._unit[rank] = self.intern({rank: 1})
        return i

    def add(self, a: int, coef: int, b: int) -> int:
        """Id of (a + coef·b)."""
        key = (a, coef, b)
        i = self._add.get(key)
        if i is None:
            i = self._add[key] = self.intern(add_scaled(self.coefs[a], coef, self.coefs[b]))
        return i

    def scale(self, a: int, coef: int) -> int:
        key = (a, coef)
        i = self._scale.get(key)
        if i is None:
            i = self._scale[key] = self.intern({r: coef * c for r, c in self.coefs[a].items()})
        return i

    def class_key(self, i: int, p: int) -> tuple[tuple[int, int], ...]:
        """The expression up to a permutation of the p ranks: its multiset of coefficients."""
        coefs = self.coefs[i]
        counts = Counter(coefs.values())
        zeros = p - len(coefs)
        if zeros:
            counts[0] += zeros
        return tuple(sorted(counts.items()))


def execute_signature(signature: tuple[tuple[int, ...], ...], table: ValueTable) -> dict[int, int]:
    """Run a piece signature (verifier.events.piece_signature); final expression id per rank label."""
    values: dict[int, int] = {}
    carried: list[int] = []
    for entry in signature:
        kind = entry[0]
        if kind == READ:
            a = entry[1]
            v = values.get(a)
            if v is None:
                v = values[a] = table.unit(a)
            carried.append(v)
        elif kind == LAND:
            _, fl, b, is_add, coef = entry
            if is_add:
                old = values.get(b)
                if old is None:
                    old = table.unit(b)
                values[b] = table.add(old, coef, carried[fl])
            else:
                values[b] = carried[fl]
        else:
            _, a, coef = entry
            v = values.get(a)
            if v is None:
                v = table.unit(a)
            values[a] = table.scale(v, coef)
    return values
