"""prove-all --algo servers (verifier/parametric/servers.py): the multi-GPU lift, its NVLink
brackets and their placement for every size; the enumeration of the formulas is the generator
(optcc_server_allreduce); every mutant of the lift, the brackets, the placement and the q = 2
swap is refuted by the proof and (unless only the proof reads it) by the per-instance verifier."""
from __future__ import annotations

import json
from fractions import Fraction as F

import pytest

from optcc.algorithms.families.servers import LIFT, TWO_SERVER_FAMILIES, server_flows
from optcc.algorithms.optcc_servers import optcc_server_allreduce
from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.schedule import Schedule
from optcc.timing import slot_time
from optcc_app.cli import main
from servers_mutants import LIFT_MUTANTS, MODEL_MUTANTS, SWAP_MUTANTS
from verifier import prove_allreduce
from verifier.parametric import prove_all

B = 50 * 10**9
NV = 450 * 10**9


def cluster(q, g, server, ell, nvlink=NV):
    slow = {r: ell for r in range(server * g, server * g + g)} if ell != 1 else None
    return Cluster.build(q * g, g, slow, bandwidth=B, nvlink_bandwidth=nvlink)


def _schedule(c, k, lift=LIFT, two=TWO_SERVER_FAMILIES):
    pieces, flows, _ = server_flows(c, k, lift, two)
    return Schedule(c, pieces, flows, meta={"algorithm": "optcc", "segments": k, "capacity": "exclusive", "g": c.g})


@pytest.fixture(scope="module")
def proved():
    return prove_all("servers")


def test_prove_all_servers_proves_every_property(proved):
    assert proved["proved"] is True and proved["failures"] == []
    assert proved["properties"] == {p: "proved" for p in
                                    ("lemmas", "well_formed", "sum", "ports", "causality", "instance")}
    assert proved["obligations"] >= 300 and "q ≥ 1" in proved["for_all"] and "g ≥ 2" in proved["for_all"]
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
    assert "finish" not in out["properties"]                # not claimed: per instance
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
