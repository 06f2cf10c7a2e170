"""Mutation suite for the parametric ring and OptCC proofs: every mutant refuted with a counterexample,
and the per-instance verifier agrees on small instances (tests/parametric_mutants.py)."""
from __future__ import annotations

from fractions import Fraction

import pytest

from optcc.algorithms.ring.families import ring_flows
from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.schedule import Schedule
from parametric_mutants import MUTANTS, OPTCC_MUTANTS
from optcc.algorithms.single.families import optcc_flows
from verifier import prove_allreduce
from verifier.parametric import prove_all


def _instance_refuted(families, p, k, ell, s) -> bool:
    c = Cluster.build(p, 1, [(s, Fraction(ell))] if Fraction(ell) != 1 else [])
    shard = Fraction(1, k * p)
    try:
        sched = Schedule(c, [shard] * (k * p), ring_flows(p, k, shard * Fraction(ell), families),
                         meta={"algorithm": "ring", "segments": k, "capacity": "exclusive"})
        return not prove_allreduce(sched).proved
    except OptccError:
        return True          # not even a valid schedule (e.g. a flow from a rank to itself)


def _optcc_instance_refuted(families, p, k, ell, s) -> bool:
    c = Cluster.build(p, 1, [(s, Fraction(ell))] if Fraction(ell) != 1 else [])
    try:
        pieces, flows = optcc_flows(p, k, s, Fraction(ell), families)
        sched = Schedule(c, pieces, flows, meta={"algorithm": "optcc", "segments": k, "capacity": "exclusive"})
        return not prove_allreduce(sched).proved
    except OptccError:
        return True


def _check_refuted(res):
    assert res["proved"] is False
    refuted = [r for r in res["failures"] if r["status"] == "refuted" and "counterexample" in r]
    assert refuted, res["failures"]
    cx = refuted[0]["counterexample"]
    assert {"p", "k", "ell", "s", "flows"} <= set(cx) and cx["p"] >= 2
    for f in cx["flows"]:                          # concrete flows, evaluated from the family
        assert isinstance(f["src"], int) and isinstance(f["dst"], int)
    return cx


def test_at_least_ten_mutants_each():
    assert len(MUTANTS) >= 10 and len(OPTCC_MUTANTS) >= 10


@pytest.mark.parametrize("name", sorted(OPTCC_MUTANTS))
def test_optcc_mutant_refuted_by_both(name):
    fams = OPTCC_MUTANTS[name]
    cx = _check_refuted(prove_all("optcc", families=fams, fail_fast=True))
    small = [(p, k, ell, 0) for p in (3, 4) for k in (2, 3) for ell in (Fraction(3, 2), 3)]
    if cx["p"] <= 6 and cx["k"] <= 3:
        small.insert(0, (cx["p"], cx["k"], Fraction(cx["ell"]), cx["s"]))
    assert any(_optcc_instance_refuted(fams, *inst) for inst in small)


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_mutant_refuted_by_both(name):
    fams = MUTANTS[name]
    cx = _check_refuted(prove_all("ring", families=fams))
    assert cx["flows"]
    # the per-instance verifier agrees: some small instance of the mutant is wrong too
    small = [(p, k, ell, 0) for p in (3, 4) for k in (1, 2) for ell in (1, 2)]
    if cx["p"] <= 6 and cx["k"] <= 3:
        small.insert(0, (cx["p"], cx["k"], Fraction(cx["ell"]), cx["s"]))
    assert any(_instance_refuted(fams, *inst) for inst in small)


def test_unmutated_families_pass_both():
    from optcc.algorithms.single import families as optcc
    from optcc.algorithms.ring import families as ring
    assert prove_all("ring", families=ring.FAMILIES)["proved"]
    assert not any(_instance_refuted(ring.FAMILIES, p, k, 2, 0) for p in (2, 3, 4) for k in (1, 2))
    assert not any(_optcc_instance_refuted(optcc.FAMILIES, p, k, ell, 0)
                   for p in (3, 4) for k in (2, 3) for ell in (Fraction(3, 2), 3))
