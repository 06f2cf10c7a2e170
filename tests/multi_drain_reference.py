"""The drain of multi-straggler OptCC placed job by job (O(slots · links · jobs)): the reading
optcc.algorithms.multi.drain.drain_slot_arrays replaced with per-link buckets; the tests
hold the two equal (tests/optcc/test_event_arrays.py)."""
from __future__ import annotations

from dataclasses import dataclass

from optcc.algorithms.multi.pattern import Pattern


@dataclass
class DrainJob:
    """All-gather hops still to place for job (σ, a): the next hop and the slot it may start."""

    sigma: int
    a: int
    hop: int
    ready: int


def drain_slots_reference(H: int, m: int, k: int, spread: int = 1) -> dict[tuple[int, int, int], int]:
    """Slot of each drained all-gather hop, keyed (σ, a, j): hop j of job (σ, a) on link a+j,
    σ = k−1 (and, coincide rotation, segment k−2's moved tail) (derived).

    The periodic pattern leaves the ring links free where segment k−1's all-gather hops and
    segment k's reduce-scatter hops would be, and in every rest block after period k. Busy slots
    of link b (node b's send port, node b+1's receive port): the reduce-scatter hops of segments
    k−2, k−1, the all-gather hops of segments k−3, k−2 and the rest blocks of periods ≤ k (every
    straggler flow of a healthy node, fill included, lies in its link's rest block). Job a is
    ready when its reduce-scatter and the stragglers' raws have landed. The hops are placed slot
    by slot, each free link taking the ready job with the most hops left (ties: smallest a).
    O(H²) per call; `optcc_multi_slot_time` uses its closed form `drain_last_slot` instead.
    """
    if H < 2:
        return {}
    pat = Pattern(H, m, spread)
    L = pat.L
    busy: list[set[int]] = [set() for _ in range(H)]
    w = pat.windows
    lo = L * max(0, k - 2)
    back = 2 if spread == 1 else 4    # segments whose hops may still be on the links (spread 3: 3 periods a job)
    for sigma in range(max(0, k - back), k):                    # reduce-scatter hops
        for a in range(H):
            for j in range(1, H):
                busy[(a + j) % H].add(pat.rs_slot(sigma, a, j))
    tail = pat.moved_tail()
    for sigma in range(max(0, k - 2 - back), k - 1):            # all-gather hops
        for a in range(H):
            for j in range(H - 1):
                if not (sigma == k - 2 and a in tail and j >= tail[a]):
                    busy[(a + j) % H].add(pat.ag_slot(sigma, a, j))
    for f in range(max(0, k - 3), k + 2):                       # rest blocks
        for b in range(H):
            for i in range(m):
                busy[b].update(range(L * f + 2 * w[i][b], L * f + 2 * w[i][b] + 2))
    jobs = []
    for a in range(H):
        rs_end = pat.rs_slot(k - 1, a, H - 1) + 1
        raw_land = max(pat.raw_slot(k - 1, a, i) for i in range(m)) + 2
        jobs.append(DrainJob(k - 1, a, 0, max(rs_end, raw_land)))
    if k >= 2:
        for a, j0 in tail.items():
            jobs.append(DrainJob(k - 2, a, j0, pat.ag_slot(k - 2, a, j0 - 1) + 1))
    out: dict[tuple[int, int, int], int] = {}
    left = sum(H - 1 - jb.hop for jb in jobs)
    t = max(lo, min(jb.ready for jb in jobs))
    while left:
        for b in range(H):
            if t in busy[b]:
                continue
            best = None
            for jb in jobs:
                if jb.hop < H - 1 and (jb.a + jb.hop) % H == b and jb.ready <= t:
                    if best is None or jb.hop < best.hop:
                        best = jb
            if best is not None:
                out[(best.sigma, best.a, best.hop)] = t
                best.hop += 1
                best.ready = t + 1
                left -= 1
        t += 1
    return out
