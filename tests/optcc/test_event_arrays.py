"""The multi-straggler, multi-GPU-server and rails constructions as EventArrays (issue 24 item 1):
the arrays are the built schedule's flows (multiset of src, dst, piece, start, duration, link,
rate; pieces and local ops too), and Prepared.from_arrays times them exactly as
optcc.timing.event_time times the schedule, on 60 schedules × the latency presets and a custom
(o, Li, L)."""
from __future__ import annotations

from collections import Counter
from fractions import Fraction

import numpy as np
import pytest

from optcc.algorithms import build_schedule
from optcc.algorithms.multi.arrays import multi_event_arrays
from optcc.algorithms.rails.arrays import rails_event_arrays
from optcc.algorithms.servers.arrays import server_event_arrays
from optcc.algorithms.multi.drain import drain_slots
from multi_drain_reference import drain_slots_reference
from optcc.cluster import Cluster
from optcc.event_arrays import from_schedule, schedule_tuples
from optcc.event_timer import Prepared
from optcc.latency import units
from optcc.timing import event_time, slot_time

F = Fraction


def _server(g, s, ell):
    return {s * g + j: F(ell) for j in range(g)}


MULTI = [(p, st, k) for p, st in [
    (4, {0: F(2), 1: F(3, 2)}), (5, {0: F(2), 1: F(3, 2)}), (6, {0: F(2), 3: F(4, 3)}),
    (9, {1: F(2), 4: F(2), 7: F(3, 2)}), (12, {0: F(5, 4), 11: F(6, 5)}),
    (16, {2: F(3), 5: F(2), 9: F(2), 10: F(8, 7)})] for k in (1, 3, 5)]
SERVERS = [(p, g, st, k) for p, g, st in [
    (8, 2, _server(2, 0, 2)), (16, 4, _server(4, 1, F(3, 2))), (8, 4, _server(4, 0, 2)), (4, 4, _server(4, 0, 2)),
    (24, 8, {}), (12, 2, _server(2, 5, 3))] for k in (1, 4)]
RAILS = [(p, g, st, k) for p, g, st in [
    (8, 2, {0: F(2), 1: F(2), 2: F(3, 2), 3: F(3, 2)}), (16, 4, {**_server(4, 0, 2), **_server(4, 1, F(3, 2))}),
    (16, 4, {0: F(2), 1: F(2), 2: F(4, 3), 3: F(4, 3), 4: F(3, 2)}), (32, 4, {0: F(2), 5: F(3)}),
    (8, 4, {**_server(4, 0, 2), **_server(4, 1, 2)}), (24, 4, {0: F(4)}),
    (64, 8, {**_server(8, 0, F(3, 2)), **_server(8, 1, 2)}),
    (72, 8, {**_server(8, 0, 2), **_server(8, 1, F(3, 2))}),                # q = 9: rails held as arrays
    (40, 4, {0: F(2), 4: F(3, 2)})] for k in (1, 2, 4)]                        # q = 10: an array rail beside built ones
CASES = ([("optcc_multi", p, 1, st, k) for p, st, k in MULTI] + [("optcc_servers", *c) for c in SERVERS]
         + [("optcc_rails", *c) for c in RAILS])
MAKE = {"optcc_multi": multi_event_arrays, "optcc_servers": server_event_arrays, "optcc_rails": rails_event_arrays}
MODELS = ("alpha", "simai", "nccl", None)


def test_there_are_at_least_50_schedules():
    assert len(CASES) >= 50 and {c[0] for c in CASES} == set(MAKE) and {c[2] for c in CASES} == {1, 2, 4, 8}


@pytest.mark.parametrize("algo,p,g,st,k", CASES)
def test_arrays_are_the_schedule_and_time_the_same(algo, p, g, st, k):
    for model in ("simai", "alpha"):             # optcc_multi builds another pattern when Li + L > 0
        c = Cluster.build(p, g, st or None, latency_model=model)
        schedule = build_schedule(algo, c, k)
        ea = MAKE[algo](c, k)
        assert ea.pieces == schedule.pieces and len(ea) == len(schedule.flows)
        assert Counter(ea.tuples()) == Counter(schedule_tuples(schedule))
        assert sorted(ea.ops) == sorted((op.time * ea.scale, op.rank, op.piece) for op in schedule.local_ops)
        prep = Prepared.from_arrays(c, ea)
        assert prep.slot_time() == slot_time(schedule) and prep.exclusive_ok()
        latencies = [units(Cluster.build(p, g, st or None, latency_model=lat_model), n)
                     for lat_model in MODELS for n in (1 << 20, 1 << 33)] + [(F(1, 97), F(1, 61), F(2, 89))]
        timed = 0
        for o, li, lat in latencies:
            try:
                got = prep.event_time(o, li, lat)
            except OverflowError:             # the grid × the latency's denominator is beyond int64
                continue
            assert got == event_time(schedule, o, None, li, lat), (model, o, li, lat)
            timed += 1
        assert timed >= 2         # o = Li = L = 0 and at least one latency (the rest: see docs/latency.md)


