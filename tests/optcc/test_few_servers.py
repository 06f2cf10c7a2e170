"""few_servers (optcc.algorithms.few_servers.build): closed-form slot time equal to the built schedule,
ports within capacity, proved by `optcc verify` as a user runs it (and a mutant refused), arrays
equal to the schedule, latency counts A and B ≥ the event model, B = 3 exactly below the knee,
and the dispatcher's rule (latency-free clusters stay optcc_servers')."""
import json
from collections import Counter
from fractions import Fraction as F

import pytest

from optcc.algorithms.few_servers import build as FS
from optcc.algorithms import registry
from optcc.algorithms.servers.build import optcc_server_allreduce
from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.event_arrays import schedule_tuples
from optcc.event_timer import Prepared
from optcc.latency import units
from optcc.schedule import Flow, Schedule
from optcc.simulate import simulate
from optcc.timing import IntegerTimes, check_capacity, event_time, slot_time


def server_cluster(q, g, ell, s=0, **kw):
    return Cluster.build(q * g, g, {s * g + i: F(ell) for i in range(g)}, **kw)


SMALL = [(q, g, ell, s, k) for q in (2, 3, 4, 5) for g in (2, 3) for ell in (F(8, 7), F(4, 3), 2, 3)
         for s, k in ((0, 1), (q - 1, 2), (1, 3), (0, 5))]


@pytest.mark.parametrize("q, g, ell, s, k", SMALL)
def test_closed_form_is_the_slot_time_and_ports_hold(q, g, ell, s, k):
    c = server_cluster(q, g, ell, s)
    sch = FS.build(c, k)
    assert slot_time(sch) == FS.slot_time(c, k) == sch.stated_slot_time
    assert check_capacity(sch) is None
    assert simulate(sch).correct


@pytest.mark.parametrize("q, g, ell, k", [(4, 4, 2, 3), (4, 4, F(4, 3), 2), (2, 4, 2, 4), (8, 2, F(8, 7), 2)])
def test_closed_form_at_larger_g_and_q(q, g, ell, k):
    c = server_cluster(q, g, ell)
    assert slot_time(FS.build(c, k)) == FS.slot_time(c, k)


def test_slot_time_value_at_p16_g4_ell2():
    """x = (0, 1/3, 1/3, 1/3), F = M = ℓ = 2: T = c + (k + 2)/k · ℓ/g + c, c = 3/(4·9·k)."""
    c = server_cluster(4, 4, 2)
    for k in (1, 2, 3, 64):
        cc = F(3, 4 * 9 * k)
        expected = cc + F(2 * min(k, 2) * 2 + max(0, k - 2) * 2, k) / 4 + cc
        assert FS.slot_time(c, k) == expected
    assert FS.slot_time(c, 64) > F(1, 2)                          # Theorem 3's ℓ/g


def test_slow_nvlink_is_refused_naming_the_field():
    c = server_cluster(4, 4, 2, nvlink_bandwidth=F(50 * 10**9))    # s_nv = 1 < 2(g−1)/F
    with pytest.raises(OptccError) as e:
        FS.slot_time(c, 2)
    assert e.value.field == "nvlink_bandwidth"
    assert FS.accepts(Cluster.build(16, 4, {i: F(2) for i in range(4)}, latency_model="simai",
                                    nvlink_bandwidth=F(50 * 10**9)))[0] is False


@pytest.mark.parametrize("q, g, ell, k", [(4, 4, 2, 3), (3, 2, F(4, 3), 4), (2, 3, F(8, 7), 2)])
def test_arrays_are_the_schedule(q, g, ell, k):
    c = server_cluster(q, g, ell, latency_model="simai")
    sch = FS.build(c, k)
    ea = FS.arrays(c, k)
    assert ea.pieces == sch.pieces and Counter(ea.tuples()) == Counter(schedule_tuples(sch))
    o, li, lat = units(c, 1 << 30)
    assert Prepared.from_arrays(c, ea).event_time(o, li, lat) == event_time(sch, o, None, li, lat)


# ---- the per-instance proof, as a user runs it -----------------------------------------------
PROVED = [(8, 2, "0:2", "1:2", 2), (6, 2, "4:4/3", "5:4/3", 3), (12, 3, "0:8/7", "1:8/7", "2:8/7", 2),
          (12, 4, "8:3", "9:3", "10:3", "11:3", 1)]


