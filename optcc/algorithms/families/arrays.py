"""A family's flows as numpy index arrays: the same formulas (optcc.algorithms.families), run once
on whole index ranges instead of once per flow, so a generator's flows at p = 1024 cost a few
int64 arrays rather than tens of millions of Flow objects.

`NP` is the arithmetic namespace on numpy arrays (ite → where, mod → np.mod); the formulas are
unchanged, so the arrays are the enumeration `optcc_flows` makes (tested flow for flow in
tests/optcc/test_flow_arrays.py). Starts are integers on one grid (time = start / scale).
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from optcc.algorithms.families import INT, Family, Params, Term, _IntArith

INT64_SAFE = 2**62


class _NumpyArith(_IntArith):
    """The arithmetic namespace on numpy int64 arrays (and Python scalars where a term is one);
    mul and odd are INT's, which numpy's operators already apply elementwise."""

    @staticmethod
    def mod(x: Term, n: Term, qlo: int, qhi: int) -> Term:
        return np.mod(x, n)

    @staticmethod
    def ite(c: Term, a: Term, b: Term) -> Term:
        if isinstance(c, (bool, np.bool_)):
            return a if c else b
        return np.where(c, a, b)

    @staticmethod
    def And(*cs: Term) -> Term:
        return np.logical_and.reduce([np.asarray(c) for c in cs])

    @staticmethod
    def Or(*cs: Term) -> Term:
        return np.logical_or.reduce([np.asarray(c) for c in cs])

    @staticmethod
    def Not(c: Term) -> Term:
        return np.logical_not(c)

    @staticmethod
    def div(a: Term, b: Term) -> Term:
        if isinstance(b, int) and b == 1:
            return a
        if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
            raise TypeError("families.arrays: a division of index arrays has no exact int64 form")
        return _IntArith.div(a, b)


NP = _NumpyArith()


def _scalar(x: Term) -> bool:
    return not isinstance(x, np.ndarray)


def family_arrays(fam: Family, P: Params, ranges: tuple[range, ...]) -> dict[str, Any] | None:
    """The flows of `fam` whose indices lie in `ranges` and satisfy its domain, as arrays:
    src, dst (nodes), piece (the key's components), box (int64) and the scalar terms
    (box_len, offset, dur, phase). None when no index passes."""
    grids = np.meshgrid(*[np.arange(r.start, r.stop, dtype=np.int64) for r in ranges], indexing="ij")
    idx = [g.reshape(-1) for g in grids]
    if not idx or idx[0].size == 0:
        return None
    keep = np.ones(idx[0].size, dtype=bool)
    for cond in fam.domain(NP, P, *idx):
        keep &= np.broadcast_to(np.asarray(cond, dtype=bool), keep.shape)
    if not keep.any():
        return None
    idx = [a[keep] for a in idx]
    T = fam.terms(NP, P, *idx)
    m = idx[0].size
    for name in ("offset", "dur", "phase", "box_len"):
        if not _scalar(getattr(T, name)):
            raise TypeError(f"families.arrays: {fam.name}.{name} varies per flow; only box, nodes and piece may")

    def full(v: Term) -> npt.NDArray[np.int64]:
        return np.broadcast_to(np.asarray(v, dtype=np.int64), (m,))

    return {"src": full(T.src), "dst": full(T.dst), "piece": tuple(full(c) for c in T.piece),
            "box": full(T.box), "offset": Fraction(T.offset), "dur": Fraction(T.dur), "phase": int(T.phase),
            "op": fam.op}


@dataclass
class FlowArrays:
    """A schedule's flows as arrays (all NIC flows at rate 1): ranks and piece index (int32),
    start (int64) on the integer grid `scale` (time = start / scale, n/B); `pieces` are the
    piece sizes (n/B)."""

    pieces: list[Fraction]
    src: npt.NDArray[np.int32]
    dst: npt.NDArray[np.int32]
    piece: npt.NDArray[np.int32]
    start: npt.NDArray[np.int64]
    scale: int

    def __len__(self) -> int:
        return int(self.src.size)


def optcc_flow_arrays(p: int, k: int, s: int, ell: Fraction) -> FlowArrays:
    """The flows of `families.optcc.optcc_flows(p, k, s, ell)` (p ≥ 3) as FlowArrays: every family
    on the index ranges of its loops, starts origin[phase] + (box + offset)·unit[phase]."""
    from optcc.algorithms.single import families as F
    ell = Fraction(ell)
    P = Params(p, k, ell, s)
    H = p - 1
    origin, unit = F.phase_clock(INT, P)
    pro, rs, up, down, p2p_up, p2p_down, ag, epi = F.FAMILIES
    plan = [(pro, (range(H - 1), range(H))), (rs, (range(k), range(H), range(1, H))),
            (up, (range(k), range(H))), (down, (range(k), range(H))),
            (p2p_up, (range(k), range(H))), (p2p_down, (range(k), range(H))),
            (ag, (range(k), range(H), range(H - 1))), (epi, (range(H - 1), range(H)))]
    parts: list[tuple[Any, ...]] = []  # (phase, offset, box, src, dst, piece), int32 each: a part is compacted when made
    for fam, r in plan:
        for chunk in _chunks(r):
            a = family_arrays(fam, P, chunk)
            if a is None:
                continue
            piece = np.asarray(F.piece_index(NP, P, a["piece"]))
            ranks = [np.asarray(F.node_rank(NP, P, node)).astype(np.int32) for node in (a["src"], a["dst"])]
            parts.append((a["phase"], a["offset"], a["box"].astype(np.int32), *ranks, piece.astype(np.int32)))
    clock = PhaseGrid([(ph, offset) for ph, offset, *_ in parts], origin, unit)
    n = sum(part[2].size for part in parts)
    src, dst, piece = (np.empty(n, dtype=np.int32) for _ in range(3))
    start = np.empty(n, dtype=np.int64)
    at = 0
    parts.reverse()
    while parts:                                   # fill the result, freeing each part as it is copied
        ph, offset, box, s_, d_, pc = parts.pop()
        base, step = clock.terms(ph, offset, int(box.max()))
        m = box.size
        np.multiply(box, step, out=start[at:at + m], dtype=np.int64)
        start[at:at + m] += base
        src[at:at + m], dst[at:at + m], piece[at:at + m] = s_, d_, pc
        at += m
    return FlowArrays(F.piece_sizes(P), src, dst, piece, start, clock.scale)


class PhaseGrid:
    """The integer grid of a family enumeration's starts: a flow of phase ph, offset `offset` in
    box `box` starts at origin[ph] + (box + offset)·unit[ph] (n/B); `scale` makes every such
    start of the given (phase, offset) pairs an integer (time = value / scale)."""

    def __init__(self, phase_offsets: Iterable[tuple[int, Fraction]], origin: Sequence[Fraction],
                 unit: Sequence[Fraction]) -> None:
        self.origin, self.unit = origin, unit
        self.scale = 1
        for ph, offset in phase_offsets:
            for x in (origin[ph], unit[ph], offset * unit[ph]):
                self.scale = math.lcm(self.scale, Fraction(x).denominator)

    def _int(self, x: Fraction | int) -> int:
        x = Fraction(x)
        return x.numerator * (self.scale // x.denominator)

    def terms(self, ph: int, offset: Fraction, box_max: int) -> tuple[int, int]:
        """(base, step) with start = base + box·step on the grid, for boxes up to box_max;
        OverflowError where that start would be beyond int64."""
        o_i, u_i, off_i = self._int(self.origin[ph]), self._int(self.unit[ph]), self._int(offset * self.unit[ph])
        if o_i + (box_max + 1) * u_i + off_i >= INT64_SAFE:
            raise OverflowError("families.arrays: starts beyond int64 on this grid")
        return o_i + off_i, u_i


CHUNK = 1 << 21      # index tuples per family_arrays call (bounds the temporaries, not the result)


def _chunks(ranges: tuple[range, ...]) -> Iterator[tuple[range, ...]]:
    """`ranges` split along the first index so that each part has ≤ CHUNK tuples."""
    rest = math.prod(len(r) for r in ranges[1:])
    step = max(1, CHUNK // max(rest, 1))
    first = ranges[0]
    for a in range(first.start, first.stop, step):
        yield (range(a, min(a + step, first.stop)),) + tuple(ranges[1:])
