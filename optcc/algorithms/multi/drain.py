"""The drain of multi-straggler OptCC: segment k−1's all-gather (and, coincide rotation,
segment k−2's moved tail) placed in the ring slots the periodic pattern leaves free, and the
schedule's end without fill that the closed form and the fill both use (derived,
docs/optcc_multi.md "Fill and drain")."""
from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING

from optcc.algorithms.multi.pattern import Pattern

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt


def drain_last_slot(H: int, m: int, k: int, spread: int = 1) -> int:
    """Start slot of the drain's last hop: L(k+1) − 2, or L(k+1) − 1 with the coincide rotation
    and k ≥ 2 (its moved segment k−2 tail joins the drain). What `drain_slots` gives for every
    m ≤ 4, H ≤ 40, k ≤ 8 tried; the tests assert it for H = 2..11, 17, 30, k ∈ {1, 2, 5}; not proved.
    Hop spread 3: L(k+2) + H − 4 for H ≥ 4 (H = 2, 3: L(k+2) − 2 for k ≥ 2), the same kind of
    identity (m ≤ 4, H ≤ 41, k ≤ 8 tried; tests/optcc/test_optcc_multi_latency.py)."""
    pat = Pattern(H, m, spread)
    if spread != 1:
        if H >= 4:
            return pat.L * (k + 2) + H - 4
        if k >= 2:
            return pat.L * (k + 2) - 2
        return pat.L * (k + 1) if H == 2 else pat.L * (k + 2) - 4
    return pat.L * (k + 1) - (1 if pat.coincide and k >= 2 else 2)


def nofill_end(H: int, k: int, ells: list[Fraction], spread: int = 1) -> Fraction:
    """Slot time in units of δ without fill (derived; see `optcc_multi_slot_time`)."""
    m = len(ells)
    mu = max(Fraction(1), ells[0] / 2)
    pat = Pattern(H, m, spread)
    ends: list[Fraction] = [max(int(pat.f_slot(k - 1, a, i)) for a in range(H)) * mu + ell for i, ell in enumerate(ells)]
    if H >= 2:
        ends.append(drain_last_slot(H, m, k, spread) * mu + 1)
    return max(ends)


def drain_slots(H: int, m: int, k: int, spread: int = 1) -> dict[tuple[int, int, int], int]:
    """Slot of each drained all-gather hop, keyed (σ, a, j): hop j of job (σ, a) on link a+j,
    σ = k−1 (and, coincide rotation, segment k−2's moved tail) (derived).

    The periodic pattern leaves the ring links free where segment k−1's all-gather hops and
    segment k's reduce-scatter hops would be, and in every rest block after period k. Busy slots
    of link b (node b's send port, node b+1's receive port): the reduce-scatter hops of segments
    k−2, k−1, the all-gather hops of segments k−3, k−2 and the rest blocks of periods ≤ k (every
    straggler flow of a healthy node, fill included, lies in its link's rest block). Job a is
    ready when its reduce-scatter and the stragglers' raws have landed. The hops are placed slot
    by slot, each free link taking the ready job with the most hops left (ties: smallest a):
    `drain_slot_arrays`. `optcc_multi_slot_time` uses its closed form `drain_last_slot` instead.
    """
    s, a, j, t = drain_slot_arrays(H, m, k, spread)
    placed = sorted(zip(t.tolist(), ((a + j) % H).tolist(), s.tolist(), a.tolist(), j.tolist()))
    return {(x, y, z): w for w, _, x, y, z in placed}       # in placement order: slot, then link


def drain_slot_arrays(H: int, m: int, k: int, spread: int = 1) -> tuple[npt.NDArray[np.int64], ...]:
    """The drain as arrays (σ, a, j, slot) of every drained all-gather hop (`drain_slots` for the
    rule). Per slot, every free link takes its ready job with the fewest hops done (ties: the job
    listed first). A job placed at slot t is ready at t + 1, so the links of one slot decide
    independently and each link needs only the jobs now waiting on it (its bucket): O(slots ·
    links), where placing job by job costs O(slots · links · jobs) (tests/multi_drain_reference.py
    keeps that reading, and the tests hold the two equal)."""
    import numpy as np

    from optcc.algorithms.families.arrays import NP
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
        slot_parts.append(pat.rs_slot(sigma, aa, jj, NP).ravel())
    aa, jj = np.meshgrid(np.arange(H, dtype=np.int64), np.arange(H - 1, dtype=np.int64), indexing="ij")
    for sigma in range(max(0, k - 2 - back), k - 1):
        keep = np.ones(aa.shape, dtype=bool)
        if sigma == k - 2:
            for a, j0 in tail.items():
                keep[a, j0:] = False
        link_parts.append(((aa + jj) % H)[keep])
        slot_parts.append(pat.ag_slot(sigma, aa, jj, NP)[keep])
    w = pat.windows_array
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


