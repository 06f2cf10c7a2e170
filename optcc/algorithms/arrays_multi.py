"""optcc_multi_allreduce's flows as EventArrays (issue 24 item 1), without Flow objects for the
O(p²k) part: the periodic pattern's raws, reduce-scatter, full sums and all-gather evaluated on
numpy index arrays (the formulas of optcc.algorithms.optcc_multi_pattern.Pattern, written once
more for arrays), the drain placed by `drain_slots_fast` (the same greedy rule as
optcc_multi_drain.drain_slots, with per-link buckets: O(slots · links) instead of
O(slots · links · jobs)), and the fill pieces (O(p·k) flows) taken from the module's own Python
code. Tested flow for flow against the built schedule (tests/test_event_arrays.py).
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from optcc.algorithms.optcc_multi_pattern import Pattern
from optcc.event_arrays import ArrayBuilder, EventArrays

if TYPE_CHECKING:
    from optcc.cluster import Cluster

_Ix = npt.NDArray[np.int64]          # index arrays (σ, a, j / i), broadcast together


def rs_slots(pat: Pattern, sigma: int, a: _Ix, j: _Ix) -> npt.NDArray[np.int64]:
    """Pattern.rs_slot on arrays."""
    H, m, L = pat.H, pat.m, pat.L
    wrap = (2 * m - 2) * (a + j >= H)
    if pat.spread == 3:
        return L * sigma + 2 * a + 2 * m + H - 2 + 3 * j + wrap
    return L * sigma + 2 * a + j + wrap


def ag_slots(pat: Pattern, sigma: int, a: _Ix, j: _Ix) -> npt.NDArray[np.int64]:
    """Pattern.ag_slot on arrays (the coincide rotation's three moved hops included)."""
    H, m, L = pat.H, pat.m, pat.L
    wrap = (2 * m - 2) * (a + j >= H)
    if pat.spread == 3:
        return L * (sigma + 2) + 2 * a + 2 * m + 3 * j + wrap
    t = L * (sigma + 1) + 2 * a + 2 * m + H - 2 + j + wrap
    if pat.coincide:
        moved = ((a == 1) & (j == H - 2)) | ((a == 2) & (j == H - 3))
        t = t + np.where(moved, L - 2, np.where((a == 2) & (j == H - 2), L, 0))
    return t


def _windows(pat: Pattern) -> np.ndarray:
    return np.array(pat.windows, dtype=np.int64)            # [i][a]


def f_slots(pat: Pattern, sigma: int, a: _Ix, i: _Ix) -> npt.NDArray[np.int64]:
    """Pattern.f_slot on arrays."""
    w: _Ix = _windows(pat)[i, a]
    if pat.spread == 3:
        return pat.L * (sigma + 2) + 2 * w
    return pat.L * (sigma + 1) + 2 * w + pat.L * (w < a)


def raw_slots(pat: Pattern, sigma: int, a: _Ix, i: _Ix) -> npt.NDArray[np.int64]:
    """Pattern.raw_slot on arrays."""
    w: _Ix = _windows(pat)[i, (a - 1) % pat.H]
    return pat.L * sigma + 2 * w


def drain_slots_fast(H: int, m: int, k: int, spread: int = 1) -> tuple[np.ndarray, ...]:
    """optcc_multi_drain.drain_slots(H, m, k, spread) as arrays (σ, a, j, slot), the same
    placement: per slot, every free link takes its ready job with the fewest hops done (ties:
    the job listed first). A job placed at slot t is ready at t + 1, so the links of one slot
    decide independently and each link needs only the jobs now waiting on it (its bucket)."""
    empty = np.zeros(0, dtype=np.int64)
    if H < 2:
        return empty, empty, empty, empty
    pat = Pattern(H, m, spread)
    L = pat.L
    lo = L * max(0, k - 2)
    back = 2 if spread == 1 else 4
    tail = pat.moved_tail()
    jobs = []                       # [sigma, a, hop, ready]
    for a in range(H):
        rs_end = pat.rs_slot(k - 1, a, H - 1) + 1
        raw_land = max(pat.raw_slot(k - 1, a, i) for i in range(m)) + 2
        jobs.append([k - 1, a, 0, max(rs_end, raw_land)])
    if k >= 2:
        for a, j0 in tail.items():
            jobs.append([k - 2, a, j0, pat.ag_slot(k - 2, a, j0 - 1) + 1])
    t0 = max(lo, min(jb[3] for jb in jobs))
    # busy slots (≥ t0) of every link, as one bytearray row per link
    link_parts: list[npt.NDArray[np.int64]] = []
    slot_parts: list[npt.NDArray[np.int64]] = []
    aa, jj = np.meshgrid(np.arange(H, dtype=np.int64), np.arange(1, H, dtype=np.int64), indexing="ij")
    for sigma in range(max(0, k - back), k):
        link_parts.append(((aa + jj) % H).ravel())
        slot_parts.append(rs_slots(pat, sigma, aa, jj).ravel())
    aa, jj = np.meshgrid(np.arange(H, dtype=np.int64), np.arange(H - 1, dtype=np.int64), indexing="ij")
    for sigma in range(max(0, k - 2 - back), k - 1):
        keep = np.ones(aa.shape, dtype=bool)
        if sigma == k - 2:
            for a, j0 in tail.items():
                keep[a, j0:] = False
        link_parts.append(((aa + jj) % H)[keep])
        slot_parts.append(ag_slots(pat, sigma, aa, jj)[keep])
    w = _windows(pat)
    for f in range(max(0, k - 3), k + 2):
        for i in range(m):
            for d in (0, 1):
                link_parts.append(np.arange(H, dtype=np.int64))
                slot_parts.append(L * f + 2 * w[i] + d)
    links, slots = np.concatenate(link_parts), np.concatenate(slot_parts)
    del link_parts, slot_parts
    keep = slots >= t0
    links, slots = links[keep], slots[keep] - t0
    width = int(slots.max()) + 1 if slots.size else 1
    busy = np.zeros((H, width), dtype=np.uint8)
    busy[links, slots] = 1
    rows = [bytes(r) for r in busy]
    del busy, links, slots
    buckets: dict[int, list[int]] = {}
    left = 0
    for idx, jb in enumerate(jobs):
        if jb[2] < H - 1:
            buckets.setdefault((jb[1] + jb[2]) % H, []).append(idx)
            left += H - 1 - jb[2]
    out_s, out_a, out_j, out_t = [], [], [], []
    t = t0
    while left:
        rel = t - t0
        moves = []
        for b, bucket in buckets.items():
            if rel < width and rows[b][rel]:
                continue
            best = None
            for idx in bucket:
                jb = jobs[idx]
                if jb[3] <= t and (best is None or (jb[2], idx) < (jobs[best][2], best)):
                    best = idx
            if best is not None:
                moves.append((b, best))
        for b, idx in moves:
            jb = jobs[idx]
            out_s.append(jb[0])
            out_a.append(jb[1])
            out_j.append(jb[2])
            out_t.append(t)
            jb[2] += 1
            jb[3] = t + 1
            left -= 1
            buckets[b].remove(idx)
            if not buckets[b]:
                del buckets[b]
            if jb[2] < H - 1:
                buckets.setdefault((b + 1) % H, []).append(idx)
        t += 1
    return tuple(np.array(x, dtype=np.int64) for x in (out_s, out_a, out_j, out_t))


def multi_event_arrays(cluster: Cluster, segments: int) -> EventArrays:
    """optcc_multi_allreduce(cluster, segments)'s flows and pieces as EventArrays (the same
    flows; tests/test_event_arrays.py)."""
    from optcc.algorithms import optcc_multi as M
    from optcc.algorithms.optcc_multi_fill import SlotGrid, chain_fill_plan, fill_coefs, relay_fill_flows
    from optcc.algorithms.optcc_single import tick_clock
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
        b.add(srank[ii].ravel(), healthy[ai].ravel(), (base + ai).ravel(), raw_slots(pat, sigma, ai, ii).ravel(), lam)
        bb = (aj + jj) % H
        b.add(healthy[bb].ravel(), healthy[(bb + 1) % H].ravel(), (base + aj).ravel(),
              rs_slots(pat, sigma, aj, jj).ravel(), lam)
        fs = f_slots(pat, sigma, ai, ii)
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
              ag_slots(pat, sigma, ag_a, ag_j)[keep], lam)
    small = []                                          # fill flows: O(p·k), the module's own code
    at = tick_clock(lam)
    if c0 > 0 or c1 > 0:
        small += relay_fill_flows(list(cluster.healthy), stragglers, k, SlotGrid(L, d, at), (c0 * d, c1 * d), k * H)
    if plan:
        from optcc.schedule import Flow
        hl = list(cluster.healthy)
        for pi in range(plan.pieces):
            for e in plan.events:
                pid = k * H + pi * len(roots) + roots.index(e.root)
                small.append(Flow(e.src.rank(hl, stragglers), e.dst.rank(hl, stragglers), pid, e.op,
                                  at(L * pi + 2 * e.window) + e.offset * d))
    if small:
        den = 1
        for f in small:
            den = math.lcm(den, f.start.denominator)

        def col(name: str) -> npt.NDArray[np.int64]:
            return np.array([getattr(f, name) for f in small], dtype=np.int64)

        b.add(col("src"), col("dst"), col("piece"),
              np.array([f.start.numerator * (den // f.start.denominator) for f in small], dtype=np.int64),
              Fraction(1, den))
    ds, da, dj, dt = drain_slots_fast(H, m, k, spread)
    bb = (da + dj) % H
    b.add(healthy[bb], healthy[(bb + 1) % H], ds * H + da, dt, lam)
    return b.finish()
