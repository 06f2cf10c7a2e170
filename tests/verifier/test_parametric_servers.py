"""prove-all --algo servers (verifier/parametric/servers.py): the multi-GPU lift, its NVLink
brackets and their placement for every size; the enumeration of the formulas is the generator
(optcc_server_allreduce); every mutant of the lift, the brackets, the placement and the q = 2
swap is refuted by the proof and (unless only the proof reads it) by the per-instance verifier."""
from __future__ import annotations

import json
from fractions import Fraction as F

import pytest

from optcc.algorithms.families import INT
from optcc.algorithms.servers.families import (LIFT, PLACEMENT, TWO_SERVER_FAMILIES, server_finish_time,
                                               server_flows, two_server_flows, two_server_touch_times)
from optcc.algorithms.servers.build import optcc_server_allreduce, optcc_server_slot_time
from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.schedule import Schedule
from optcc.timing import slot_time
from optcc_app.cli import main
from servers_mutants import LIFT_MUTANTS, MODEL_MUTANTS, PLACEMENT_MUTANTS, SWAP_MUTANTS, TOUCH_MUTANTS
from verifier import prove_allreduce
from verifier.parametric import prove_all

B = 50 * 10**9
NV = 450 * 10**9


def cluster(q, g, server, ell, nvlink=NV):
    slow = {r: ell for r in range(server * g, server * g + g)} if ell != 1 else None
    return Cluster.build(q * g, g, slow, bandwidth=B, nvlink_bandwidth=nvlink)


def _schedule(c, k, lift=LIFT, two=TWO_SERVER_FAMILIES, placement=PLACEMENT):
    pieces, flows, _ = server_flows(c, k, lift, two, placement)
    return Schedule(c, pieces, flows, meta={"algorithm": "optcc", "segments": k, "capacity": "exclusive", "g": c.g})


@pytest.fixture(scope="module")
def proved():
    return prove_all("servers")


def test_prove_all_servers_proves_every_property(proved):
    assert proved["proved"] is True and proved["failures"] == []
    assert proved["properties"] == {p: "proved" for p in
                                    ("lemmas", "well_formed", "sum", "ports", "causality", "instance",
                                     "finish_q_le_2")}
    assert proved["obligations"] == 288 and "q ≥ 1" in proved["for_all"] and "g ≥ 2" in proved["for_all"]
    assert proved["seconds"] < 60


GRID = [(q, g, ell, k, srv, nv) for q in (1, 2, 3, 4) for g in (2, 3, 4) for ell in (F(1), F(3, 2), F(3))
        for k in (1, 2, 3) for srv in sorted({0, q - 1}) for nv in (NV, B)]


def test_enumeration_of_the_formulas_is_the_generator():
    """The proof is of the code that runs: the lift's formulas enumerated over the proved instance
    families give optcc_server_allreduce's pieces and flows exactly (q = 1, 2, ≥ 3; both NVLink
    regimes; the straggler server first or last)."""
    for q, g, ell, k, srv, nv in GRID:
        c = cluster(q, g, srv, ell, nv)
        gen = optcc_server_allreduce(c, k)
        assert _schedule(c, k).flows == gen.flows and list(_schedule(c, k).pieces) == list(gen.pieces), \
            (q, g, ell, k, srv, nv)


