"""The periodic slot pattern of multi-straggler OptCC (g = 1, m ≥ 2): when each ring hop, each
straggler's raw upload and each full-sum download of job (σ, a) starts, in slots.

Derived (docs/optcc_multi.md; the formulas and why they keep one flow per port are in the
docstring of optcc.algorithms.multi.build). H healthy GPUs, m stragglers sorted ℓ1 ≥ … ≥ ℓm,
W = H + m − 1 windows of 2 slots per period of L = 2W slots.

Hop spread s (derived, docs/optcc_multi.md "Latency"): s = 1 is the original pattern (consecutive
ring hops of a job in consecutive slots: zero slack, so under pipelined latency a delay wave runs
across the links, about (H−1)/2 latencies per period). s = 3 ("latency-robust") puts consecutive
hops 3 slots apart (on link b, hop j of job b−j sits at relative offset j + c instead of c − j),
so every ring hop has 2 slots of slack; the full sum reaches the stragglers one period later
(F in period σ + 2) and the m = 2 coincide rotation is not used.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from optcc.algorithms.families import INT, Arith, Term

COINCIDE_MIN_H = 3


@dataclass(frozen=True)
class Pattern:
    H: int      # healthy GPUs (ring nodes)
    m: int      # stragglers
    spread: int = 1   # slots between consecutive ring hops of a job: 1 (the original pattern) or 3 (latency-robust)

    @property
    def W(self) -> int:
        """Windows per period."""
        return self.H + self.m - 1

    @property
    def L(self) -> int:
        """Slots per period."""
        return 2 * (self.H + self.m - 1)

    @property
    def coincide(self) -> bool:
        """m = 2 rotation with one idle window shared by both stragglers (derived)."""
        return self.m == 2 and self.H >= COINCIDE_MIN_H and self.spread == 1

    @cached_property
    def windows(self) -> list[list[int]]:
        """w[i][a]: the window (0..W−1) in which straggler i serves ring link a (derived).

        Default: a + i. m = 2 "coincide" rotation: straggler 1 serves link H−1 in window 0 (not
        H), so both stragglers idle in window H."""
        H, m = self.H, self.m
        w = [[a + i for a in range(H)] for i in range(m)]
        if self.coincide:
            w[1][H - 1] = 0
        return w

    def pair_windows(self) -> list[int]:
        """Window in which stragglers i and i+1 are both idle (chain fill), i = 0..m−2."""
        if self.coincide:
            return [self.H]
        return [(self.H + 1 + i) % (self.H + self.m - 1) for i in range(self.m - 1)]

    def moved_tail(self) -> dict[int, int]:
        """Jobs whose all-gather tail `ag_slot` moves a period later (job -> first moved hop); for
        segment k−2 the drain places these hops instead, so they do not outlast it."""
        return {1: self.H - 2, 2: self.H - 3} if self.coincide else {}

    @cached_property
    def windows_array(self) -> Any:
        """`windows` as an int64 array [i, a] (the numpy reading of `window`)."""
        import numpy as np
        return np.array(self.windows, dtype=np.int64)

    def window(self, i: Term, a: Term, A: Arith = INT) -> Term:
        """w[i][a], on ints (INT) or index arrays (families.arrays.NP)."""
        return self.windows[i][a] if A is INT else self.windows_array[i, a]

    # The slot formulas, written once over an arithmetic namespace `A` (optcc.algorithms.families):
    # INT for the builder (ints), families.arrays.NP for optcc.algorithms.multi.arrays (index arrays).

    def rs_slot(self, sigma: Term, a: Term, j: Term, A: Arith = INT) -> Term:
        """Reduce-scatter hop j (link a+j) of job (σ, a)."""
        H, m = self.H, self.m
        wrap = (2 * m - 2) * (a + j >= H)
        if self.spread == 3:   # relative offset 2m + H − 2 + j on link a + j: the block [2m + H − 1, L)
            return self.L * sigma + 2 * a + 2 * m + H - 2 + 3 * j + wrap
        return self.L * sigma + 2 * a + j + wrap

    def ag_slot(self, sigma: Term, a: Term, j: Term, A: Arith = INT) -> Term:
        """All-gather hop j of job (σ, a). The coincide rotation moves two hops off link H−1's
        window 0 into its freed window H one period later (job 1's hop H−2, job 2's hop H−3; job
        2's last hop follows one period later): found by a CP-SAT search that kept every other
        offset, checked by the port test for every H the tests try (derived, not proved in general)."""
        H, m, L = self.H, self.m, self.L
        wrap = (2 * m - 2) * (a + j >= H)
        if self.spread == 3:   # relative offset 2m + j: the block [2m, 2m + H − 1), two periods on
            return L * (sigma + 2) + 2 * a + 2 * m + 3 * j + wrap
        t = L * (sigma + 1) + 2 * a + 2 * m + H - 2 + j + wrap
        if self.coincide:
            moved = A.Or(A.And(a == 1, j == H - 2), A.And(a == 2, j == H - 3))
            t = t + A.ite(moved, L - 2, A.ite(A.And(a == 2, j == H - 2), L, 0))
        return t

    def f_slot(self, sigma: Term, a: Term, i: Term, A: Arith = INT) -> Term:
        """F of job (σ, a) to straggler i: its window of period σ+1, or σ+2 if that window comes
        before the job's own (coincide rotation, link H−1)."""
        w = self.window(i, a, A)
        if self.spread == 3:   # the reduce-scatter ends by L(σ+2) + 2a − 2
            return self.L * (sigma + 2) + 2 * w
        return self.L * (sigma + 1) + 2 * w + self.L * (w < a)

    def raw_slot(self, sigma: Term, a: Term, i: Term, A: Arith = INT) -> Term:
        """Raw of job (σ, a) from straggler i: when it serves link a−1 in period σ."""
        return self.L * sigma + 2 * self.window(i, (a - 1) % self.H, A)