@pytest.mark.parametrize("H,m,k,spread", [(H, m, k, s) for H in (2, 3, 4, 7, 12, 20) for m in (2, 3, 4)
                                          for k in (1, 2, 5) for s in (1, 3)])
def test_fast_drain_is_the_drain(H, m, k, spread):
    got = drain_slots(H, m, k, spread)          # the package's one drain (per-link buckets)
    assert list(got.items()) == list(drain_slots_reference(H, m, k, spread).items())   # placement order too
    from optcc.algorithms.multi.pattern import Pattern
    assert len(got) == H * (H - 1) + (3 if Pattern(H, m, spread).coincide and k >= 2 else 0)


def test_a_rate_overload_in_the_arrays_is_found():
    """exclusive_ok with rates below 1 (rails' NVLink streams) can fail: one NVLink flow moved
    onto another stream's instant on the same port overloads it."""
    c = Cluster.build(16, 4, {**_server(4, 0, 2), **_server(4, 1, F(3, 2))})
    ea = rails_event_arrays(c, 2)
    assert ea.rate is not None and Prepared.from_arrays(c, rails_event_arrays(c, 2)).exclusive_ok()
    nv = np.flatnonzero(ea.nv == 1)
    send = ea.src[nv]
    i = nv[0]
    same = nv[(send == ea.src[i]) & (ea.dst[nv] != ea.dst[i])]
    ea.start[same] = ea.start[i]                 # every flow GPU src[i] sends on NVLink, at one instant
    assert not Prepared.from_arrays(c, ea).exclusive_ok()


def test_from_schedule_keeps_local_ops():
    """Local ops (no construction makes them today; rails would lift them) enter the finish time:
    one placed after the last landing ends the event time there, in both timers."""
    from optcc.schedule import LocalOp, Schedule
    c = Cluster.build(6, 1, {0: F(2), 1: F(3, 2)}, latency_model="simai")
    base = build_schedule("optcc", c, 2)
    last = slot_time(base)
    ops = [LocalOp(2, 0, last / 2, -1), LocalOp(3, 1, last + F(1, 7), 2)]
    schedule = Schedule(c, base.pieces, base.flows, ops)
    ea = from_schedule(schedule)
    assert sorted(ea.ops) == sorted((op.time * ea.scale, op.rank, op.piece) for op in ops)
    prep = Prepared.from_arrays(c, ea)
    o, li, lat = units(c, 1 << 20)
    assert prep.slot_time() == last + F(1, 7)
    assert prep.event_time(o, li, lat) == event_time(schedule, o, None, li, lat)
    assert prep.event_time() == event_time(schedule) <= last


def test_the_registry_serves_every_construction_as_arrays():
    from optcc.algorithms.registry import algorithm, choose
    for c, name in [(Cluster.build(8, 1, {0: F(2), 1: F(2)}), "optcc_multi"),
                    (Cluster.build(16, 4, _server(4, 1, 2)), "optcc_servers"),
                    (Cluster.build(16, 4, {**_server(4, 0, 2), **_server(4, 1, 2)}), "optcc_rails")]:
        assert choose(c).name == name
        got, want = algorithm(name).arrays(c, 2), MAKE[name](c, 2)     # the registry's imports it lazily
        assert algorithm(name).arrays.__name__ == MAKE[name].__name__
        assert type(got) is type(want) and len(got) == len(want) > 0


def test_time_algorithm_falls_back_to_the_schedule_beyond_int64():
    """A rails grid whose product with the latency's denominator is beyond int64: optcc time
    --algo still answers, from the built schedule (the same exact model)."""
    from optcc_app.compose.timing_report import time_algorithm, time_schedule
    c = Cluster.build(32, 4, {0: F(2), 5: F(3)}, latency_model="alpha")
    rep, _, n_flows, schedule = time_algorithm("optcc", c, 4, 1 << 33)
    assert schedule is not None and n_flows == len(schedule.flows)
    assert rep.event_time == time_schedule(schedule, 1 << 33).event_time


@pytest.mark.parametrize("c", [Cluster.build(9, 1, {0: F(2), 5: F(4, 3)}, latency_model="simai"),
                               Cluster.build(16, 4, _server(4, 2, 2), latency_model="nccl"),
                               Cluster.build(16, 4, {**_server(4, 0, 2), **_server(4, 3, F(3, 2))},
                                             latency_model="simai")])
def test_time_algorithm_times_the_arrays_without_a_schedule(c):
    """`optcc time --algo` (time_algorithm) answers from the arrays (no Schedule made) with the
    numbers time_schedule gives for the built schedule."""
    from optcc_app.compose.timing_report import time_algorithm, time_schedule
    rep, _, n_flows, schedule = time_algorithm("optcc", c, 3, 1 << 30)
    assert schedule is None
    built = build_schedule("optcc", c, 3)
    ref = time_schedule(built, 1 << 30)
    assert n_flows == len(built.flows) and rep.violation is None
    assert (rep.slot_time, rep.event_time, rep.t0, rep.lower_bound) == (ref.slot_time, ref.event_time, ref.t0,
                                                                        ref.lower_bound)