@pytest.mark.parametrize("q,g,ell,k", [(8, 8, F(2), 2), (5, 8, F(3, 2), 3)])
def test_enumeration_is_the_generator_at_g8(q, g, ell, k):
    c = cluster(q, g, q // 2, ell)
    gen = optcc_server_allreduce(c, k)
    assert _schedule(c, k).sha256() == Schedule(c, gen.pieces, gen.flows, meta=_schedule(c, k).meta).sha256()


INSTANCES = [(3, 3, F(3, 2), 2, NV), (3, 3, F(3, 2), 2, B), (2, 3, F(3, 2), 2, B), (1, 3, F(1), 1, NV),
             (3, 2, F(3), 1, NV), (4, 4, F(2), 1, NV)]


def _instance_refuted(lift, two, q, g, ell, k, nv) -> bool:
    """Not an AllReduce, or not valid, or not the construction's finish time."""
    c = cluster(q, g, q // 2, ell, nv)
    try:
        s = _schedule(c, k, lift, two)
        return not prove_allreduce(s).proved or slot_time(s) != slot_time(optcc_server_allreduce(c, k))
    except (OptccError, ZeroDivisionError):
        return True


def test_unmutated_lift_is_proved_per_instance():
    assert not any(_instance_refuted(LIFT, TWO_SERVER_FAMILIES, *i) for i in INSTANCES)


def _refuted(res) -> dict:
    assert res["proved"] is False
    bad = [r for r in res["failures"] if r["status"] == "refuted" and "counterexample" in r]
    assert bad, res["failures"]
    cx = bad[0]["counterexample"]
    assert cx["obligation"] == bad[0]["obligation"]
    return cx


def test_at_least_fifteen_lift_and_bracket_mutants():
    assert len(LIFT_MUTANTS) >= 15 and len(SWAP_MUTANTS) >= 3


@pytest.mark.parametrize("name", sorted(LIFT_MUTANTS))
def test_lift_mutant_refuted_by_both(name):
    lift = LIFT_MUTANTS[name]
    cx = _refuted(prove_all("servers", families=lift, fail_fast=True))
    assert {"q", "g", "k", "ell", "s", "s_nv"} <= set(cx)
    assert any(_instance_refuted(lift, TWO_SERVER_FAMILIES, *i) for i in INSTANCES)


@pytest.mark.parametrize("name", sorted(SWAP_MUTANTS))
def test_swap_mutant_refuted_by_both(name):
    fams = SWAP_MUTANTS[name]
    cx = _refuted(prove_all("servers", families=fams, fail_fast=True))
    assert cx["flows"] and all(isinstance(f["src"], int) for f in cx["flows"])
    assert any(_instance_refuted(LIFT, fams, *i) for i in INSTANCES if i[0] == 2)


@pytest.mark.parametrize("name", sorted(MODEL_MUTANTS))
def test_model_mutant_refuted_by_the_proof(name):
    lift = MODEL_MUTANTS[name]
    _refuted(prove_all("servers", families=lift, fail_fast=True))
    assert not _instance_refuted(lift, TWO_SERVER_FAMILIES, *INSTANCES[0])   # the schedule is unchanged


def test_cli_prove_all_servers_table_and_json(capsys):
    assert main(["prove-all", "--algo", "servers", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["algo"] == "servers" and out["proved"] is True
    assert out["properties"]["instance"] == "proved" and out["properties"]["sum"] == "proved"
    assert out["properties"]["finish_q_le_2"] == "proved"
    assert "finish" not in out["properties"]                # not claimed for q ≥ 3: per instance
    assert main(["prove-all", "--algo", "servers"]) == 0
    text = capsys.readouterr().out
    assert "# servers: for all q ≥ 1 servers" in text and "instance" in text and "PROVED:" in text


def test_cli_prove_all_servers_prints_counterexample(capsys, monkeypatch):
    import verifier.parametric as vp
    real = vp.prove_all
    monkeypatch.setattr(vp, "prove_all", lambda algo: real(algo, families=LIFT_MUTANTS["all-gather adds instead of copying"]))
    assert main(["prove-all", "--algo", "servers"]) == 1
    out = capsys.readouterr().out
    assert "REFUTED (sum)" in out and "counterexample: q=" in out and "NOT PROVED" in out


def test_servers_has_no_generator_certificate(tmp_path, capsys):
    assert main(["prove-all", "--algo", "servers", "--certificate", str(tmp_path / "c.json")]) == 2
    assert "--certificate" in capsys.readouterr().err and not (tmp_path / "c.json").exists()


# ---- q ≤ 2: closed-form touch times, placement and finish (property finish_q_le_2)

SMALL = [(q, g, ell, k, nv) for q in (1, 2) for g in (2, 3, 4, 8) for ell in (F(1), F(8, 7), F(3, 2), F(2), F(3))
         for k in (1, 2, 3, 5) for nv in (NV, B, B // 3, 40 * B)]


def test_closed_form_touch_times_are_the_instances_min_and_max():
    """two_server_touch_times (what server_flows now uses for q = 2) equals the min of the start
    and the max of the landing over the instance's flows on (server, segment)."""
    from optcc.timing import durations
    for k in (1, 2, 3, 7):
        for ell in (F(1), F(3, 2), F(2), F(7, 3)):
            inst = Schedule(Cluster.build(2, 1, {1: ell} if ell != 1 else None), *two_server_flows(k, ell))
            ft, lw = [{}, {}], [{}, {}]
            for f, d in zip(inst.flows, durations(inst)):
                for node in (f.src, f.dst):
                    ft[node][f.piece] = min(ft[node].get(f.piece, f.start), f.start)
                lw[f.dst][f.piece] = max(lw[f.dst].get(f.piece, f.start + d), f.start + d)
            assert two_server_touch_times(k, ell) == (ft, lw), (k, ell)


def test_finish_closed_form_is_the_schedule_time_and_the_stated_one():
    """server_finish_time (the proved closed form) = optcc.timing.slot_time of the built schedule =
    optcc_server_slot_time, q = 1, 2, on 640 small instances (both NVLink regimes)."""
    n = 0
    for q, g, ell, k, nv in SMALL:
        c = cluster(q, g, q - 1, ell, nv)
        t = server_finish_time(c, k)
        assert t == slot_time(optcc_server_allreduce(c, k)) == optcc_server_slot_time(c, k), (q, g, ell, k, nv)
        n += 1
    assert n == 640


def test_finish_closed_form_refuses_three_servers():
    with pytest.raises(OptccError) as e:
        server_finish_time(cluster(3, 2, 0, F(2)), 2)
    assert e.value.field == "servers"


def _lead_and_batches(c, k, placement=PLACEMENT):
    """(lead, RS starts, AG starts) of server 0 in the enumerated schedule (segment order)."""
    pieces, flows, D = server_flows(c, k, placement=placement)
    P = len(pieces) // c.g
    first = {}
    for f in flows:                   # round 1 of a batch starts it; local GPU 0 sends in every round
        if f.link == "nvlink" and f.src == 0:
            first.setdefault((f.op, f.piece % P), f.start)
    return D, [first[("add", i)] for i in range(P)], [first[("copy", i)] for i in range(P)]


def _placement_disagrees(PL, q, g, ell, k, nv) -> bool:
    """On one instance: the closed forms of PL differ from what the enumeration computes, or the
    schedule PL's touch times give is not an AllReduce."""
    c = cluster(q, g, q - 1, ell, nv)
    s = _schedule(c, k, placement=PL)
    if not prove_allreduce(s).proved:
        return True
    if q == 1:
        return PL.finish_one(INT, F(g), c.nvlink_speedup) != slot_time(s)
    snv = c.nvlink_speedup
    cb, N = F(g - 1) / (g * k * snv), ell / (g * k)
    D, rs, ag = _lead_and_batches(c, k, PL)
    return (D != PL.lead(INT, k, cb, N) or rs != [PL.rs_start(INT, i, cb) for i in range(k)]
            or ag != [PL.ag_start(INT, i, k, cb, N, D) for i in range(k)]
            or PL.finish(INT, F(g), k, ell, snv) != slot_time(s))


PLACEMENT_INSTANCES = [(2, 3, F(3, 2), 3, NV), (2, 3, F(3, 2), 3, B // 3), (2, 2, F(1), 2, B), (2, 8, F(2), 5, NV),
                       (1, 3, F(1), 1, NV)]


def test_unmutated_placement_agrees_per_instance():
    assert not any(_placement_disagrees(PLACEMENT, *i) for i in SMALL[::7])


def test_at_least_fifteen_placement_mutants():
    assert len(TOUCH_MUTANTS) + len(PLACEMENT_MUTANTS) >= 15


@pytest.mark.parametrize("name", sorted(PLACEMENT_MUTANTS))
def test_placement_mutant_refuted_by_both(name):
    """The proof refutes it (with parameters); one small instance shows the closed form differs
    from what the enumeration computes."""
    PL = PLACEMENT_MUTANTS[name]
    cx = _refuted(prove_all("servers", families=PL, fail_fast=True))
    assert cx["obligation"].startswith("servers: q = ")
    assert any(_placement_disagrees(PL, *i) for i in PLACEMENT_INSTANCES)


TOUCH_INSTANCES = [(2, 3, F(3, 2), 3, NV), (2, 2, F(1), 2, B), (3, 3, F(3, 2), 2, NV), (3, 3, F(3, 2), 2, B),
                   (4, 2, F(3), 2, NV), (5, 2, F(8, 7), 3, B), (3, 2, F(1), 3, B // 2), (4, 2, F(3, 2), 3, B // 3)]


def _touch_instance(PL, q, g, ell, k, nv):
    """(is an AllReduce, is the generator's schedule) of server_flows with PL's touch times."""
    c = cluster(q, g, q // 2, ell, nv)
    s = _schedule(c, k, placement=PL)
    return prove_allreduce(s, reported=()).proved, s.flows == optcc_server_allreduce(c, k).flows


def test_closed_form_touch_times_q3_are_the_instances_min_and_max():
    """optcc_touch_times (proved the min and max for every size) equals the min of the start and the max of the landing over the q ≥ 3
    OptCC instance's flows on every (node, piece): 300 instances, both regimes of ℓ."""
    from optcc.algorithms.single.families import optcc_flows
    from optcc.algorithms.servers.families import optcc_touch_times
    from optcc.timing import durations
    n = 0
    for q in (3, 4, 5, 6, 7):
        for k in (1, 2, 3, 4):
            for ell in (F(1), F(8, 7), F(3, 2), F(2), F(3)):
                for srv in sorted({0, q - 1, q // 2}):
                    pieces, flows = optcc_flows(q, k, srv, ell)
                    inst = Schedule(Cluster.build(q, 1, {srv: ell} if ell != 1 else None), pieces, flows)
                    ft, lw = [{} for _ in range(q)], [{} for _ in range(q)]
                    for f, d in zip(flows, durations(inst)):
                        for node in (f.src, f.dst):
                            ft[node][f.piece] = min(ft[node].get(f.piece, f.start), f.start)
                        lw[f.dst][f.piece] = max(lw[f.dst].get(f.piece, f.start + d), f.start + d)
                    assert optcc_touch_times(q, k, srv, ell) == (ft, lw), (q, k, ell, srv)
                    n += 1
    assert n == 300


@pytest.mark.parametrize("name", sorted(TOUCH_MUTANTS))
def test_touch_mutant_refuted_by_both(name):
    """The proof refutes it; on a small instance its schedule is not an AllReduce, or (a touch
    time that only delays the lead or an AG batch) not the generator's schedule."""
    PL = TOUCH_MUTANTS[name]
    cx = _refuted(prove_all("servers", families=PL, fail_fast=True))
    assert cx["obligation"].startswith("servers: q ")
    got = [_touch_instance(PL, *i) for i in TOUCH_INSTANCES]
    assert any(not ok or not same for ok, same in got)


def test_most_touch_mutants_break_the_allreduce():
    broken = [n for n, PL in TOUCH_MUTANTS.items() if any(not _touch_instance(PL, *i)[0] for i in TOUCH_INSTANCES)]
    assert len(broken) >= 6 and len(TOUCH_MUTANTS) == 8, broken


RUNNING_MUTANTS = sorted(LIFT_MUTANTS)


def _built_or_error(make):
    try:
        return make()
    except (OptccError, ZeroDivisionError) as e:
        return type(e).__name__


@pytest.mark.parametrize("name", RUNNING_MUTANTS)
def test_the_running_builder_is_the_proved_enumeration_under_every_mutant(name, monkeypatch):
    """optcc_server_allreduce (what runs) reads the formulas prove-all proves — the lift's maps,
    sizes, clock, rounds and placement (families.servers.LIFT, batch_lengths, place_batches) —
    on an integer grid: under each mutant of them the generator builds exactly the mutant's
    enumeration (server_flows, which prove-all refutes: test_lift_mutant_refuted_by_both), or
    refuses it (a start off the grid), and on some instance something other than before. (The
    touch times it reads off the instance's flows; prove-all proves the closed forms
    server_flows uses equal them, and refutes every TOUCH_MUTANT.)"""
    from optcc.algorithms.servers import families as FS
    mutant = LIFT_MUTANTS[name]
    clusters = [(cluster(q, g, q // 2, ell, nv), k) for q, g, ell, k, nv in INSTANCES]
    before = [optcc_server_allreduce(c, k).flows for c, k in clusters]
    monkeypatch.setattr(FS, "LIFT", mutant)
    changed = 0
    for (c, k), old in zip(clusters, before):
        built = _built_or_error(lambda: optcc_server_allreduce(c, k))
        if isinstance(built, str):              # the generator refuses what the mutant asks
            changed += 1
            continue
        enumerated = _schedule(c, k, lift=mutant)
        assert built.flows == enumerated.flows and list(built.pieces) == list(enumerated.pieces), (c, k)
        changed += built.flows != old
    assert changed, "the mutant changes nothing the generator builds"
