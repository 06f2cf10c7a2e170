"""Flow families: a generator's flows written once as index formulas over symbolic parameters.

A family is a set of flows indexed by a few integers (segment, hop, node, ...). Its formulas
take an arithmetic namespace `A` as their first argument, so the same code runs on Python
ints/Fractions (`INT`, the enumeration that builds schedules) and on solver terms
(verifier.parametric builds one for Z3; the core never imports a solver). Times are stated as
integer *slot boxes*: a flow occupies box [box, box + box_len) in units of the family's slot
length, starts `offset` into its box and lasts `dur` (both in slot units, offset + dur ≤
box_len is an obligation). Port exclusivity is then a statement about integers.

`A.mod(x, n, qlo, qhi)` is x mod n for a caller who promises qlo·n ≤ x < (qhi+1)·n; a solver
namespace writes it as an if-then-else over that bounded quotient and proves the promise
separately (docs/parametric.md).
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

Term = Any
"""A value of the formulas: an int or Fraction under INT, a numpy array under arrays.NP, a solver
term under verifier.parametric.arith (dynamic by design: one formula, three arithmetics)."""


class Arith(Protocol):
    """What the formulas use of an arithmetic namespace `A` (INT, arrays.NP, the solvers')."""

    def mod(self, x: Term, n: Term, qlo: int, qhi: int) -> Term: ...
    def ite(self, c: Term, a: Term, b: Term) -> Term: ...
    def And(self, *cs: Term) -> Term: ...
    def Or(self, *cs: Term) -> Term: ...
    def Not(self, c: Term) -> Term: ...
    def mul(self, a: Term, b: Term) -> Term: ...
    def odd(self, x: Term) -> Term: ...
    def div(self, a: Term, b: Term) -> Term: ...
    def real(self, x: Term) -> Term: ...


class _IntArith:
    """The arithmetic namespace on Python ints and Fractions (exact enumeration)."""

    @staticmethod
    def mod(x: Term, n: Term, qlo: int, qhi: int) -> Term:
        return x % n

    @staticmethod
    def ite(c: Term, a: Term, b: Term) -> Term:
        return a if c else b

    @staticmethod
    def And(*cs: Term) -> Term:
        return all(cs)

    @staticmethod
    def Or(*cs: Term) -> Term:
        return any(cs)

    @staticmethod
    def Not(c: Term) -> Term:
        return not c

    @staticmethod
    def mul(a: Term, b: Term) -> Term:
        return a * b

    @staticmethod
    def odd(x: Term) -> Term:
        return x % 2 == 1

    @staticmethod
    def div(a: Term, b: Term) -> Term:
        if type(a) is int and type(b) is int and b and a % b == 0:
            return a // b                  # exact; an int, not a Fraction, where it is one
        return a if b == 1 else Fraction(a) / b

    @staticmethod
    def real(x: Term) -> Term:
        return Fraction(x)


INT = _IntArith()


class Terms(NamedTuple):
    """One flow of a family, as terms: nodes, piece key, op, slot box and placement in it."""

    src: Any
    dst: Any
    piece: tuple[Any, ...]  # a key; the family's `piece_index` maps it to the schedule's index
    box: Any              # first slot of the box (integer)
    box_len: Any          # slots in the box (integer)
    offset: Any           # start within the box, slot units (real)
    dur: Any              # duration, slot units (real)
    phase: Any = 0        # boxes of a later phase start after every flow of an earlier one ends


@dataclass(frozen=True)
class Family:
    """`domain(A, P, *idx)` lists the conditions on the indices; `terms(A, P, *idx)` -> Terms."""

    name: str
    index: tuple[str, ...]
    op: str
    domain: Callable[..., list[Term]]
    terms: Callable[..., Terms]


class Params(NamedTuple):
    """The symbolic parameters every family sees: p GPUs, k segments, slowdown ℓ of rank s."""

    p: Any
    k: Any
    ell: Any
    s: Any