ALL_SLOW = [(p, st, k) for p, st in [
    (4, {r: F(2) for r in range(4)}), (6, {0: F(3), **{r: F(3, 2) for r in range(1, 6)}}),
    (9, {r: F(4, 3) + r for r in range(9)}), (8, {0: F(5), 1: F(4), **{r: F(2) for r in range(2, 8)}}),
    (12, {r: F(8, 7) for r in range(12)})] for k in (1, 3)]


@pytest.mark.parametrize("p,st,k", ALL_SLOW)
def test_all_slow_arrays_are_its_schedule(p, st, k):
    """all_slow (every GPU slow) as arrays: the reduced cluster's arrays (FlowArrays for one
    straggler left, EventArrays for several) with times scaled by ℓ_min; the same flows, slot time
    and event time as the built schedule."""
    from optcc.algorithms.registry import algorithm, choose
    for model in ("simai", "alpha"):
        c = Cluster.build(p, 1, st, latency_model=model)
        assert choose(c).name == "all_slow"
        schedule = build_schedule("all_slow", c, k)
        fa = algorithm("all_slow").arrays(c, k)
        assert fa is not None and len(fa) == len(schedule.flows)
        if hasattr(fa, "dur_cls"):
            assert Counter(fa.tuples()) == Counter(schedule_tuples(schedule))
        else:
            assert Counter((int(s), int(d), int(pc), F(int(t), fa.scale)) for s, d, pc, t in
                           zip(fa.src, fa.dst, fa.piece, fa.start)) == \
                Counter((f.src, f.dst, f.piece, f.start) for f in schedule.flows)
        prep = Prepared.from_arrays(c, fa)
        assert prep.slot_time() == slot_time(schedule) and prep.exclusive_ok()
        for o, li, lat in [(F(0), F(0), F(0)), units(c, 1 << 30), (F(1, 97), F(1, 61), F(2, 89))]:
            try:
                got = prep.event_time(o, li, lat)
            except OverflowError:
                continue
            assert got == event_time(schedule, o, None, li, lat)


def test_all_slow_arrays_refuse_g_above_1():
    from optcc.algorithms.all_slow import build as all_slow
    from optcc.errors import OptccError
    with pytest.raises(OptccError) as e:
        all_slow.arrays(Cluster.build(8, 2, {r: F(2) for r in range(8)}), 2, lambda red, k: None)
    assert e.value.field == "g"


def _capacity_brute(port, start, end, rate, den):
    """Every port's summed rate at every flow start ≤ den (flows ending at t have left)."""
    for p in set(port.tolist()):
        on = [(int(s), int(e), int(r)) for q, s, e, r in zip(port, start, end, rate) if q == p]
        for s0, _, _ in on:
            if sum(r for s, e, r in on if s <= s0 < e) > den:
                return False
    return True


def test_capacity_ok_is_the_brute_force_check_on_mixed_ports():
    """optcc.event_arrays.capacity_ok (prefix sums over each port's flows; tiny blocks as well)
    against the definition, on random flows where some ports carry fractional rates and some only
    full-rate flows."""
    from optcc.event_arrays import capacity_ok
    rng = np.random.default_rng(7)
    seen = set()
    for _ in range(400):
        n, den = int(rng.integers(1, 14)), int(rng.choice([1, 2, 6]))
        port = rng.integers(0, 4, n).astype(np.int16)
        start = rng.integers(0, 10, n).astype(np.int64)
        end = start + rng.integers(1, 6, n)
        rate = np.where(port % 2 == 0, den, rng.integers(1, den + 1, n)).astype(np.int64)
        order = np.argsort(start, kind="stable")
        port, start, end, rate = port[order], start[order], end[order], rate[order]
        want = _capacity_brute(port, start, end, rate, den)
        for chunk in (1, 3, 1 << 22):
            assert capacity_ok(port, start, end, rate, den, chunk) == want
        seen.add(want)
    assert seen == {True, False}


def test_consumed_arrays_say_so_instead_of_failing_on_none():
    """Prepared.from_arrays releases an EventArrays as it copies it: a second use (or len) is a
    clear ValueError, not an AttributeError on the released arrays."""
    c = Cluster.build(5, stragglers={0: F(2), 1: F(3, 2)})
    ea = multi_event_arrays(c, 2)
    n = len(ea)
    assert Prepared.from_arrays(c, ea).event_time() == event_time(build_schedule("optcc", c, 2))
    for use in (lambda: Prepared.from_arrays(c, ea), lambda: len(ea)):
        with pytest.raises(ValueError, match="consumed by an earlier Prepared.from_arrays"):
            use()
    assert len(multi_event_arrays(c, 2)) == n
