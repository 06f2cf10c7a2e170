"""A schedule's flows as compact integer arrays with their durations (issue 24 item 1): what
optcc.event_timer.Prepared times, for constructions whose flow lists are too large for Flow
objects (optcc_multi, optcc_servers, optcc_rails at p = 1024).

`EventArrays` holds per flow: src, dst, piece (int32), link (nv: 1 = NVLink), start and
duration as int64 on one integer grid (time = value / scale, n/B), and, where some flow runs at
a rate below 1, its rate as an integer numerator over `rate_den`; local ops as (time, rank, piece).
`ArrayBuilder` assembles one from parts given as exact Fractions (a unit and an offset per
part, integer multipliers per flow), and computes every duration the way optcc.timing does
(Cluster.nic_time / nvlink_time: size · max(ℓ_src, ℓ_dst) / rate on a NIC, size / (s_nv · rate)
on NVLink), one Fraction per class of equal (size, slower end, link, rate), never per flow.
`from_schedule` converts a built Schedule (small schedules and the tests' oracle).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from optcc.schedule import Schedule
from optcc.timing import IntegerTimes

if TYPE_CHECKING:
    import numpy.typing as npt

    from optcc.cluster import Cluster

Part = tuple[Any, ...]      # (src, dst, piece, units, unit, offset, nv, (rate class array or None, rates)): ArrayBuilder.add

INT64_SAFE = 2**62


@dataclass
class EventArrays:
    """Flows as arrays on one grid (module docstring). `rate` is None where every rate is 1."""

    p: int
    pieces: list[Fraction]
    src: np.ndarray
    dst: np.ndarray
    piece: np.ndarray
    nv: np.ndarray | None
    start: np.ndarray
    dur_cls: np.ndarray                          # per flow: its duration's class
    dur_table: np.ndarray                        # per class: the duration (int64 on the grid)
    scale: int
    rate: np.ndarray | None = None
    rate_den: int = 1
    ops: list[tuple[int, int, int]] = field(default_factory=list)      # (time on the grid, rank, piece)

    def __len__(self) -> int:
        self.check_unconsumed()
        return int(self.src.size)

    def check_unconsumed(self) -> None:
        """ValueError where Prepared.from_arrays already took these arrays (it releases them as it
        copies them, to bound the peak): make them again to time them twice."""
        if self.src is None:
            raise ValueError("event_arrays: these EventArrays were consumed by an earlier "
                             "Prepared.from_arrays (it releases them as it copies); make them again")

    @property
    def dur(self) -> np.ndarray:
        out: np.ndarray = self.dur_table[self.dur_cls]
        return out

    def tuples(self) -> list[tuple[Any, ...]]:
        """(src, dst, piece, start, duration, link, rate) per flow, exact (for the tests)."""
        nv = self.nv if self.nv is not None else np.zeros(len(self), dtype=np.int8)
        rate = self.rate if self.rate is not None else np.full(len(self), self.rate_den, dtype=np.int64)
        return [(int(s), int(d), int(pc), Fraction(int(t), self.scale), Fraction(int(u), self.scale),
                 "nvlink" if v else "nic", Fraction(int(r), self.rate_den))
                for s, d, pc, t, u, v, r in zip(self.src, self.dst, self.piece, self.start, self.dur, nv, rate)]


def schedule_tuples(schedule: Schedule) -> list[tuple[Any, ...]]:
    """The same tuples of a built Schedule (optcc.timing's durations)."""
    grid = IntegerTimes(schedule)
    return [(f.src, f.dst, f.piece, Fraction(st, grid.scale), Fraction(d, grid.scale), f.link, f.rate)
            for f, st, d in zip(schedule.flows, grid.starts, grid.durs)]


def from_schedule(schedule: Schedule) -> EventArrays:
    """A built Schedule's flows and local ops as EventArrays (its IntegerTimes grid)."""
    b = ArrayBuilder(schedule.cluster, schedule.pieces)
    flows = schedule.flows
    if flows:
        grid = IntegerTimes(schedule)
        n = len(flows)
        col: Callable[[str], np.ndarray] = lambda name: np.fromiter((getattr(f, name) for f in flows), dtype=np.int64, count=n)  # noqa: E731
        links = np.fromiter((f.link == "nvlink" for f in flows), dtype=np.int8, count=n)
        rates = sorted({f.rate for f in flows})
        rate_cls = np.fromiter((rates.index(f.rate) if len(rates) > 1 else 0 for f in flows), dtype=np.int64,
                               count=n)
        b.add(col("src"), col("dst"), col("piece"), np.asarray(grid.starts, dtype=np.int64),
              Fraction(1, grid.scale), nv=links, rate=(rate_cls, rates))
    for op in schedule.local_ops:
        b.add_op(op.time, op.rank, op.piece)
    return b.finish()


def index_of(values: list[Fraction], items: Iterable[Fraction]) -> list[int]:
    """values.index(x) for each x, by (numerator, denominator) look-ups (reduced Fractions are
    equal exactly when these are; a Fraction's own hash and == cost far more)."""
    pos = {(v.numerator, v.denominator): i for i, v in reversed(list(enumerate(values)))}
    return [pos[(x.numerator, x.denominator)] for x in items]


class ArrayBuilder:
    """Parts of flows with exact starts offset + units · unit (Fractions, n/B); `finish` puts
    them on one grid and computes their durations."""

    def __init__(self, cluster: Cluster, pieces: Iterable[Fraction | int]) -> None:
        self.cluster = cluster
        self.pieces = [x if type(x) is Fraction else Fraction(x) for x in pieces]
        self.parts: list[Part] = []
        self.ops: list[tuple[Fraction, int, int]] = []

    def add(self, src: npt.ArrayLike, dst: npt.ArrayLike, piece: npt.ArrayLike, units: npt.ArrayLike, unit: Fraction,
            offset: Fraction = Fraction(0), nv: npt.ArrayLike = 0,
            rate: Fraction | int | tuple[np.ndarray | None, list[Fraction]] = Fraction(1)) -> None:
        """Flows src → dst of `piece` starting at offset + units·unit. nv: 0 / 1 or an int8 array
        (1 = NVLink); rate: a Fraction, or (class index array, list of Fractions)."""
        src_a = np.asarray(src).astype(np.int32, copy=False)
        n = src_a.size
        if n == 0:
            return
        full: Callable[[npt.ArrayLike, type[np.integer[Any]]], np.ndarray] = lambda a, t: np.broadcast_to(np.asarray(a).astype(t, copy=False), (n,))  # noqa: E731
        if isinstance(rate, Fraction) or isinstance(rate, int):
            rate = (None, [Fraction(rate)])
        units_a = np.asarray(units)
        small = units_a.size and -2**31 < int(units_a.min()) and int(units_a.max()) < 2**31
        self.parts.append((src_a, full(dst, np.int32), full(piece, np.int32), full(units_a, np.int32 if small else np.int64),
                           Fraction(unit), Fraction(offset), full(nv, np.int8), rate))

    def add_op(self, time: Fraction, rank: int, piece: int) -> None:
        self.ops.append((Fraction(time), rank, piece))

    def finish(self) -> EventArrays:
        c = self.cluster
        sizes = sorted({(x.numerator, x.denominator): x for x in self.pieces}.values())   # (a Fraction's hash costs more)
        size_cls = np.array(index_of(sizes, self.pieces), dtype=np.int64)
        slows = sorted(set(c.slowdown))
        slow_cls = np.array(index_of(slows, c.slowdown), dtype=np.int64)
        rates = sorted({r for part in self.parts for r in part[7][1]})
        # durations per class (size, slower end, link, rate): NIC size·ℓ/rate, NVLink size/(s_nv·rate)
        table: dict[tuple[int, int, int, int], Fraction] = {}
        for a, x in enumerate(sizes):
            for r_i, r in enumerate(rates):
                for b_i, ell in enumerate(slows):
                    table[(a, b_i, 0, r_i)] = x * ell / r
                for b_i in range(len(slows)):      # NVLink: no slower end (only class 0 is used)
                    table[(a, b_i, 1, r_i)] = x / (c.nvlink_speedup * r)
        scale = 1
        for x in list(table.values()) + [t for t, _, _ in self.ops]:
            scale = math.lcm(scale, x.denominator)
        for part in self.parts:
            scale = math.lcm(scale, part[4].denominator, part[5].denominator)
        n_sl, n_r = len(slows), len(rates)
        dur_tab: npt.NDArray[np.int64] = np.zeros((len(sizes), n_sl, 2, n_r), dtype=np.int64)
        for (a, b_i, v, r_i), d in table.items():
            if d.numerator * (scale // d.denominator) >= INT64_SAFE:
                raise OverflowError("event_arrays: durations beyond int64 on this grid")
            dur_tab[a, b_i, v, r_i] = d.numerator * (scale // d.denominator)
        dur_tab = dur_tab.reshape(-1)
        strides = (n_sl * 2 * n_r, 2 * n_r, n_r)
        cls_t = np.int16 if dur_tab.size < 2**15 else np.int32
        rate_den = 1
        for r in rates:
            rate_den = math.lcm(rate_den, r.denominator)
        n = sum(part[0].size for part in self.parts)
        src, dst, piece = (np.empty(n, dtype=np.int32) for _ in range(3))
        nv = np.empty(n, dtype=np.int8)
        start, dur = np.empty(n, dtype=np.int64), np.empty(n, dtype=cls_t)
        any_rate = rates != [Fraction(1)]
        rate_int = np.array([r.numerator * (rate_den // r.denominator) for r in rates], dtype=np.int64)
        top_rate = int(rate_int.max()) if rates else 1
        rate_t = np.int16 if top_rate < 2**15 else (np.int32 if top_rate < 2**31 else np.int64)
        rate = np.empty(n, dtype=rate_t) if any_rate else None      # numerators: small integers
        at = 0
        self.parts.reverse()
        while self.parts:                      # copy each part in, freeing it as it goes
            s_, d_, pc, units, unit, offset, v_, (r_cls, r_list) = self.parts.pop()
            m = s_.size
            u_i, o_i = unit.numerator * (scale // unit.denominator), offset.numerator * (scale // offset.denominator)
            if m and (int(units.max()) + 1) * u_i + o_i >= INT64_SAFE:
                raise OverflowError("event_arrays: starts beyond int64 on this grid")
            sl = slice(at, at + m)
            np.multiply(units, u_i, out=start[sl], dtype=np.int64)
            start[sl] += o_i
            src[sl], dst[sl], piece[sl], nv[sl] = s_, d_, pc, v_
            r_global = np.array([rates.index(r) for r in r_list], dtype=np.int64)
            rc = r_global[0] if r_cls is None else r_global[r_cls]
            slower = np.maximum(slow_cls[s_], slow_cls[d_]) * (v_ == 0)
            dur[sl] = size_cls[pc] * strides[0] + slower * strides[1] + v_ * strides[2] + rc
            if rate is not None:
                rate[sl] = rate_int[rc]
            at += m
        ops = [(t.numerator * (scale // t.denominator), r, pc) for t, r, pc in self.ops]
        release_heap()
        # the coarsest grid that holds every value (a smaller scale leaves room for o, Li, L)
        common = math.gcd(scale, int(np.gcd.reduce(start)) if n else 0, int(np.gcd.reduce(dur_tab)),
                          *[t for t, _, _ in ops])
        if common > 1:
            start //= common
            dur_tab //= common
            scale //= common
            ops = [(t // common, r, pc) for t, r, pc in ops]
        return EventArrays(c.p, self.pieces, src, dst, piece, nv if nv.any() else None, start, dur, dur_tab,
                           scale, rate, rate_den, ops)


def release_heap() -> None:
    """Hand freed heap memory back to the system (glibc's malloc_trim; elsewhere nothing): the
    parts of a builder are small arrays from the heap, and without this the peak RSS of the
    timing that follows counts them again."""
    try:
        import ctypes
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def capacity_ok(port: np.ndarray, start: np.ndarray, end: np.ndarray, rate: np.ndarray, den: int,
                chunk: int = 1 << 22) -> bool:
    """Every port's summed rate ≤ 1 (den / den) at every instant (optcc.timing's exclusive model;
    flows ending at t have left when those starting at t enter). The flows must be sorted by
    start (Prepared's order). A port's load is largest at some flow's start s: the rates of its
    flows with start ≤ s minus those with end ≤ s, two prefix sums over the flows grouped by port
    (a stable sort keeps them in start order) and the ends sorted by (port, end); ports in
    blocks of about `chunk` flows. Exact."""
    n = port.size
    if n == 0:
        return True
    top = int(end.max()) + 1
    if (int(port.max()) + 1) * top >= 2**62:
        raise OverflowError("event_arrays: port·time keys beyond int64")
    order = np.argsort(port, kind="stable")          # radix sort for int16 ports
    counts = np.bincount(port, minlength=int(port.max()) + 1)
    cuts, acc = [0], 0
    for c in counts.tolist():
        acc += c
        if acc - cuts[-1] >= chunk:
            cuts.append(acc)
    if cuts[-1] != n:
        cuts.append(n)
    for a, b in zip(cuts[:-1], cuts[1:]):
        sel = order[a:b]
        pt = port[sel].astype(np.int64)
        st, en, r = start[sel], end[sel], rate[sel]
        del sel
        new = np.empty(pt.size, dtype=bool)              # first flow of each (port, start) tie group
        new[0] = True
        new[1:] = (pt[1:] != pt[:-1]) | (st[1:] != st[:-1])
        last = np.flatnonzero(np.append(new[1:], True))  # last flow of each tie group
        started = np.cumsum(r)[last][np.cumsum(new) - 1]  # Σ rates to the end of the flow's tie group
        del new, last
        ek = pt * top + en
        del en
        if not (ek[1:] >= ek[:-1]).all():
            o2 = np.argsort(ek, kind="stable")       # timsort: the ends come in long sorted runs (start order)
            ek, r = ek[o2], r[o2]
            del o2
        ended = np.concatenate([[0], np.cumsum(r)])
        idx = np.searchsorted(ek, pt * top + st, side="right")   # ends ≤ (port, s) in this block
        if not (started - ended[idx] <= den).all():
            return False
    return True
