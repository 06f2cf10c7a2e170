"""Generator certificates prove what runs: a forged one is refused, the digest covers every module
that determines a schedule, sizes are checked before any work, and the glue between the proved
formulas and the schedule (piece map, slot counts, phase origins and units, loop bounds, piece
sizes, node ranks, durations from Cluster) is checked: each mutant below is refused by the
certificate check or refuted by prove-all (tests/glue_mutants.py)."""
from __future__ import annotations

import json
import shutil
import time
import tracemalloc
from fractions import Fraction

import pytest

from glue_mutants import (GENERATOR_MUTANTS, GLUE_MUTANTS, TIMING_MUTANTS, VERIFIER_MUTANTS, apply_glue_mutant,
                          generator_mutant)
from optcc import proof_sources
from optcc.algorithms.single import families as FO
from optcc.algorithms.ring import families as FR
from optcc.algorithms.single.build import optcc_allreduce
from optcc.algorithms.ring.build import ring_allreduce
from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.schedule import Flow, Schedule
from verifier import prove_allreduce
from verifier.parametric import prove_all
from verifier.parametric import certificate as gc
from verifier.parametric.prove import obligations, obligations_digest

INSTANCES = ((5, 2, [(1, Fraction(3, 2))]), (6, 2, [(0, Fraction(3))]), (4, 1, [(3, Fraction(5, 4))]),
             (5, 3, []))


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    d = tmp_path_factory.mktemp("gencert")
    out = {}
    for algo in ("ring", "optcc"):
        out[algo] = str(d / f"{algo}.json")
        gc.write_generator_certificate(prove_all(algo), out[algo])
    return out


def _forge(path, algo, **witness):
    data = {"format": gc.FORMAT, "algo": algo, "proved": True, "for_all": "everything",
            "properties": {k: "proved" for k in ("lemmas", "well_formed", "sum", "ports", "causality",
                                                 "finish", "bound")},
            "obligations": 1, "witness": witness, "sources_sha256": gc.sources_digest(algo)}
    with open(path, "w") as fh:
        json.dump(data, fh)


def test_genuine_certificates_accept_the_generators(certs):
    for p, k, st in INSTANCES:
        c = Cluster.build(p, 1, st)
        for algo, build in (("ring", ring_allreduce), ("optcc", optcc_allreduce)):
            ok, why = gc.generator_certificate_check(Schedule.from_json(build(c, k).to_json()), certs[algo])
            assert ok and "re-proved" in why, (algo, p, k, why)


def test_a_forged_certificate_with_a_made_up_witness_is_refused(tmp_path, certs):
    path = str(tmp_path / "forged.json")
    _forge(path, "ring", obligations_sha256="0" * 64)
    ok, why = gc.generator_certificate_check(ring_allreduce(Cluster.build(4), 1), path)
    assert not ok and "obligations_sha256 differs" in why
    _forge(path, "ring")
    assert "no witness" in gc.generator_certificate_check(ring_allreduce(Cluster.build(4), 1), path)[1]


def test_a_forged_certificate_of_a_wrong_generator_is_refused(tmp_path, monkeypatch, certs):
    """Sources edited to a wrong family; the forger writes the new digests and "sum": "proved"
    without proving anything: re-proving at check time refutes it, and the runner refuses."""
    from gpu_runner.proof import require_proof
    from parametric_mutants import MUTANTS
    wrong = MUTANTS["rs copies instead of adding"]
    monkeypatch.setattr(FR, "FAMILIES", wrong)
    monkeypatch.setattr(gc, "sources_digest", lambda algo: "e" * 64)     # the edited sources
    path = str(tmp_path / "forged.json")
    _forge(path, "ring", obligations_sha256=obligations_digest(obligations("ring")[1]))
    shard = Fraction(1, 12)
    sched = Schedule(Cluster.build(4), [shard] * 12, FR.ring_flows(4, 3, shard, wrong),
                     meta={"algorithm": "ring", "segments": 3, "capacity": "exclusive"})
    assert not prove_allreduce(sched).proved                              # the schedule is wrong
    ok, why = gc.generator_certificate_check(sched, path)
    assert not ok and "re-proving the generator" in why and "refuted" in why
    with pytest.raises(OptccError) as e:
        require_proof(sched, path)
    assert e.value.field == "certificate"


