"""optcc.timing.event_time, vectorised: the same event model, one slot's flows at a time in numpy.

The event model (optcc.timing) reads, for each flow, the largest landing of the writes to its
(src, piece) and the largest end of the flows on its two ports among those whose *slot* end is
≤ its slot start. Flows that start at the same instant t never see each other (every duration
is > 0, so none of them has a slot end ≤ t), so a group of equal starts can be processed at
once: commit every pending write/port end with slot end ≤ t (running maxima), then compute all
starts of the group from the committed maxima. Local ops only read (their push never raises a
maximum), so they only enter the finish time. Exact: integers on one grid (time = value/scale),
int64 only where a bound on every value fits (else optcc.timing.event_time is used).

Used by `optcc time` (optcc_app.compose.timing_report) and the paper checks
(paper_checks.event_checks, verdicts by event time); tested equal to optcc.timing.event_time on
generated schedules (tests/optcc/test_event_timer.py).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from optcc.schedule import Schedule
from optcc.errors import OptccError
from optcc.timing import DISCIPLINES, IntegerTimes, event_time

if TYPE_CHECKING:
    from optcc.algorithms.families.arrays import FlowArrays
    from optcc.cluster import Cluster
    from optcc.event_arrays import EventArrays

INT_LIMIT = 2**62
Chain = Sequence[tuple[np.ndarray, np.ndarray]]     # NVLink batch rounds: (flows, the flow before each)


def _commit(pending: list[tuple[int, int, np.ndarray, np.ndarray, np.ndarray]], state: np.ndarray,
            t: int) -> list[tuple[int, int, np.ndarray, np.ndarray, np.ndarray]]:
    """Scatter-max into `state` every pending entry's values whose slot end is ≤ t (each entry's
    keys and values are its slot ends' flows, one or more times over); the entries left."""
    keep: list[tuple[int, int, np.ndarray, np.ndarray, np.ndarray]] = []
    for entry in pending:
        lo, hi, se, keys, vals = entry
        if lo > t:
            keep.append(entry)
            continue
        if hi <= t:
            np.maximum.at(state, keys, vals)
            continue
        m = np.tile(se <= t, keys.size // se.size)
        np.maximum.at(state, keys[m], vals[m])
        rest = ~m
        se = se[rest[:se.size]]
        keep.append((int(se.min()), hi, se, keys[rest], vals[rest]))
    return keep


def _units(x: Fraction, mult: int, scale: int) -> int:
    return x.numerator * (mult // x.denominator) * scale


class GroupTimer:
    """Running maxima of write landings (per rank·piece key) and port ends (per port key), in one
    array `state` (write keys first, then the ports at offset n_write_keys), so that committing a
    group is one scatter-max."""

    def __init__(self, n_write_keys: int, n_ports: int, o: int, li: int, wire: int, step_pieces: int = 0) -> None:
        """`step_pieces`: 0, or the pieces per rank (keys are rank·pieces + piece) for the step
        discipline (optcc.timing): a flow also waits for every flow of its two ranks with slot end
        ≤ its slot start to land (`rank_landed`, committed as the ports are)."""
        self.state = np.zeros(n_write_keys + n_ports, dtype=np.int64)
        self.nw = n_write_keys
        self.step_pieces = step_pieces
        self.rank_landed = np.zeros(n_write_keys // step_pieces if step_pieces else 0, dtype=np.int64)
        self.o, self.li, self.wire = o, li, wire
        # pending groups: (least slot end, largest slot end, slot ends, state keys (writes, sends,
        # receives), their values (landings, ends, ends)); the step discipline's: (…, src and dst
        # ranks, landings twice)
        self.pending: list[tuple[int, int, np.ndarray, np.ndarray, np.ndarray]] = []
        self.rank_pending: list[tuple[int, int, np.ndarray, np.ndarray, np.ndarray]] = []
        self.finish = 0

    def state_keys(self, write_key: np.ndarray, send: np.ndarray, recv: np.ndarray) -> np.ndarray:
        """A group's keys into `state`: its write keys, then its send ports, then its receive ports."""
        return np.concatenate((write_key.astype(np.int64), send.astype(np.int64) + self.nw,
                               recv.astype(np.int64) + self.nw))

    def commit(self, t: int) -> None:
        """Raise the maxima by every pending flow with slot end ≤ t (a group wholly before or after
        t is told by its least and largest slot end, without a pass over its flows)."""
        self.pending = _commit(self.pending, self.state, t)
        if self.rank_pending:
            self.rank_pending = _commit(self.rank_pending, self.rank_landed, t)

    def group(self, t: int, read_key: np.ndarray, keys: np.ndarray, dur_o: np.ndarray, slot_end: np.ndarray,
              se_lo: int, se_hi: int, chain: Chain = ()) -> None:
        """Flows starting at slot time t: read keys, `keys` (state_keys: write keys, then the send
        and the receive port keys, three times as long), `dur_o` (each flow's duration in event
        units plus o; a batched NVLink flow's r·(o + d)), slot ends and their least and largest.
        `chain`: the NVLink batches (optcc.timing), a round per position in them: (flows, the flow
        before each in its batch), which it follows."""
        self.commit(t)
        n = read_key.size
        if not n:
            return
        st = self.state
        pr = st[keys[n:]]
        ready = st[read_key]
        ready += self.li
        np.maximum(ready, pr[:n], out=ready)
        np.maximum(ready, pr[n:], out=ready)
        if self.step_pieces:
            src, dst = read_key // self.step_pieces, keys[:n] // self.step_pieces
            np.maximum(ready, self.rank_landed[src], out=ready)
            np.maximum(ready, self.rank_landed[dst], out=ready)
        ends = ready
        ends += dur_o
        for idx, before in chain:
            ends[idx] = np.maximum(ends[idx], ends[before] + dur_o[idx])
        lands = ends + self.wire
        if self.step_pieces:                   # flows from their slot end on wait for these
            self.rank_pending.append((se_lo, se_hi, slot_end, np.concatenate((src, dst)),
                                      np.concatenate((lands, lands))))
        self.finish = max(self.finish, int(lands.max()))
        self.pending.append((se_lo, se_hi, slot_end, keys, np.concatenate((lands, ends, ends))))

    def read_ops(self, t: int, keys: np.ndarray) -> None:
        """Local ops at t: they read the committed value (after landings ≤ t), change no maximum."""
        self.commit(t)
        if len(keys):
            self.finish = max(self.finish, int(self.state[keys].max()))


def _latency_ints(grid_scale: int, o: Fraction, li: Fraction, lat: Fraction, rate_den: int = 1) -> tuple[int, int, int, int, int]:
    mult = math.lcm(o.denominator, li.denominator, lat.denominator) * rate_den      # rate_den | every value
    return mult, grid_scale * mult, _units(o, mult, grid_scale), _units(li, mult, grid_scale), \
        _units(lat, mult, grid_scale)


def key_t_of(p: int, n_pieces: int) -> type[np.signedinteger[Any]]:
    """int32 index arrays where every rank·piece key fits (half the memory of int64)."""
    return np.int32 if p * max(n_pieces, 4) < 2**31 else np.int64


class Prepared:
    """A schedule's flows as index arrays on its integer grid, timed under any (o, Li, L)."""

    def __init__(self, schedule: Schedule, grid: IntegerTimes | None = None) -> None:
        self.schedule: Schedule | None = schedule
        self.rate: np.ndarray | None = None
        self.rate_den = 1
        self.grid: IntegerTimes | None = grid or IntegerTimes(schedule)
        grid = self.grid
        flows = schedule.flows
        n = len(flows)
        self.fallback = n == 0 or min(grid.durs) <= 0
        if self.fallback:
            self.n = n
            return
        src = np.fromiter((f.src for f in flows), dtype=np.int64, count=n)
        dst = np.fromiter((f.dst for f in flows), dtype=np.int64, count=n)
        piece = np.fromiter((f.piece for f in flows), dtype=np.int64, count=n)
        nv = np.fromiter((f.link == "nvlink" for f in flows), dtype=np.int64, count=n)
        ops_at: dict[int, list[int]] = {}
        for op, t in zip(schedule.local_ops, grid.op_times):
            ops_at.setdefault(t, []).append(op.rank * len(schedule.pieces) + op.piece)
        table, cls = np.unique(np.asarray(grid.durs, dtype=np.int64), return_inverse=True)
        rate = None
        if any(f.rate != 1 for f in flows):
            self.rate_den = math.lcm(*{f.rate.denominator for f in flows})
            rate = np.fromiter((f.rate.numerator * (self.rate_den // f.rate.denominator) for f in flows),
                               dtype=np.int64, count=n)
        self._arrays(schedule.cluster.p, len(schedule.pieces), grid.scale, src, dst, piece, nv,
                     np.asarray(grid.starts, dtype=np.int64), (cls.reshape(-1), table), ops_at, share=rate)

    @classmethod
    def from_arrays(cls, cluster: Cluster, fa: FlowArrays | EventArrays) -> Prepared:
        """Prepared from FlowArrays (optcc.algorithms.families.arrays: NIC flows at rate 1, no
        local ops), without a Schedule: durations piece size · max(ℓ_src, ℓ_dst) (Cluster.nic_time);
        or from EventArrays (optcc.event_arrays: durations, links, rates and local ops given).
        An EventArrays is consumed (its arrays are released as they are copied, to bound the peak)."""
        self = cls.__new__(cls)
        self.schedule, self.grid, self.fallback = None, None, False
        self.rate, self.rate_den = None, 1
        if hasattr(fa, "dur_cls"):
            return self._from_event_arrays(cast("EventArrays", fa))      # hasattr does not narrow the union
        from optcc.event_arrays import index_of
        sizes = sorted(set(fa.pieces))
        slows = sorted(set(cluster.slowdown))
        durs = {(a, b): x * y for a, x in enumerate(sizes) for b, y in enumerate(slows)}
        scale = fa.scale
        for d in durs.values():
            scale = math.lcm(scale, d.denominator)
        size_class = np.array(index_of(sizes, fa.pieces), dtype=np.int16)[fa.piece]
        slow = np.array(index_of(slows, cluster.slowdown), dtype=np.int16)
        slow_class = np.maximum(slow[fa.src], slow[fa.dst])
        table = np.array([[d.numerator * (scale // d.denominator) for b in range(len(slows))
                           for d in [durs[(a, b)]]] for a in range(len(sizes))], dtype=np.int64)
        if table.max() * len(fa) + (int(fa.start.max()) + 1) * (scale // fa.scale) >= INT_LIMIT / 4:
            raise OverflowError("event_timer: durations and starts beyond int64 on this grid")
        start = fa.start if scale == fa.scale else fa.start * (scale // fa.scale)
        flow_cls = size_class.astype(np.int32) * len(slows) + slow_class
        self._arrays(cluster.p, len(fa.pieces), scale, fa.src, fa.dst, fa.piece, 0, start,
                     (flow_cls, table.reshape(-1)), {})
        return self

    def _from_event_arrays(self, ea: EventArrays) -> Prepared:
        ea.check_unconsumed()
        if len(ea) == 0:
            raise ValueError("event_timer: no flows")
        if int(ea.dur_table.min()) <= 0:
            raise ValueError("event_timer: every duration must be > 0")
        if int(ea.start.max()) + int(ea.dur_table.max()) >= INT_LIMIT // 4:
            raise OverflowError("event_timer: durations and starts beyond int64 on this grid")
        ops_at: dict[int, list[int]] = {}
        for t, rank, pc in ea.ops:
            ops_at.setdefault(t, []).append(rank * len(ea.pieces) + pc)
        parts: list[Any] = [ea.src, ea.dst, ea.piece, 0 if ea.nv is None else ea.nv, ea.start, (ea.dur_cls, ea.dur_table)]
        rate = ea.rate
        ea.src = ea.dst = ea.piece = ea.nv = ea.start = ea.dur_cls = ea.rate = None  # type: ignore[assignment]  # consumed: its arrays are released
        self.rate_den = ea.rate_den
        self._arrays(ea.p, len(ea.pieces), ea.scale, parts[0], parts[1], parts[2], parts[3], parts[4], parts[5], ops_at,
                     rate=rate, consume=parts, share=rate)
        from optcc.event_arrays import release_heap
        release_heap()
        return self

    def _arrays(self, p: int, n_pieces: int, scale: int, src: np.ndarray, dst: np.ndarray, piece: np.ndarray,
                nv: np.ndarray | int, start: np.ndarray, dur: tuple[np.ndarray, np.ndarray], ops_at: dict[int, list[int]],
                rate: np.ndarray | None = None, consume: list[Any] | None = None,
                share: np.ndarray | None = None) -> None:
        """`dur`: (class per flow, int64 duration per class): a few bytes a flow instead of eight.
        `share`: every flow's rate, numerators over self.rate_den (None: all 1), for the NVLink
        batches (`_batches`)."""
        self.p, self.n_pieces, self.scale, self.n = p, n_pieces, scale, int(src.size)
        port_t = np.int16 if 4 * p < 2**15 else key_t_of(p, n_pieces)
        key_t = key_t_of(p, n_pieces)
        src, dst, piece = (np.asarray(a).astype(key_t, copy=False) for a in (src, dst, piece))
        nv = np.asarray(nv).astype(key_t, copy=False)
        if consume is not None:
            consume.clear()                  # the caller's list held the only other references
        order = np.argsort(start, kind="stable")
        start = start[order]
        dur_cls, self.dur_table = dur
        del dur
        self.dur_cls = dur_cls[order]
        del dur_cls
        self.slot_end = start + self.dur_table[self.dur_cls]
        self.read_key = (src * n_pieces + piece)[order]
        self.write_key = (dst * n_pieces + piece)[order]
        del piece
        self._batches(nv, order, start, share)
        self.send = ((src * 2 + nv) * 2).astype(port_t)[order]
        del src
        self.recv = ((dst * 2 + nv) * 2 + 1).astype(port_t)[order]
        del dst, nv
        self.rate = None if rate is None else rate[order]
        del order, rate
        cuts = np.flatnonzero(np.diff(start)) + 1
        self.bounds = np.concatenate([[0], cuts, [self.n]]).tolist()
        self.group_start = start[self.bounds[:-1]].tolist()     # the flows' starts: one per group
        del start
        self.max_end = int(self.slot_end.max())
        self.ops = [(t, np.array(ops_at[t], dtype=np.int64)) for t in sorted(ops_at)]

    def _batches(self, nv: np.ndarray, order: np.ndarray, start: np.ndarray, share: np.ndarray | None) -> None:
        """optcc.timing.nvlink_batches on the arrays (flows already in start order): batched flows
        `bat`, their (duration class, rate) classes, and per batch position ≥ 1 the chain rounds
        (flow, the flow before it), sorted by (start, position) so a group's rounds are slices."""
        self.bat = self.bat_at = np.zeros(0, dtype=np.int64)
        self.bat_cls = np.zeros(0, dtype=np.int64)
        self.bat_pairs: list[tuple[int, int]] = []          # per class: (duration class, rate numerator)
        self.chain_at = np.zeros(0, dtype=np.int64)          # per chain entry: its start, position, flow, before
        self.chain_pos = self.chain_idx = self.chain_prev = self.chain_at
        if not (nv.ndim and nv.any()):
            return
        idx = np.flatnonzero(nv[order])
        st, se = start[idx], self.slot_end[idx]
        rk, wk = self.read_key[idx], self.write_key[idx]
        src, dst, pc = rk // self.n_pieces, wk // self.n_pieces, rk % self.n_pieces
        if self.p * self.p * self.n_pieces < 2**62:        # (src, dst, piece) as one key: the same order
            o = np.lexsort((idx, (src.astype(np.int64) * self.p + dst) * self.n_pieces + pc, se, st))
        else:
            o = np.lexsort((idx, pc, dst, src, se, st))      # batches contiguous, each in piece order
        idx, st, se, src, dst = idx[o], st[o], se[o], src[o], dst[o]
        new = np.ones(idx.size, dtype=bool)
        new[1:] = (st[1:] != st[:-1]) | (se[1:] != se[:-1]) | (src[1:] != src[:-1]) | (dst[1:] != dst[:-1])
        head = np.flatnonzero(new)
        size = np.diff(np.append(head, idx.size))
        pos = np.arange(idx.size) - np.repeat(head, size)
        keep = np.repeat(size > 1, size)
        if not keep.any():
            return
        self.bat, self.bat_at = idx[keep], st[keep]
        d = self.dur_cls[self.bat].astype(np.int64)
        r = np.full(d.size, self.rate_den, dtype=np.int64) if share is None else share[order[self.bat]]
        pairs, inv = np.unique(d * (self.rate_den + 1) + r, return_inverse=True)
        self.bat_cls = inv.reshape(-1)
        self.bat_pairs = [(int(x) // (self.rate_den + 1), int(x) % (self.rate_den + 1)) for x in pairs]
        later = keep & (pos > 0)
        prev = np.flatnonzero(later) - 1
        c = np.lexsort((pos[later], st[later]))
        self.chain_at, self.chain_pos = st[later][c], pos[later][c]
        self.chain_idx, self.chain_prev = idx[later][c], idx[prev][c]

    def _state_keys(self, nw: int) -> np.ndarray:
        """GroupTimer state keys, group by group: a group of flows [a, e) holds [3a, 3e): its write
        keys, then nw + its send ports, then nw + its receive ports (GroupTimer.group)."""
        b = np.asarray(self.bounds, dtype=np.int64)
        size = np.diff(b)
        a, e = np.repeat(b[:-1], size), np.repeat(b[1:], size)
        i = np.arange(self.n, dtype=np.int64)
        keys = np.empty(3 * self.n, dtype=np.int64)
        keys[2 * a + i] = self.write_key
        keys[a + e + i] = self.send.astype(np.int64) + nw
        keys[2 * e + i] = self.recv.astype(np.int64) + nw
        return keys

    def slot_time(self) -> Fraction:
        """The latest flow end or local-op time (optcc.timing.slot_time)."""
        last = max([int(self.slot_end.max())] + [t for t, _ in self.ops]) if self.n else 0
        return Fraction(last, self.scale)

    def exclusive_ok(self) -> bool:
        """No two flows overlap on one port (optcc.timing's exclusive check for unit rates). The
        flows are sorted by start, so a stable sort by port orders each port's flows by start."""
        if self.rate is not None:
            from optcc.event_arrays import capacity_ok
            return all(capacity_ok(port, self.slot_end - self.dur_table[self.dur_cls], self.slot_end, self.rate, self.rate_den)
                       for port in (self.send, self.recv))
        for port in (self.send, self.recv):
            order = np.argsort(port, kind="stable")
            same = port[order]
            same = same[1:] == same[:-1]
            ends = self.slot_end[order]
            starts = ends - self.dur_table[self.dur_cls[order]]
            if (same & (starts[1:] < ends[:-1])).any():
                return False
        return True

    def event_time(self, o: Fraction = Fraction(0), li: Fraction = Fraction(0),
                   lat: Fraction = Fraction(0), discipline: str = "exclusive") -> Fraction:
        """optcc.timing.event_time under `discipline` ("shared": from the Schedule, exact, small only)."""
        o, li, lat = Fraction(o), Fraction(li), Fraction(lat)
        if discipline not in DISCIPLINES:
            raise OptccError("discipline", f"expected one of {DISCIPLINES}, got {discipline!r}")
        if self.fallback or discipline == "shared":
            if self.schedule is None:
                raise ValueError("event_timer: the shared discipline times a Schedule (optcc.event_shared)")
            return event_time(self.schedule, o, self.grid, li, lat, discipline)
        mult, scale, oi, lii, wi = _latency_ints(self.scale, o, li, lat)
        extra = 1                    # a grid that holds each batched flow's r·(o + d) (optcc.timing)
        for c, r in self.bat_pairs:
            extra = math.lcm(extra, Fraction((int(self.dur_table[c]) * mult + oi) * r, self.rate_den).denominator)
        mult, scale, oi, lii, wi = mult * extra, scale * extra, oi * extra, lii * extra, wi * extra
        # every value is ≤ max slot end + G·(o + Li + L), G the number of start groups (derived,
        # by induction over the groups: a flow's dependencies end by its slot start in earlier
        # groups, so its landing is ≤ its slot end + (its group's index + 1)·(o + Li + L))
        if self.max_end * mult + len(self.group_start) * (oi + lii + wi) >= INT_LIMIT // 4:
            if self.schedule is None:
                raise OverflowError("event_timer: event times beyond int64 on this grid")
            return event_time(self.schedule, o, self.grid, li, lat, discipline)
        timer = GroupTimer(self.p * self.n_pieces, self.p * 4, oi, lii, wi,
                           self.n_pieces if discipline == "step" else 0)
        ops, j = self.ops, 0
        b = self.bounds
        service = np.array([(int(self.dur_table[c]) * mult + oi) * r // self.rate_den for c, r in self.bat_pairs],
                           dtype=np.int64)       # r·(o + d): a batched flow's duration plus o
        dur_o = self.dur_table[self.dur_cls] * mult + oi
        dur_o[self.bat] = service[self.bat_cls]
        keys = self._state_keys(timer.nw)
        se_lo = np.minimum.reduceat(self.slot_end, b[:-1]).tolist() if self.n else []
        se_hi = np.maximum.reduceat(self.slot_end, b[:-1]).tolist() if self.n else []
        gs = np.asarray(self.group_start, dtype=np.int64)
        ch_lo = np.searchsorted(self.chain_at, gs).tolist()
        ch_hi = np.searchsorted(self.chain_at, gs, side="right").tolist()
        for gi, (t, a, e) in enumerate(zip(self.group_start, b[:-1], b[1:])):
            while j < len(ops) and ops[j][0] <= t:      # ops at t act before flows at t read
                timer.read_ops(*ops[j])
                j += 1
            chain: list[tuple[np.ndarray, np.ndarray]] = []
            if ch_hi[gi] > ch_lo[gi]:                   # NVLink batches (optcc.timing)
                cs = slice(ch_lo[gi], ch_hi[gi])
                pos, ci, cp = self.chain_pos[cs], self.chain_idx[cs] - a, self.chain_prev[cs] - a
                cuts = np.flatnonzero(np.diff(pos)) + 1
                chain = list(zip(np.split(ci, cuts), np.split(cp, cuts)))
            timer.group(t, self.read_key[a:e], keys[3 * a:3 * e], dur_o[a:e], self.slot_end[a:e],
                        se_lo[gi], se_hi[gi], chain)
        for op in ops[j:]:
            timer.read_ops(*op)
        return Fraction(timer.finish, scale)


def fast_event_time(schedule: Schedule, o: Fraction = Fraction(0), li: Fraction = Fraction(0),
                    lat: Fraction = Fraction(0), grid: IntegerTimes | None = None) -> Fraction:
    """optcc.timing.event_time(schedule, o, grid, li, lat), computed a slot group at a time."""
    return Prepared(schedule, grid).event_time(o, li, lat)


def ring_event_time(cluster: Cluster, o: Fraction = Fraction(0), li: Fraction = Fraction(0),
                    lat: Fraction = Fraction(0), discipline: str = "exclusive") -> Fraction:
    """Event time of NCCLNoFailure on a fault-free cluster without building its flows: the ring
    (g = 1, optcc.algorithms.ring.build, k = 1) or the flat ring (g > 1,
    baselines.flat_ring_allreduce), generated a synchronous step at a time as index arrays (the
    same flows, tested equal), timed as fast_event_time does. O(g·p) memory per step. Under
    "shared" it is the exclusive time: each receiver has one sender per step and link (g = 1),
    and a GPU's NVLink hops of a step come from one sender, sent one at a time either way."""
    from optcc.algorithms.baselines.rings import flat_ring_step
    from optcc.algorithms.ring.build import ring_step
    p, g = cluster.p, cluster.g
    assert not cluster.stragglers, "NCCLNoFailure: a fault-free cluster"
    o, li, lat = Fraction(o), Fraction(li), Fraction(lat)
    shard = Fraction(1, g * p)
    servers = p // g
    if g > 1:
        step, nv_rate = flat_ring_step(cluster)                # synchronous step: its slowest hop
    else:
        step, nv_rate = shard, Fraction(1)                    # one NIC hop (ℓ = 1)
    nic_d = cluster.nic_time(0, 0, shard)
    nv_d = cluster.nvlink_time(shard, nv_rate) if g > 1 else nic_d
    grid_scale = math.lcm(step.denominator, nic_d.denominator, nv_d.denominator)
    mult, scale, oi, lii, wi = _latency_ints(grid_scale, o, li, lat, nv_rate.denominator)
    n_pieces = g * p
    src = np.array([[s * g + (c + i) % g for s in range(servers) for i in range(g)] for c in range(g)],
                   dtype=np.int64)                            # order of channel c (flat_ring_allreduce)
    dst = np.roll(src, -1, axis=1)
    nic = (src // g) != (dst // g) if g > 1 else np.ones_like(src, dtype=bool)
    nv = (~nic).astype(np.int64)
    d_int = np.where(nic, nic_d.numerator * (grid_scale // nic_d.denominator),
                     nv_d.numerator * (grid_scale // nv_d.denominator)).astype(np.int64)
    send, recv = (src * 2 + nv) * 2, (dst * 2 + nv) * 2 + 1
    base = (np.arange(g, dtype=np.int64) * p)[:, None]
    pos = np.arange(p, dtype=np.int64)[None, :]
    step_i = step.numerator * (grid_scale // step.denominator)
    bound = 2 * (p - 1) * (step_i * mult + oi + lii + wi) * 2
    assert bound < INT_LIMIT, "values beyond int64"
    if discipline not in DISCIPLINES:
        raise OptccError("discipline", f"expected one of {DISCIPLINES}, got {discipline!r}")
    timer = GroupTimer(p * n_pieces, p * 4, oi, lii, wi, n_pieces if discipline == "step" else 0)
    flat: Callable[[np.ndarray], np.ndarray] = lambda a: a.reshape(-1)                             # noqa: E731
    send_f, recv_f, dur_f = flat(send), flat(recv), flat(d_int) * mult
    chain: list[tuple[np.ndarray, np.ndarray]] = []
    if g > 1:   # NVLink batches (optcc.timing): a GPU's hops to the next, in channel (= piece) order, every step
        nvi = np.flatnonzero(flat(nv))
        nvi = nvi[np.lexsort((nvi, flat(src)[nvi]))]              # by src, then channel (index c·p + i)
        first = np.ones(nvi.size, dtype=bool)
        first[1:] = flat(src)[nvi[1:]] != flat(src)[nvi[:-1]]
        head = np.flatnonzero(first)
        at = np.arange(nvi.size) - np.repeat(head, np.diff(np.append(head, nvi.size)))
        chain = [(nvi[at == r], nvi[np.flatnonzero(at == r) - 1]) for r in range(1, int(at.max()) + 1)]
        nv_d_int = nv_d.numerator * (grid_scale // nv_d.denominator) * mult
        dur_f[nvi] = (nv_d_int + oi) // nv_rate.denominator * nv_rate.numerator - oi    # r·(o + d) − o
    dur_o = dur_f + oi
    ports = timer.state_keys(np.zeros(0, dtype=np.int64), send_f, recv_f)
    d_flat = flat(d_int)
    d_lo, d_hi = int(d_flat.min()), int(d_flat.max())
    src_key, dst_key = src * n_pieces, dst * n_pieces
    for t in range(2 * (p - 1)):
        offset, _ = ring_step(t, p)
        piece = base + (pos + offset) % p
        start = t * step_i
        timer.group(start, flat(src_key + piece), np.concatenate((flat(dst_key + piece), ports)), dur_o,
                    start + d_flat, start + d_lo, start + d_hi, chain)
    return Fraction(timer.finish, scale)


def ring_flow_tuples(cluster: Cluster) -> list[tuple[int, int, int, Fraction, str]]:
    """The flows ring_event_time times, as (src, dst, piece, start, link) tuples (for the test)."""
    from optcc.algorithms.baselines.rings import flat_ring_step
    from optcc.algorithms.ring.build import ring_step
    p, g = cluster.p, cluster.g
    servers = p // g
    step = flat_ring_step(cluster)[0] if g > 1 else Fraction(1, p)
    out: list[tuple[int, int, int, Fraction, str]] = []
    for c in range(g):
        order = [s * g + (c + i) % g for s in range(servers) for i in range(g)]
        for t in range(2 * (p - 1)):
            offset, _ = ring_step(t, p)
            for i in range(p):
                src, dst = order[i], order[(i + 1) % p]
                link = "nic" if g == 1 or src // g != dst // g else "nvlink"
                out.append((src, dst, c * p + (i + offset) % p, t * step, link))
    return out
