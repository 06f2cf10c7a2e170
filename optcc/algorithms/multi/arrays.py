"""optcc_multi_allreduce's flows as EventArrays, without Flow objects for the
O(p²k) part: the periodic pattern's raws, reduce-scatter, full sums and all-gather evaluated on
numpy index arrays (optcc.algorithms.multi.pattern.Pattern's own slot formulas, evaluated
with the families.arrays.NP namespace), the drain as optcc_multi_drain.drain_slot_arrays places it
(the builder's drain too), and the fill pieces (O(p·k) flows) taken from the module's own Python
code. Tested flow for flow against the built schedule (tests/optcc/test_event_arrays.py).
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from optcc.algorithms.families.arrays import NP
from optcc.algorithms.multi.drain import drain_slot_arrays
from optcc.algorithms.multi.pattern import Pattern
from optcc.event_arrays import ArrayBuilder, EventArrays

if TYPE_CHECKING:
    from collections.abc import Callable

    from optcc.cluster import Cluster

_Ix = npt.NDArray[np.int64]          # index arrays (σ, a, j / i), broadcast together


def multi_event_arrays(cluster: Cluster, segments: int) -> EventArrays:
    """optcc_multi_allreduce(cluster, segments)'s flows and pieces as EventArrays (the same
    flows; tests/optcc/test_event_arrays.py)."""
    from optcc.algorithms.multi import build as M
    from optcc.algorithms.multi.fill import SlotGrid, chain_fill_plan, fill_coefs, relay_fill_flows
    from optcc.algorithms.single.build import tick_clock
    stragglers = M._check(cluster, segments)
    k, m = segments, len(stragglers)
    healthy = np.array(cluster.healthy, dtype=np.int64)
    H = healthy.size
    ells = [e for _, e in stragglers]
    spread = M.hop_spread(cluster)
    d, lam = M._slot(H, k, ells, spread)
    pat = Pattern(H, m, spread)
    L = pat.L
    c0, c1 = fill_coefs(H, k, ells, spread)
    plan = chain_fill_plan(H, k, ells, spread)
    chain_pieces = []
    if plan:
        roots = [r for r in range(m) if plan.sizes[r] > 0]
        chain_pieces = [plan.sizes[r] * d for _ in range(plan.pieces) for r in roots]
    fills = ([c0 * d] * (k - 1) if c0 > 0 else []) + ([c1 * d] * (k - 1) if c1 > 0 else [])
    pieces = [d] * (k * H) + fills + chain_pieces
    b = ArrayBuilder(cluster, pieces)
    srank = np.array([s for s, _ in stragglers], dtype=np.int64)
    tail = pat.moved_tail()
    A = np.arange(H, dtype=np.int64)
    ai, ii = np.meshgrid(A, np.arange(m, dtype=np.int64), indexing="ij")
    aj, jj = np.meshgrid(A, np.arange(1, H, dtype=np.int64), indexing="ij")
    ag_a, ag_j = np.meshgrid(A, np.arange(H - 1, dtype=np.int64), indexing="ij")
    late = np.zeros(ai.shape, dtype=bool)
    if c0 > 0:
        late |= (ii == 0) & (ai == 0)
    if c1 > 0:
        late |= (ii == 1) & (ai == H - 1)
    for sigma in range(k):
        base = sigma * H
        b.add(srank[ii].ravel(), healthy[ai].ravel(), (base + ai).ravel(), pat.raw_slot(sigma, ai, ii, NP).ravel(), lam)
        bb = (aj + jj) % H
        b.add(healthy[bb].ravel(), healthy[(bb + 1) % H].ravel(), (base + aj).ravel(),
              pat.rs_slot(sigma, aj, jj, NP).ravel(), lam)
        fs = pat.f_slot(sigma, ai, ii, NP)
        for i, (_, ell) in enumerate(stragglers):      # F: the late ones start 2λ − ℓ·δ into their slot
            for lt in (False, True):
                sel = (ii == i) & (late == lt)
                if sel.any():
                    b.add(healthy[ai[sel]], srank[i], base + ai[sel], fs[sel], lam,
                          (2 * lam - ell * d) if lt else Fraction(0))
        if sigma == k - 1:
            continue
        keep = np.ones(ag_a.shape, dtype=bool)
        if sigma == k - 2:
            for a, j0 in tail.items():
                keep[a, j0:] = False
        bb = (ag_a + ag_j) % H
        b.add(healthy[bb[keep]], healthy[(bb[keep] + 1) % H], base + ag_a[keep],
              pat.ag_slot(sigma, ag_a, ag_j, NP)[keep], lam)
    small = []                                          # fill flows: O(p·k), the module's own code
    at = tick_clock(lam)
    if c0 > 0 or c1 > 0:
        small += relay_fill_flows(list(cluster.healthy), stragglers, k, SlotGrid(L, d, at), (c0 * d, c1 * d), k * H)
    if small:
        den = 1
        for f in small:
            den = math.lcm(den, f.start.denominator)

        def col(name: str) -> npt.NDArray[np.int64]:
            return np.array([getattr(f, name) for f in small], dtype=np.int64)

        b.add(col("src"), col("dst"), col("piece"),
              np.array([f.start.numerator * (den // f.start.denominator) for f in small], dtype=np.int64),
              Fraction(1, den))
    if plan:                 # the chain fill: its events in every period π, period by period
        hl = list(cluster.healthy)
        ev = plan.events
        # start at(L·π + 2·window) + offset·δ = π·Lλ + first_e (first_e: period 0's); the reduced
        # starts' common denominator is lcm(Lλ's, every first_e's) (π·Lλ only where π ≥ 1 occurs)
        step = L * lam
        first = [at(2 * e.window) + e.offset * d for e in ev]
        den = 1
        for x in first + ([step] if plan.pieces > 1 else []):
            den = math.lcm(den, x.denominator)
        step_i = step.numerator * (den // step.denominator)
        first_i = [x.numerator * (den // x.denominator) for x in first]
        if (plan.pieces - 1) * step_i + max(first_i, default=0) >= 2**63:
            raise OverflowError("optcc_multi arrays: chain fill starts beyond int64")
        pi = np.arange(plan.pieces, dtype=np.int64)[:, None]
        shape = (plan.pieces, len(ev))
        row: Callable[[list[int]], npt.NDArray[np.int64]] = lambda v: np.array(v, dtype=np.int64)[None, :]  # noqa: E731
        b.add(np.broadcast_to(row([e.src.rank(hl, stragglers) for e in ev]), shape).ravel(),
              np.broadcast_to(row([e.dst.rank(hl, stragglers) for e in ev]), shape).ravel(),
              (k * H + pi * len(roots) + row([roots.index(e.root) for e in ev])).ravel(),
              (pi * step_i + row(first_i)).ravel(), Fraction(1, den))
    ds, da, dj, dt = drain_slot_arrays(H, m, k, spread)
    bb = (da + dj) % H
    b.add(healthy[bb], healthy[(bb + 1) % H], ds * H + da, dt, lam)
    return b.finish()