@pytest.mark.parametrize("case", PROVED, ids=str)
def test_optcc_verify_proves_the_cli_schedule(case, tmp_path, run_optcc):
    p, g, *strag, k = case
    path = tmp_path / "s.json"
    flags = ["--p", p, "--g", g, *(f for st in strag for f in ("--straggler", st))]
    r = run_optcc("schedule", "--algo", "few_servers", *flags, "--latency-model", "simai", "-k", k, "-o", path)
    assert r.returncode == 0, r.stderr
    assert Schedule.load(str(path)).meta["algorithm"] == "few_servers"
    r = run_optcc("verify", path, "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)["proved"] is True


def _drop_first_rs(flows):
    """One NIC reduce-scatter add dropped: an owner misses a server's contribution."""
    i = next(i for i, f in enumerate(flows) if f.link == "nic" and f.op == "add")
    return flows[:i] + flows[i + 1:]


def _early_all_gather(flows):
    """The last NIC all-gather copy moved to t = 0, before its chunk is reduced."""
    i = max(i for i, f in enumerate(flows) if f.link == "nic" and f.op == "copy")
    f = flows[i]
    return flows[:i] + [Flow(f.src, f.dst, f.piece, f.op, F(0), f.link, f.rate)] + flows[i + 1:]


@pytest.mark.parametrize("mutate", [_drop_first_rs, _early_all_gather], ids=lambda m: m.__name__)
def test_optcc_verify_refuses_a_mutant(mutate, tmp_path, run_optcc):
    c = server_cluster(4, 2, 2, latency_model="simai")
    sch = FS.build(c, 2)
    bad = Schedule(c, sch.pieces, mutate(sch.flows), meta=sch.meta)
    path = tmp_path / "bad.json"
    bad.save(str(path))
    r = run_optcc("verify", path, "--json")
    assert r.returncode != 0 and json.loads(r.stdout)["proved"] is False


def test_cli_refuses_a_latency_free_cluster_naming_algo(tmp_path, run_optcc):
    r = run_optcc("schedule", "--algo", "few_servers", "--p", 8, "--g", 2, "--straggler", "0:2", "--straggler", "1:2",
                  "-k", 2, "-o", tmp_path / "s.json")
    assert r.returncode == 2 and "--algo" in r.stderr and "latency-free" in r.stderr, r.stderr


# ---- latency counts ----------------------------------------------------------------------------
LAT = [(q, g, ell, k) for q in (2, 3, 4, 6) for g in (2, 4) for ell in (F(8, 7), 2) for k in (1, 2, 4, 8)]


@pytest.mark.parametrize("q, g, ell, k", LAT)
def test_counts_bound_the_event_model(q, g, ell, k):
    c = server_cluster(q, g, ell)
    sch = FS.build(c, k)
    grid = IntegerTimes(sch)
    slot = slot_time(sch, grid)
    b = FS.latencies(c, k)
    for x in (F(1, 8), F(1, 2), F(1)):
        lam = x * FS.knee(c) / (k * c.p)
        for li, wire in ((lam, F(0)), (F(0), lam), (lam / 2, lam / 2)):
            assert event_time(sch, F(0), grid, li, wire) <= slot + b * lam
    a = FS.overheads(c, k)
    for o in (F(1, 1000), F(1, 10)):
        assert event_time(sch, o, grid) <= slot + a * o


@pytest.mark.parametrize("q, g, ell, k", [(4, 4, 2, 4), (4, 4, 2, 16), (4, 2, F(4, 3), 8), (3, 2, 3, 12)])
def test_latency_slope_is_three_for_every_k(q, g, ell, k):
    """The critical path holds exactly B = 3 latencies whatever k (optcc_servers' grows ~4k)."""
    c = server_cluster(q, g, ell)
    sch = FS.build(c, k)
    lam = FS.knee(c) / (2 * k * c.p)
    assert event_time(sch, F(0), None, lam / 2, lam / 2) - slot_time(sch) == 3 * lam
    servers = optcc_server_allreduce(c, k)
    assert event_time(servers, F(0), None, lam / 2, lam / 2) - slot_time(servers) > 3 * lam


def test_beyond_the_knee_the_slope_grows():
    """Li + L over a round's length breaks the one-round slack: the count is a knee, not free."""
    c = server_cluster(4, 4, 2)
    k = 8
    sch = FS.build(c, k)
    lam = 4 * FS.knee(c) / (k * c.p)
    assert event_time(sch, F(0), None, F(0), lam) - slot_time(sch) > 3 * lam


# ---- where the dispatcher serves it -------------------------------------------------------------
def test_dispatcher_takes_it_only_with_issue_or_wire_latency():
    strag = {i: F(2) for i in range(4)}
    for model in ("simai", "nccl"):
        assert registry.served("optcc", Cluster.build(16, 4, strag, latency_model=model)).name == "few_servers"
        assert registry.served("optcc", Cluster.build(32, 4, strag, latency_model=model)).name == "few_servers"
    for c in (Cluster.build(16, 4, strag), Cluster.build(16, 4, strag, latency_model="alpha"),
              Cluster.build(16, 8, {i: F(2) for i in range(8)}, latency_model="simai"),       # q = 2
              Cluster.build(32, 8, {i: F(4, 3) for i in range(8)}, latency_model="simai")):   # NVLink condition
        assert registry.served("optcc", c).name == "optcc_servers"


@pytest.mark.parametrize("cluster, why", [
    (Cluster.build(8, 1, {0: F(2)}, latency_model="simai"), "g ≥ 2"),
    (Cluster.build(36, 4, {i: F(2) for i in range(4)}, latency_model="simai"), "q ≤ 8"),
    (Cluster.build(16, 4, latency_model="simai"), "one straggler server"),
    (Cluster.build(16, 4, {0: F(2), 4: F(2)}, latency_model="simai"), "servers [0, 1]"),
    (Cluster.build(8, 4, {i: F(2) for i in range(4)}, latency_model="simai"), "q = 2"),
    (Cluster.build(16, 4, {i: F(2) for i in range(4)}, latency_model="alpha"), "Li + L > 0"),
    (Cluster.build(16, 4, {i: F(2) for i in range(4)}), "latency-free")])
def test_accepts_says_why_not(cluster, why):
    ok, reason = FS.accepts(cluster)
    assert not ok and why in reason


def test_build_names_the_fields():
    with pytest.raises(OptccError) as e:
        FS.build(Cluster.build(36, 4, {i: F(2) for i in range(4)}), 2)
    assert e.value.field == "p"
    with pytest.raises(OptccError) as e:
        FS.build(server_cluster(4, 2, 2), 0)
    assert e.value.field == "segments"
