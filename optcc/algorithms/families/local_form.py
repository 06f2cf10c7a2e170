"""What a proved generator's rank-local enumeration is made of (`LocalForm`, its `Branch`es): the
data each construction's folder gives in its `local.py` (optcc.algorithms.ring.local,
optcc.algorithms.single.local) and optcc.algorithms.families.local evaluates."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

from optcc.algorithms.families import Arith, Family, Params, Term


@dataclass(frozen=True)
class Branch:
    """Flows of `family` whose `end` ("src" or "dst") is node r: `solved` is the position of the
    index `solve(A, P, r, *free)` gives, the other indices run over `ranges`; `applies(A, P, r)`
    says for which nodes the branch has flows at all."""

    family: Family
    end: str
    solved: int | None                   # None: every index is free (the node is fixed, e.g. S)
    solve: Callable[..., tuple[Term, ...]]
    applies: Callable[..., Term]


@dataclass(frozen=True)
class LocalForm:
    """A generator's rank-local enumeration: branches, loop ranges, node <-> rank and clock."""

    name: str
    families: tuple[Family, ...]
    branches: tuple[Branch, ...]
    ranges: Callable[[Params], dict[str, tuple[tuple[int, int], ...]]]  # P -> {family name: ((lo, hi), ...)}
    nodes: Callable[[Params], Term]      # P -> number of nodes                   (inclusive, per index)
    node_of: Callable[[Params, Term], Term]  # (P, rank) -> node
    rank_of: Callable[[Params, Term], Term]  # (P, node array) -> rank array
    piece_of: Callable[[Params, tuple[Term, ...]], Term]  # (P, key arrays) -> piece index array
    clock: Callable[[Params], tuple[tuple[Fraction, ...], tuple[Fraction, ...]]]  # (P) -> (origins, units)
    pieces: Callable[[Params], list[Fraction]]  # (P) -> piece sizes (n/B)       per phase (n/B)
    finish: Callable[[Params], Fraction]  # (P) -> the construction's finish (n/B): every start lies before it
    terms_params: Callable[[Params], Params] = lambda P: P  # P the formulas are evaluated at (the ring's starts
    #                                       and nodes do not depend on ℓ, s; its durations do)


def every(A: Arith, P: Params, r: Term, *free: Term) -> tuple[Term, ...]:
    return free


def always(A: Arith, P: Params, r: Term) -> Term:
    return True
