"""The proved generator as arrays (issue 24 item 1, issue 23): families.arrays.optcc_flow_arrays
is the enumeration optcc_flows makes, flow for flow, and Prepared.from_arrays times it exactly as
optcc.timing.event_time times the built schedule, on 60 schedules under every latency preset."""
from __future__ import annotations

import itertools
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest

from optcc.algorithms import build_schedule
from optcc.algorithms.single import families as F
from optcc.algorithms.families.arrays import optcc_flow_arrays
from optcc.cluster import Cluster
from optcc.event_timer import Prepared
from optcc.latency import PRESET_NAMES, units
from optcc.timing import event_time, slot_time

ELLS = (Fraction(1), Fraction(8, 7), Fraction(3, 2), Fraction(2), Fraction(5, 2), Fraction(4))
CASES = [(p, k, s, ell) for (p, k), ell, s in itertools.product(
    [(3, 1), (4, 2), (5, 3), (6, 1), (7, 4), (9, 2), (10, 5), (12, 3), (13, 1), (16, 2)], ELLS, (0,))]
CASES += [(5, 2, 3, Fraction(3, 2)), (7, 3, 6, Fraction(2)), (8, 4, 5, Fraction(8, 7)), (11, 2, 10, Fraction(3))]


def _multiset(fa):
    return Counter(zip(fa.src.tolist(), fa.dst.tolist(), fa.piece.tolist(),
                       (Fraction(x, fa.scale) for x in fa.start.tolist())))


@pytest.mark.parametrize("p,k,s,ell", CASES)
def test_arrays_are_the_enumeration_and_time_the_same(p, k, s, ell):
    pieces, flows = F.optcc_flows(p, k, s, ell)
    fa = optcc_flow_arrays(p, k, s, ell)
    assert fa.pieces == pieces and len(fa) == len(flows)
    assert _multiset(fa) == Counter((f.src, f.dst, f.piece, f.start) for f in flows)
    for model in PRESET_NAMES:
        c = Cluster.build(p, stragglers={s: ell} if ell != 1 else {}, latency_model=model)
        schedule = build_schedule("optcc_single", c, k)
        prep = Prepared.from_arrays(c, fa)
        assert prep.slot_time() == slot_time(schedule) and prep.exclusive_ok()
        for n in (1 << 16, 1 << 30):
            o, li, lat = units(c, n)
            assert prep.event_time(o, li, lat) == event_time(schedule, o, None, li, lat), (model, n)


def test_a_port_conflict_in_the_arrays_is_found():
    """exclusive_ok can fail: one flow moved onto a busy port's instant is a conflict."""
    c = Cluster.build(6, stragglers={0: Fraction(2)})
    fa = optcc_flow_arrays(6, 2, 0, Fraction(2))
    assert Prepared.from_arrays(c, fa).exclusive_ok()
    same_src = np.flatnonzero(fa.src == fa.src[0])
    j = same_src[np.argmax(fa.start[same_src] != fa.start[0])]
    fa.start[j] = fa.start[0]
    assert not Prepared.from_arrays(c, fa).exclusive_ok()


def test_the_registry_serves_optcc_single_as_arrays():
    from optcc.algorithms.registry import algorithm, choose
    c = Cluster.build(9, stragglers={4: Fraction(3)})
    record = choose(c)
    assert record.name == "optcc_single" and record.arrays is algorithm("optcc_single").arrays
    fa = record.arrays(c, 3)
    assert _multiset(fa) == Counter((f.src, f.dst, f.piece, f.start) for f in build_schedule("optcc", c, 3).flows)
    assert record.arrays(Cluster.build(2, stragglers={1: Fraction(2)}), 1) is None      # p = 2: one exchange


def test_time_algo_at_p_1024_reports_the_array_limit(run_optcc):
    """Over the documented array limit: exit 2 naming --segments, nothing on stdout."""
    res = run_optcc("time", "--algo", "optcc", "--p", "1024", "--straggler", "0:2", "--segments", "40")
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.startswith("optcc: error: --segments: p²·k = 1024²·40"), res.stderr


@pytest.mark.parametrize("p,ell,model", [(16, Fraction(8, 7), "simai"), (32, Fraction(2), "nccl"),
                                         (24, Fraction(3), "alpha")])
def test_paper_checks_time_the_arrays_as_the_schedule(p, ell, model):
    """paper_checks.event_checks prepares single-straggler points from the array form: the event
    time it uses equals the built schedule's (optcc.timing.event_time) at the paper's 8 GiB."""
    from paper_checks import event_checks as E
    c = E.cluster(p, 1, ell, model)
    prep = E._Schedules().get(c, 5)
    assert prep is not None and prep.schedule is None            # the array path, no Schedule built
    o, li, lat = units(c, 8 << 30)
    assert prep.event_time(o, li, lat) == event_time(build_schedule("optcc", c, 5), o, None, li, lat)