def test_a_stale_format_1_certificate_is_refused(tmp_path):
    from gpu_runner.proof import require_proof
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"format": "optcc-generator-certificate/1", "algo": "ring", "proved": True,
                                "properties": {"sum": "proved"}, "sources_sha256": gc.sources_digest("ring")}))
    ok, why = gc.generator_certificate_check(ring_allreduce(Cluster.build(4), 1), str(path))
    assert not ok and "stale" in why and "optcc-generator-certificate/2" in why
    with pytest.raises(OptccError) as e:                # read as a generator certificate, not as another kind
        require_proof(ring_allreduce(Cluster.build(4), 1), str(path))
    assert e.value.field == "certificate" and "generator certificate" in e.value.message


def test_the_digest_covers_every_module_that_determines_a_schedule():
    for algo, own in (("ring", ["optcc/algorithms/ring/build.py", "optcc/algorithms/ring/families.py"]),
                      ("optcc", ["optcc/algorithms/single/build.py", "optcc/algorithms/single/families.py"])):
        files = gc.source_files(algo)
        for rel in own + ["optcc/cluster.py", "optcc/timing.py", "optcc/schedule.py", "optcc/exact.py",
                          "optcc/algorithms/__init__.py", "optcc/algorithms/families/__init__.py",
                          "verifier/parametric/obligations.py", "verifier/parametric/generic.py",
                          "verifier/parametric/prove.py", "verifier/parametric/certificate.py"]:
            assert rel in files, (algo, rel)


