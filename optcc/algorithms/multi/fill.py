"""Bubble filling of multi-straggler OptCC (Figure 7's idea, our layout; derived,
docs/optcc_multi.md "Fill"): extra point-to-point pieces rooted at the stragglers that use the
straggler windows' remainders when ℓ < 2.

- `chain_fill_plan`: m ≥ 3 and the m = 2 coincide rotation; neighbouring stragglers exchange
  in the window both idle in.
- `relay_fill_flows`: m = 2, H = 2 (the stragglers are never idle together), the
  straggler–straggler parts relayed through the idle straggler, sizes from `fill_coefs`.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import NamedTuple

from optcc.algorithms.multi.drain import nofill_end
from optcc.algorithms.multi.pattern import Pattern
from optcc.schedule import Flow


@dataclass(frozen=True)
class FillNode:
    """One end of a fill flow: straggler i (in sorted order) or healthy ring node a."""

    straggler: bool
    index: int

    def rank(self, healthy: list[int], stragglers: list[tuple[int, Fraction]]) -> int:
        return stragglers[self.index][0] if self.straggler else healthy[self.index]


@dataclass(frozen=True)
class FillEvent:
    """A flow of piece π = 0 rooted at straggler `root`; times in δ within window starts 2μ·window."""

    root: int
    src: FillNode
    dst: FillNode
    op: str
    window: int
    offset: Fraction
    duration: Fraction


class ChainFill(NamedTuple):
    sizes: list[Fraction]      # x_r in δ, per root straggler r
    events: list[FillEvent]    # the flows of piece π = 0
    pieces: int                # n: periods π = 0..n−1 that carry a piece


@dataclass(frozen=True)
class SlotGrid:
    """The schedule's clock: period L slots, shard δ = d, at(slot) = that slot's start."""

    L: int
    d: Fraction
    at: Callable[[int], Fraction]


def fill_coefs(H: int, k: int, ells: list[Fraction], spread: int = 1) -> tuple[Fraction, Fraction]:
    """(c0, c1): sizes of the straggler-rooted relay-fill pieces per period, in shards δ (m = 2 only).

    Derived (docs/optcc_multi.md): c0 = (2μ − ℓ1)/ℓ1 fills straggler 0's window remainder;
    straggler 1's piece is relayed through straggler 0 in window H, hence the ℓ1 in
    c1 = min(2μ − ℓ2, ℓ2)/ℓ1; μ = max(1, ℓ1/2) = λ/δ.
    """
    if len(ells) != 2 or H < 2 or k < 2 or Pattern(H, 2, spread).coincide:
        return Fraction(0), Fraction(0)
    l0, l1 = ells
    mu = max(Fraction(1), l0 / 2)
    return (2 * mu - l0) / l0, min(2 * mu - l1, l1) / l0


def chain_fill_plan(H: int, k: int, ells: list[Fraction], spread: int = 1) -> ChainFill | None:
    """Fill for m ≥ 3 and the m = 2 coincide rotation (derived, docs/optcc_multi.md "Fill").

    Piece P_r(π) is rooted at straggler r. Healthy a sends its input to S_r in the remainder of
    S_r's window for link a in period π (after F) and gets the result in that window of a later
    period (after the raw), both at speed ℓ_r. Stragglers i and i+1 are idle together in window
    `Pattern.pair_windows`[i]; there the pair exchanges, in each direction, one message per
    root at speed ℓ_i: inputs accumulate along the path S_0 → … → S_r ← … ← S_{m−1}, results
    travel back out. Sizes x_r = s·(2μ − ℓ_r)/ℓ_r with s ≤ 1 so that ℓ_1·Σx_r ≤ 2μ (the pair
    window). Only pieces whose last flow ends by the no-fill slot time are made, so the closed
    form keeps its ends and only δ changes.
    """
    base = _chain_fill_events(H, tuple(ells), spread)
    if base is None:
        return None
    xs, ev, last, period = base
    end = nofill_end(H, k, ells, spread)
    # n = the number of periods π < k with period·π + last ≤ end (period = 2μW > 0): counted
    # exactly by one floor division (the loop below only for inexact input)
    if all(isinstance(x, (int, Fraction)) for x in (end, last, period)):
        n = 0 if last > end else min(k, (end - last) // period + 1)
    else:
        n = 0
        while n < k and period * n + last <= end:
            n += 1
    return ChainFill(list(xs), list(ev), n) if n else None


_Events = tuple[tuple[Fraction, ...], tuple[FillEvent, ...], Fraction, Fraction]
_EVENTS: dict[tuple[object, ...], _Events | None] = {}


def _chain_fill_events(H: int, ells: tuple[Fraction, ...], spread: int) -> _Events | None:
    """The k-independent part of `chain_fill_plan`: (sizes x_r, piece 0's events, their latest
    end in δ, the period 2μW in δ), or None without fill. Cached (the auto-k searches ask for
    many k on one cluster); callers get copies of the lists."""
    key = (H, ells, tuple(map(type, ells)), spread)
    if key in _EVENTS:
        return _EVENTS[key]
    if len(_EVENTS) > 4096:
        _EVENTS.clear()
    value = _EVENTS[key] = _chain_fill_events_uncached(H, list(ells), spread)
    return value


def _chain_fill_events_uncached(H: int, ells: list[Fraction], spread: int) -> _Events | None:
    m = len(ells)
    pat = Pattern(H, m, spread)
    if not (m >= 3 or pat.coincide) or H < 1:
        return None
    mu = max(Fraction(1), ells[0] / 2)
    raw = [(2 * mu - e) / e for e in ells]
    tot = sum(raw)
    if tot <= 0:
        return None
    scale = min(Fraction(1), (2 * mu / ells[0]) / tot)
    xs = [x * scale for x in raw]
    W = pat.W
    win = pat.windows
    pw = pat.pair_windows()
    S = [FillNode(True, i) for i in range(m)]
    N = [FillNode(False, a) for a in range(H)]

    def occ(i: int, amin: int) -> int:
        return amin + ((pw[i] - amin) % W)

    def off(i: int, r: int) -> Fraction:
        return ells[i] * sum(xs[:r], Fraction(0))

    ev = []
    for r in range(m):
        if xs[r] == 0:
            continue
        for a in range(H):
            ev.append(FillEvent(r, N[a], S[r], "add", win[r][a], ells[r], ells[r] * xs[r]))
        ready = max(win[r])
        A = -1
        for i in range(r):                               # S_0 → … → S_r
            A = occ(i, A + 1)
            ev.append(FillEvent(r, S[i], S[i + 1], "add", A, off(i, r), ells[i] * xs[r]))
        ready = max(ready, A)
        A = -1
        for i in range(m - 2, r - 1, -1):                # S_{m−1} → … → S_r
            A = occ(i, A + 1)
            ev.append(FillEvent(r, S[i + 1], S[i], "add", A, off(i, r), ells[i] * xs[r]))
        ready = max(ready, A)
        f = -(-(ready + 1 - min(win[r])) // W)
        for a in range(H):
            ev.append(FillEvent(r, S[r], N[(a + 1) % H], "copy", f * W + win[r][a], ells[r], ells[r] * xs[r]))
        A = ready
        for i in range(r, m - 1):                        # results S_r → … → S_{m−1}
            A = occ(i, A + 1)
            ev.append(FillEvent(r, S[i], S[i + 1], "copy", A, off(i, r), ells[i] * xs[r]))
        A = ready
        for i in range(r - 1, -1, -1):                   # results S_r → … → S_0
            A = occ(i, A + 1)
            ev.append(FillEvent(r, S[i + 1], S[i], "copy", A, off(i, r), ells[i] * xs[r]))
    last = max(2 * mu * e.window + e.offset + e.duration for e in ev)
    return tuple(xs), tuple(ev), last, 2 * mu * W


def relay_fill_flows(h: list[int], stragglers: list[tuple[int, Fraction]], k: int, grid: SlotGrid,
                     sizes: tuple[Fraction, Fraction], base: int) -> list[Flow]:
    """ℓ < 2 bubble filling for m = 2, H = 2 (derived, docs/optcc_multi.md "Fill"): pieces
    P0(π), P1(π) (π = 0..k−2, numbered from `base`) of sizes (f0, f1) rooted at straggler 0 / 1.
    Healthy inputs go in the window remainder of period π, results two periods later at most.
    The straggler–straggler exchanges and the one healthy pair each piece cannot reach directly
    are relayed through the other straggler in its idle window (S1 idle in window 0, S0 in
    window H), where the F flow moves to the window's end."""
    H = len(h)
    (s0, l0), (s1, l1) = stragglers
    f0, f1 = sizes
    L, d, at = grid.L, grid.d, grid.at
    out: list[Flow] = []
    app = out.append
    base1 = base + (k - 1 if f0 > 0 else 0)
    P0 = (lambda q: base + q) if f0 > 0 else None
    P1 = (lambda q: base1 + q) if f1 > 0 else None
    w0, w1 = l0 * d, l1 * d                           # a straggler's busy part of its window
    ok = range(0, k - 1).__contains__
    for pi in range(k + 1):
        if P0:
            for a in range(1, H):                     # S0's windows 1..H−1 (link a)
                t = at(L * pi + 2 * a) + w0
                if ok(pi):
                    app(Flow(h[a], s0, P0(pi), "add", t))
                if ok(pi - 1):
                    app(Flow(s0, h[(a + 1) % H], P0(pi - 1), "copy", t))
            t = at(L * pi)                            # window 0: S1 idle, relays for P0
            if ok(pi):
                app(Flow(h[0], s1, P0(pi), "add", t))
            if ok(pi - 1):
                app(Flow(s1, s0, P0(pi - 1), "add", t))
                app(Flow(s0, s1, P0(pi - 1), "copy", t + w0))
            if ok(pi - 2):
                app(Flow(s1, h[1 % H], P0(pi - 2), "copy", t + w0))
        if P1:
            for a in range(H - 1):                    # S1's windows 1..H−1 (link a)
                t = at(L * pi + 2 * (a + 1)) + w1
                if ok(pi):
                    app(Flow(h[a], s1, P1(pi), "add", t))
                if ok(pi - 2):
                    app(Flow(s1, h[a + 1], P1(pi - 2), "copy", t))
            t = at(L * pi + 2 * H)                    # window H: S0 idle, relays for P1
            if ok(pi):
                app(Flow(h[H - 1], s0, P1(pi), "add", t))
            if ok(pi - 1):
                app(Flow(s0, s1, P1(pi - 1), "add", t))
                app(Flow(s1, s0, P1(pi - 1), "copy", t + w1))
            if ok(pi - 2):
                app(Flow(s0, h[0], P1(pi - 2), "copy", t + w1))
    return out
