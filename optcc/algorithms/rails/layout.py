"""optcc_rails' times on numpy arrays (what times Figure 21's g = 8 row up to p = 1024).

Two parts, each giving the same integers as optcc_rails' Python code (tests/optcc/test_rails_layout.py):
- `ArrayRail`: a rail of more than RING_MAX_Q nodes held as its construction's EventArrays (the
  registry's `arrays`), not as Flow objects; its Schedule is built only when flows are asked for
  (optcc_rails.build). Its first touches and last writes come from `touch_matrices`.
- `layout`: the NVLink lead, reduce-scatter and all-gather passes of optcc_rails._Plan with
  cumulative sums per (server, rail) instead of a Python loop per (server, rail, piece).

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

from collections.abc import Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from optcc.algorithms.rails.lead import bisect_lead
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


def dict_matrices(ft: Sequence[dict[int, int]], lw: Sequence[dict[int, int]], P: int) -> tuple[Ints, Ints]:
    """optcc_rails._touches' per-node dicts as touch_matrices' matrices."""
    out = []
    for rows in (ft, lw):
        m = np.full((len(rows), P), MISSING, dtype=np.int64)
        for s, row in enumerate(rows):
            if row:
                m[s, list(row)] = list(row.values())
        out.append(m)
    return out[0], out[1]


def matrix_dicts(ft: Ints, lw: Ints) -> tuple[list[dict[int, int]], list[dict[int, int]]]:
    """touch_matrices' matrices as optcc_rails._touches' per-node dicts."""
    out = []
    for m in (ft, lw):
        out.append([{int(pi): int(m[s, pi]) for pi in np.flatnonzero(m[s] != MISSING)} for s in range(m.shape[0])])
    return out[0], out[1]


class _Rail:
    """One representative rail on the plan's grid: touches in global units (× mult) and its
    tasks' durations, sorted by (first touch, piece) and by (last write, piece) per server."""

    def __init__(self, ft: Ints, lw: Ints, mult: int, durf: Ints, durh: Ints) -> None:
        o1 = np.argsort(ft, axis=1, kind="stable")          # ties: by piece, as the loop's (time, key)
        self.ft = np.take_along_axis(ft, o1, 1) * mult
        self.rs_full, self.rs_half = durf[o1], durh[o1]
        self.cf = np.cumsum(self.rs_full, axis=1)         # free after task i, every task at the full rate
        self.ch = np.cumsum(self.rs_half, axis=1)         # … every task at the half rate
        o2 = np.argsort(lw, axis=1, kind="stable")
        self.lw = np.take_along_axis(lw, o2, 1) * mult
        self.ag_full, self.ag_half = durf[o2], durh[o2]
        self.lw_min = self.lw[:, 0]


def fits(reps_touches: Sequence[tuple[Ints, Ints]], mults: Sequence[int], durf: Sequence[Ints], durh: Sequence[Ints],
         nic: int) -> bool:
    """Every value the layout forms stays below INT64_SAFE, and every (node, piece) is touched."""
    worst = nic
    for (ft, lw), mult, df, dh in zip(reps_touches, mults, durf, durh):
        if mult >= INT64_SAFE or ft.size == 0 or (ft == MISSING).any() or (lw == MISSING).any():
            return False
        top = max(int(ft.max()), int(lw.max())) * mult
        worst = max(worst, 2 * top + 2 * (int(df.sum()) + int(dh.sum())))
    return 2 * worst + nic < INT64_SAFE


def _rs_free(r: _Rail, first_ag: Ints) -> Ints:
    """Free times after each reduce-scatter task: full rate while the full-rate end is ≤ the
    server's first all-gather (a prefix, module docstring), the half rate from there on."""
    cut = (r.cf <= first_ag[:, None]).sum(axis=1)            # tasks at the full rate, per server
    idx = np.arange(r.cf.shape[1])[None, :]
    before = np.where(cut > 0, np.take_along_axis(r.cf, np.maximum(cut - 1, 0)[:, None], 1)[:, 0], 0)
    ch_before = np.where(cut > 0, np.take_along_axis(r.ch, np.maximum(cut - 1, 0)[:, None], 1)[:, 0], 0)
    return np.where(idx < cut[:, None], r.cf, before[:, None] + r.ch - ch_before[:, None])


def _ag_end(r: _Rail, D: int, last_rs: Ints) -> Ints:
    """Per server, the stream's free time after its last all-gather task (module docstring)."""
    rel = D + r.lw
    q, P = rel.shape
    ch = np.cumsum(r.ag_half, axis=1)
    ch_prev = ch - r.ag_half
    fh = ch + np.maximum.accumulate(rel - ch_prev, axis=1)     # free after i, every task at the half rate
    st = np.maximum(rel, np.concatenate([np.zeros((q, 1), dtype=np.int64), fh[:, :-1]], axis=1))
    cut = (st < last_rs[:, None]).sum(axis=1)                  # tasks at the half rate (st only grows)
    out = fh[:, -1].copy()
    rest = cut < P
    if rest.any():
        cf = np.cumsum(r.ag_full, axis=1)
        cf_prev = cf - r.ag_full
        idx = np.arange(P)[None, :]
        c0 = np.maximum(cut - 1, 0)[:, None]
        f0 = np.where(cut > 0, np.take_along_axis(fh, c0, 1)[:, 0], 0)         # free before the switch
        cf_cut = np.take_along_axis(cf_prev, np.minimum(cut, P - 1)[:, None], 1)[:, 0]  # C_full before it
        x = np.where(idx >= cut[:, None], rel - cf_prev, np.iinfo(np.int64).min // 4)
        tail = cf[:, -1] + np.maximum(f0 - cf_cut, x.max(axis=1))
        out = np.where(rest, tail, out)
    return out


def layout(reps_touches: Sequence[tuple[Ints, Ints]], mults: Sequence[int], durf: Sequence[Ints],
           durh: Sequence[Ints], nic: int, proportional: bool, lead_steps: int) -> tuple[int, int]:
    """(lead D, end) on the plan's grid: optcc_rails._Plan's three passes (and _smallest_lead
    where `proportional`), one representative rail per entry."""
    rails = [_Rail(ft, lw, m, df, dh) for (ft, lw), m, df, dh in zip(reps_touches, mults, durf, durh)]
    D = 0
    for r in rails:                               # lead: every reduce-scatter at the half rate
        D = max(D, int((r.ch - r.ft).max()))
    lw_min = np.min([r.lw_min for r in rails], axis=0)
    if proportional and 50 * D > nic:
        D = _smallest_lead(D, rails, lw_min, lead_steps)
    first_ag = D + lw_min
    last_rs = np.max([_rs_free(r, first_ag)[:, -1] for r in rails], axis=0)
    end = D + nic
    for r in rails:
        end = max(end, int(_ag_end(r, D, last_rs).max()))
    return D, end


def _smallest_lead(hi: int, rails: Sequence[_Rail], lw_min: Ints, steps: int) -> int:
    """optcc_rails._smallest_lead's bisection with need(D) from `_rs_free`."""
    def need(D: int) -> int:
        return max(0, max(int((_rs_free(r, D + lw_min) - r.ft).max()) for r in rails))
    return bisect_lead(hi, need, steps)