def test_editing_cluster_py_invalidates_a_genuine_certificate(tmp_path, monkeypatch, certs):
    """Doubling the flow durations in a copy of optcc/cluster.py changes the digest; the check refuses."""
    for rel in gc.source_files("optcc"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(proof_sources._ROOT / rel, tmp_path / rel)
    real = gc.sources_digest("optcc")
    monkeypatch.setattr(proof_sources, "_ROOT", tmp_path)
    assert gc.sources_digest("optcc") == real
    src = (tmp_path / "optcc/cluster.py").read_text()
    old = "return size * max(self.slowdown[src], self.slowdown[dst]) / rate"
    assert old in src
    (tmp_path / "optcc/cluster.py").write_text(src.replace(old, "return 2 * " + old[len("return "):]))
    assert gc.sources_digest("optcc") != real
    sched = optcc_allreduce(Cluster.build(5, 1, [(1, Fraction(3, 2))]), 2)
    ok, why = gc.generator_certificate_check(sched, certs["optcc"])
    assert not ok and "sources_sha256 differs" in why


def test_limits_and_sizes_are_checked_before_any_enumeration(certs, monkeypatch):
    """A tiny schedule that claims p = 2000 (8·10⁶ flows to regenerate): refused at once.
    (The certificate is read plainly here: optcc.files.read_text reserves a 1 GB buffer.)"""
    from verifier import trust_files
    monkeypatch.setattr(trust_files, "read_json", lambda path, field: json.load(open(path)))
    for algo in ("ring", "optcc"):
        meta = {"algorithm": algo, "segments": 1, "capacity": "exclusive", "straggler": 0}
        tiny = Schedule(Cluster.build(2000), [Fraction(1)], [Flow(0, 1, 0, "add", Fraction(0))], meta=meta)
        assert len(tiny.to_json()) < 400
        tracemalloc.start()
        t0 = time.perf_counter()
        ok, why = gc.generator_certificate_check(tiny, certs[algo])
        seconds = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert not ok and "flows" in why and seconds < 5 and peak < 50 * 2**20, (why, seconds, peak)
        big = Schedule(Cluster.build(2000), [Fraction(1)], tiny.flows, meta={**meta, "segments": 2})
        ok, why = gc.generator_certificate_check(big, certs[algo])
        assert not ok and "over the limit" in why


@pytest.mark.parametrize("name", sorted(GENERATOR_MUTANTS))
def test_generator_glue_mutant_refused_by_the_certificate(name, monkeypatch, certs):
    monkeypatch.setattr(FO, "optcc_flows", generator_mutant(GENERATOR_MUTANTS[name]))
    refused = []
    for p, k, st in INSTANCES:
        try:
            sched = optcc_allreduce(Cluster.build(p, 1, st), k)
        except OptccError:
            refused.append("not a schedule")
            continue
        ok, why = gc.generator_certificate_check(sched, certs["optcc"])
        if not ok:
            refused.append(why)
    assert refused, name


def test_generator_mutants_build_wrong_schedules(monkeypatch):
    """The glue mutants are not cosmetic: the per-instance verifier refutes what each builds."""
    for name, edits in GENERATOR_MUTANTS.items():
        monkeypatch.setattr(FO, "optcc_flows", generator_mutant(edits))
        wrong = False
        for p, k, st in INSTANCES:
            try:
                wrong = not prove_allreduce(optcc_allreduce(Cluster.build(p, 1, st), k)).proved
            except OptccError:
                wrong = True
            if wrong:
                break
        assert wrong, name


@pytest.mark.parametrize("name", sorted(TIMING_MUTANTS))
def test_timing_mutant_refused_by_the_certificate(name, monkeypatch, certs):
    target, attr, fn = TIMING_MUTANTS[name]
    monkeypatch.setattr(target, attr, fn(getattr(target, attr)))
    for algo, build in (("optcc", optcc_allreduce), ("ring", ring_allreduce)):
        sched = build(Cluster.build(5, 1, [(1, Fraction(3, 2))]), 2)
        ok, why = gc.generator_certificate_check(sched, certs[algo])
        assert not ok and "timing model" in why, (algo, why)


@pytest.mark.parametrize("name", sorted(VERIFIER_MUTANTS))
def test_verifier_glue_mutant_refuted_by_prove_all(name, monkeypatch):
    algo, module, attr, fn = VERIFIER_MUTANTS[name]
    monkeypatch.setattr(module, attr, fn(getattr(module, attr)))
    res = prove_all(algo, fail_fast=True)
    assert res["proved"] is False and any(r["status"] == "refuted" for r in res["failures"]), res["failures"]


@pytest.mark.parametrize("name", sorted(GLUE_MUTANTS))
def test_glue_mutant_refuted_by_prove_all(name, monkeypatch):
    """The builder, the rank-local enumeration, the certificate and the obligations read one
    definition of the glue, so a change to it is a change to what prove-all proves."""
    algo = apply_glue_mutant(monkeypatch, name)
    res = prove_all(algo, fail_fast=True)
    assert res["proved"] is False and any(r["status"] == "refuted" for r in res["failures"]), res["failures"]


@pytest.mark.parametrize("name", sorted(GLUE_MUTANTS))
def test_glue_mutant_changes_what_runs(name, monkeypatch):
    """The glue mutants are not cosmetic: the rank-local enumeration the ranks run from changes
    (so the proof, not a pinned digest, is what stops each one)."""
    from optcc.algorithms.families.local import rank_flow_arrays
    algo, which, _ = GLUE_MUTANTS[name]
    cases = [(7, 1, 2, Fraction(3, 2)), (7, 3, 2, Fraction(3, 2)), (6, 2, 4, Fraction(3)), (5, 2, 1, Fraction(1))]

    def every_rank():
        return [(rf.pieces, rf.src.tolist(), rf.dst.tolist(), rf.piece.tolist(), rf.op.tolist(),
                 [Fraction(t, rf.scale) for t in rf.start.tolist()])
                for p, k, s, ell in cases for rf in (rank_flow_arrays(algo, p, k, s, ell, r) for r in range(p))]
    before = every_rank()
    apply_glue_mutant(monkeypatch, name)
    try:
        after = every_rank()
    except (ValueError, OptccError):
        return                                  # refused to build at all: changed too
    assert after != before


def test_at_least_twenty_glue_and_timing_mutants():
    assert len(GENERATOR_MUTANTS) + len(GLUE_MUTANTS) + len(TIMING_MUTANTS) + len(VERIFIER_MUTANTS) >= 20


def test_a_stated_time_other_than_the_proved_flows_end_is_refused(certs):
    """The stated slot time rides in the schedule the check compares byte for byte, so it is
    checked on its own: it must be the last landing of the proved flows and durations."""
    c = Cluster.build(5, 1, {1: Fraction(3, 2)})
    for algo, build in (("ring", ring_allreduce), ("optcc", optcc_allreduce)):
        s = build(c, 2)
        assert s.stated_slot_time is not None
        ok, why = gc.generator_certificate_check(s, certs[algo])
        assert ok and f"ends at the stated slot time {s.stated_slot_time} n/B" in why, why
        s.stated_slot_time = s.stated_slot_time * 400
        ok, why = gc.generator_certificate_check(s, certs[algo])
        assert not ok and "states slot time" in why and "but its proved flows end at" in why, why
