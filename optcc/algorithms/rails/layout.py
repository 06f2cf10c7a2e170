"""optcc_rails' NVLink plan on numpy arrays: the lead, reduce-scatter and all-gather passes.

Two parts:
- `ArrayRail`: a rail of more than RING_MAX_Q nodes held as its construction's EventArrays (the
  registry's `arrays`), not as Flow objects; its Schedule is built only when flows are asked for
  (optcc_rails.build). Its first touches and last writes come from `touch_matrices`.
- `layout`: per (server, rail) the NVLink streams of optcc_rails._Plan, as cumulative sums and
  max-plus scans instead of a loop per task; with `starts`, every task's start and rate, which
  `records` lists in the order the plan emits its flows. The loop these passes replace is kept in
  tests/optcc/rails_reference.py, which the tests hold them to, task by task.
Values are int64 where every value the passes form fits (`_exact`), Python ints (dtype object)
otherwise: the same operations, exact either way.

Why the passes vectorize (derived). A rail's NVLink stream at a server advances only by its own
pieces, in its own (first touch, piece) or (last write, piece) order, so its free time is a
cumulative sum. The rate switches are prefixes, because a half-rate task is never shorter than
its full-rate one (half ≤ full, optcc_rails._rates) and start times only grow:
- reduce-scatter: a task runs at the one-kind rate while its full-rate end is ≤ the server's
  first all-gather; the first task past it ends later still at the half rate, so every later
  task starts past it too;
- all-gather: st_i = max(release_i, free_{i−1}), a max-plus scan: with C the cumulative
  durations, free_i = C_i + max_{j≤i}(release_j − C_{j−1}); a task runs at the half rate while
  it starts before the server's last reduce-scatter end, so the scan switches to full-rate
  durations once, at the first start at or past it.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from optcc.event_arrays import INT64_SAFE as INT64_SAFE    # re-exported: optcc_rails reads rails_layout.INT64_SAFE

if TYPE_CHECKING:
    import numpy.typing as npt

    from optcc.cluster import Cluster
    from optcc.event_arrays import EventArrays
    from optcc.schedule import Flow, LocalOp, Schedule

    Ints = npt.NDArray[np.int64]
    Touches = tuple[Ints, Ints, int]        # (first touch, last write, scale): q × P matrices on a grid

MISSING = -1                     # a (node, piece) no flow touches (dense for every AllReduce rail)


class ArrayRail:
    """A rail's g = 1 schedule as EventArrays (`arrays`); `schedule` builds the same schedule
    (the g = 1 OptCC record optcc.algorithms.flat chooses) on first use, for its flows, local ops and meta."""

    algorithm = "optcc"          # what build_schedule("optcc", …) states in meta

    def __init__(self, inst: Cluster, k: int, arrays: EventArrays) -> None:
        self.cluster, self.k, self.arrays = inst, k, arrays
        self.pieces = arrays.pieces
        self._schedule: Schedule | None = None

    @property
    def schedule(self) -> Schedule:
        if self._schedule is None:
            from optcc.algorithms import flat
            from optcc.algorithms.record import build_record
            self._schedule = build_record(flat.choose(self.cluster), self.cluster, self.k)
        return self._schedule

    @property
    def flows(self) -> list[Flow]:
        return self.schedule.flows

    @property
    def local_ops(self) -> list[LocalOp]:
        return self.schedule.local_ops

    @property
    def meta(self) -> dict[str, Any]:
        return self.schedule.meta

    def slot_and_touches(self, q: int) -> tuple[Fraction, Touches]:
        """(the latest flow end, exact: what optcc_rails reads from IntegerTimes for a Schedule;
        (first touch, last write, scale) as q × P matrices on the arrays' grid)."""
        a = self.arrays
        ends = a.start + a.dur
        touches = touch_matrices(a.src, a.dst, a.piece, a.start, ends, q, len(a.pieces)) + (a.scale,)
        return Fraction(int(ends.max()), a.scale), touches


def array_rail(inst: Cluster, k: int) -> ArrayRail | None:
    """`inst`'s OptCC schedule as an ArrayRail where its construction has an array form (EventArrays,
    or FlowArrays, whose NIC durations ArrayBuilder computes as optcc.timing does), else None."""
    from optcc.algorithms.limits import check_work
    from optcc.algorithms.families.arrays import FlowArrays
    from optcc.algorithms.flat import choose
    from optcc.event_arrays import ArrayBuilder, EventArrays
    check_work(inst, k)                      # the same refusal as building it
    record = choose(inst)
    arrays = record.arrays(inst, k) if record.arrays is not None else None
    if isinstance(arrays, FlowArrays):       # NIC flows at rate 1, no local ops
        b = ArrayBuilder(inst, arrays.pieces)
        b.add(arrays.src, arrays.dst, arrays.piece, arrays.start, Fraction(1, arrays.scale))
        arrays = b.finish()
    if not isinstance(arrays, EventArrays) or arrays.nv is not None or arrays.rate is not None:
        return None
    return ArrayRail(inst, k, arrays)


def touch_matrices(src: npt.ArrayLike, dst: npt.ArrayLike, piece: npt.ArrayLike, start: npt.ArrayLike,
                   end: npt.ArrayLike, q: int, P: int) -> tuple[Ints, Ints]:
    """Per (node, piece): the start of its first flow (either end) and the end of the last flow
    into it, as q × P int64 matrices (MISSING where none)."""
    src, dst, piece = (np.asarray(x, dtype=np.int64) for x in (src, dst, piece))
    start, end = np.asarray(start, dtype=np.int64), np.asarray(end, dtype=np.int64)
    ft = np.full(q * P, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(ft, src * P + piece, start)
    np.minimum.at(ft, dst * P + piece, start)
    ft[ft == np.iinfo(np.int64).max] = MISSING
    lw = np.full(q * P, MISSING, dtype=np.int64)
    np.maximum.at(lw, dst * P + piece, end)
    return ft.reshape(q, P), lw.reshape(q, P)


def int_dtype(values: Iterable[int]) -> Any:
    """int64 where every value is below INT64_SAFE, else object (Python ints): the layout's inputs."""
    return np.int64 if all(v < INT64_SAFE for v in values) else object


def dict_matrices(ft: Sequence[dict[int, int]], lw: Sequence[dict[int, int]], P: int) -> tuple[Ints, Ints]:
    """optcc_rails._touches' per-node dicts as touch_matrices' matrices (`int_dtype`)."""
    dtype = int_dtype(v for rows in (ft, lw) for row in rows for v in row.values())
    out = []
    for rows in (ft, lw):
        m = np.full((len(rows), P), MISSING, dtype=dtype)
        for s, row in enumerate(rows):
            if row:
                m[s, list(row)] = list(row.values())
        out.append(m)
    return out[0], out[1]


class _Rail:
    """One representative rail on the plan's grid: touches in global units (× mult) and its
    tasks' durations, sorted by (first touch, piece) and by (last write, piece) per server.
    `streams` adds each task's start and rate (`rs_start`, `rs_half`, `ag_start`, `ag_half`)."""

    def __init__(self, ft: Ints, lw: Ints, mult: int, durf: Ints, durh: Ints) -> None:
        o1 = np.argsort(ft, axis=1, kind="stable")          # ties: by piece, as the loop's (time, key)
        self.rs_piece = o1
        self.ft = np.take_along_axis(ft, o1, 1) * mult
        self.rs_full, self.rs_half_dur = durf[o1], durh[o1]
        self.cf = np.cumsum(self.rs_full, axis=1)         # free after task i, every task at the full rate
        self.ch = np.cumsum(self.rs_half_dur, axis=1)     # … every task at the half rate
        o2 = np.argsort(lw, axis=1, kind="stable")
        self.ag_piece = o2
        self.lw = np.take_along_axis(lw, o2, 1) * mult
        self.ag_full, self.ag_half_dur = durf[o2], durh[o2]
        self.lw_min = self.lw[:, 0]
        self.rs_start: Any = None
        self.rs_half: Any = None
        self.ag_start: Any = None
        self.ag_half: Any = None


def _exact(ft: Ints, lw: Ints, mult: int, durf: Ints, durh: Ints, nic: int) -> bool:
    """True where some value the passes form may pass INT64_SAFE: they then run on Python ints."""
    if mult >= INT64_SAFE or ft.dtype == object or lw.dtype == object or durf.dtype == object \
            or durh.dtype == object:
        return True
    top = max(int(ft.max()), int(lw.max())) * mult
    worst = max(nic, 2 * top + 2 * (int(durf.sum()) + int(durh.sum())))
    return 2 * worst + nic >= INT64_SAFE


def _rs_free(r: _Rail, first_ag: Ints) -> tuple[Ints, Ints]:
    """Free times after each reduce-scatter task and the tasks at the half rate: full rate while
    the full-rate end is ≤ the server's first all-gather (a prefix, module docstring), the half
    rate from there on."""
    cut = (r.cf <= first_ag[:, None]).sum(axis=1)            # tasks at the full rate, per server
    idx = np.arange(r.cf.shape[1])[None, :]
    before = np.where(cut > 0, np.take_along_axis(r.cf, np.maximum(cut - 1, 0)[:, None], 1)[:, 0], 0)
    ch_before = np.where(cut > 0, np.take_along_axis(r.ch, np.maximum(cut - 1, 0)[:, None], 1)[:, 0], 0)
    half = idx >= cut[:, None]
    return np.where(half, before[:, None] + r.ch - ch_before[:, None], r.cf), half


def _ag(r: _Rail, D: int, last_rs: Ints, starts: bool) -> tuple[Any, Any, Ints]:
    """Per server the stream's free time after its last all-gather task and, with `starts`, per
    task its start and whether it runs at the half rate (else None, None; module docstring)."""
    rel = D + r.lw
    q, P = rel.shape
    ch = np.cumsum(r.ag_half_dur, axis=1)
    ch_prev = ch - r.ag_half_dur
    fh = ch + np.maximum.accumulate(rel - ch_prev, axis=1)     # free after i, every task at the half rate
    zero = np.zeros((q, 1), dtype=rel.dtype)
    st = np.maximum(rel, np.concatenate([zero, fh[:, :-1]], axis=1))
    cut = (st < last_rs[:, None]).sum(axis=1)                  # tasks at the half rate (st only grows)
    half = np.arange(P)[None, :] < cut[:, None]
    if (cut == P).all():
        return (st, half, fh[:, -1]) if starts else (None, None, fh[:, -1])
    cf = np.cumsum(r.ag_full, axis=1)
    cf_prev = cf - r.ag_full
    f0 = np.where(cut > 0, np.take_along_axis(fh, np.maximum(cut - 1, 0)[:, None], 1)[:, 0], 0)  # free before the switch
    cf_cut = np.take_along_axis(cf_prev, np.minimum(cut, P - 1)[:, None], 1)[:, 0]    # C_full before it
    x = rel - cf_prev
    x = np.where(half, np.iinfo(np.int64).min // 4 if x.dtype != object else x.min() - 1, x)
    if not starts:
        return None, None, np.where(cut < P, cf[:, -1] + np.maximum(f0 - cf_cut, x.max(axis=1)), fh[:, -1])
    free = np.where(half, fh, cf + np.maximum((f0 - cf_cut)[:, None], np.maximum.accumulate(x, axis=1)))
    st = np.maximum(rel, np.concatenate([zero, free[:, :-1]], axis=1))
    return st, half, free[:, -1]


def layout(reps_touches: Sequence[tuple[Ints, Ints]], mults: Sequence[int], durf: Sequence[Ints],
           durh: Sequence[Ints], nic: int, proportional: bool, lead_steps: int,
           starts: bool = False) -> tuple[int, int, list[_Rail]]:
    """(lead D, end, rails) on the plan's grid, one representative rail per entry: the lead from
    every reduce-scatter at the half rate (bisected by `_smallest_lead` where `proportional`),
    the reduce-scatter pass, the all-gather pass. With `starts` each rail also holds its tasks'
    starts and rates (`_Rail`). Values run as int64 where every one fits, else as Python ints."""
    for ft, lw in reps_touches:
        if ft.size == 0 or (ft == MISSING).any() or (lw == MISSING).any():
            raise ValueError("rails layout: a rail leaves a (node, piece) untouched; not an AllReduce rail")
    if any(_exact(ft, lw, m, df, dh, nic) for (ft, lw), m, df, dh in zip(reps_touches, mults, durf, durh)):
        reps_touches = [(ft.astype(object), lw.astype(object)) for ft, lw in reps_touches]
        durf, durh = [d.astype(object) for d in durf], [d.astype(object) for d in durh]
    rails = [_Rail(ft, lw, m, df, dh) for (ft, lw), m, df, dh in zip(reps_touches, mults, durf, durh)]
    D = 0
    for r in rails:
        D = max(D, int((r.ch - r.ft).max()))
    lw_min = np.min([r.lw_min for r in rails], axis=0)
    if proportional and 50 * D > nic:
        D = _smallest_lead(D, rails, lw_min, lead_steps)
    first_ag = D + lw_min
    rs = [_rs_free(r, first_ag) for r in rails]
    last_rs = np.max([free[:, -1] for free, _ in rs], axis=0)
    end = D + nic
    for r, (free, half) in zip(rails, rs):
        ag_start, ag_half, ag_end = _ag(r, D, last_rs, starts)
        end = max(end, int(ag_end.max()))
        if starts:
            r.rs_start = free - np.where(half, r.rs_half_dur, r.rs_full)
            r.rs_half, r.ag_start, r.ag_half = half, ag_start, ag_half
    return D, end, rails


def _smallest_lead(hi: int, rails: Sequence[_Rail], lw_min: Ints, steps: int) -> int:
    """The smallest lead, to `steps` halvings of [0, hi], that meets every first touch when
    reduce-scatter tasks ending before the server's first all-gather run at the one-kind rate.
    need(D), the latest finish − first touch under that rule, does not grow with D (a later first
    all-gather only lets more tasks run at the faster rate), so bisection keeps need(hi) ≤ hi
    (derived). Every midpoint is exact: the plan's grid holds 2^steps."""
    def need(D: int) -> int:
        return max(0, max(int((_rs_free(r, D + lw_min)[0] - r.ft).max()) for r in rails))
    lo = 0
    for _ in range(steps):
        assert (lo + hi) % 2 == 0, "the grid holds 2^steps"
        mid = (lo + hi) // 2
        if need(mid) <= mid:
            hi = mid
        else:
            lo = mid
    return hi


def records(D: int, rails: Sequence[_Rail], laid_as: Sequence[tuple[int, int]]) -> tuple[Any, ...]:
    """The NVLink tasks of the rails `laid_as` ((rail l, its representative's index in `rails`)
    pairs) as columns server, rail, piece, start, half rate (1) or full (0), "add" (1) or "copy"
    (0), each the g − 1 flows of one task: per server its reduce-scatters by (first touch, rail,
    piece), then its all-gathers by (release, rail, piece)."""
    cols: list[list[Any]] = [[] for _ in range(7)]              # + the sort key
    for l, i in laid_as:
        r = rails[i]
        q, P = r.ft.shape
        server = np.repeat(np.arange(q, dtype=np.int64), P)
        for adds, key, piece, st, half in ((1, r.ft, r.rs_piece, r.rs_start, r.rs_half),
                                           (0, D + r.lw, r.ag_piece, r.ag_start, r.ag_half)):
            for col, v in zip(cols, (server, np.full(q * P, l, dtype=np.int64), piece.ravel(), st.ravel(),
                                     half.ravel().astype(np.int64), np.full(q * P, adds, dtype=np.int64),
                                     key.ravel())):
                col.append(v)
    out = [np.concatenate(c) for c in cols]
    order = np.lexsort((out[2], out[1], out[6], 1 - out[5], out[0]))    # server, kind, key, rail, piece
    return tuple(c[order] for c in out[:6])
