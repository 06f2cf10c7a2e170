"""Parametric (all-p) proofs of the ring and single-straggler OptCC generators: families = generator, obligations proved,
CLI `optcc prove-all`, generator certificates accepted by the runner's proof gate."""
from __future__ import annotations

import hashlib
import itertools
import json
import math
from fractions import Fraction

import pytest

from bounds.closed_form import single_straggler_terms
from optcc.algorithms.families import INT, Params
from optcc.algorithms.single import families as FO
from optcc.algorithms.ring import families as FR
from optcc.algorithms.single.build import optcc_allreduce, optcc_slot_time
from optcc.algorithms.ring.build import ring_allreduce
from optcc_app.cli import main
from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.schedule import Flow, Schedule
from optcc.timing import durations, slot_time
from verifier.parametric import PROPERTIES, prove_all
from verifier.parametric import optcc as PO
from verifier.parametric import ring as PR
from verifier.parametric.certificate import generator_certificate_check, write_generator_certificate

# sha256 digests of the generators' schedules on GRID, taken before the ring became the
# enumeration of its families (commit a7fa82d): the enumeration must not change one byte.
# Re-baselined once when the cluster's JSON key `alpha` became `overhead` (issue 21): the
# test below writes the old key again and gets the old digests, so nothing else changed.
RING_GRID_DIGEST = "66b7f0e4d06e08e5c52e8aad82ab918b87b8af6f6df60b40815d5d924f576940"
OPTCC_GRID_DIGEST = "a05fcb38bfdc616e9b7e71fbf7ce4901dd3c3cf0f8647e063a0e75fb451f0d96"
RING_GRID_DIGEST_ALPHA_KEY = "4ed24823418bde0dd8da56c890e1eb0bb23a808e3821d70b7b9fd018f4ddaae8"
OPTCC_GRID_DIGEST_ALPHA_KEY = "f07f5fc0535a69f55d3dc2516099f3742b41b1508f4229d7765b4fe0d72d3471"


def _grid():
    for p in (2, 3, 4, 5, 6, 7, 9):
        for k in (1, 2, 3):
            for st in ([], [(0, Fraction(2))], [(p - 1, Fraction(3, 2))], [(p // 2, Fraction(5))],
                       [(1, Fraction(8, 7))]):
                yield p, k, Cluster.build(p, 1, st)


def _digest(build):
    """The grid's digest over the schedules as they were then: without the stated slot time
    (written since), which must be the time each schedule ends."""
    from optcc.timing import slot_time
    h = hashlib.sha256()
    for p, k, c in _grid():
        s = build(c, k)
        assert s.stated_slot_time == slot_time(s), (p, k, c.stragglers)
        s.stated_slot_time = None
        h.update(s.sha256().encode())
    return h.hexdigest()


def test_ring_generator_is_the_family_enumeration_sha256_identical():
    assert _digest(ring_allreduce) == RING_GRID_DIGEST


def test_optcc_generator_unchanged():
    assert _digest(optcc_allreduce) == OPTCC_GRID_DIGEST


def test_the_rebaseline_changed_only_the_overhead_key(monkeypatch):
    """With the cluster's o written under its old key `alpha`, both grids hash as before issue 21."""
    plain = Schedule._json_with           # what to_json and canonical_bytes both write the head with

    def old_key(self, flows):
        data = plain(self, flows)
        data["cluster"] = {("alpha" if k == "overhead" else k): v for k, v in data["cluster"].items()}
        return data
    monkeypatch.setattr(Schedule, "_json_with", old_key)
    assert _digest(ring_allreduce) == RING_GRID_DIGEST_ALPHA_KEY
    assert _digest(optcc_allreduce) == OPTCC_GRID_DIGEST_ALPHA_KEY


def test_family_durations_are_the_timing_models():
    for p, k, c in _grid():
        if len(c.stragglers) > 1:
            continue
        (s, ell), = c.stragglers.items() if c.stragglers else [(0, Fraction(1))]
        sched = ring_allreduce(c, k)
        step = Fraction(1, k * p) * ell
        P = Params(p, k, ell, s)
        durs = durations(sched)
        n = 0
        for sigma in range(k):
            for t in range(2 * (p - 1)):
                fam, h = (FR.RS, t) if t < p - 1 else (FR.AG, t - (p - 1))
                for i in range(p):
                    T = fam.terms(INT, P, sigma, h, i)
                    f = sched.flows[n]
                    assert (f.src, f.dst, f.start) == (T.src, T.dst, (T.box + T.offset) * step)
                    assert durs[n] == T.dur * step
                    n += 1
        assert n == len(sched.flows)


def test_closed_form_and_bound_match_the_project():
    for p, k, c in _grid():
        ell = max(c.slowdown)
        if len(c.stragglers) <= 1:
            assert slot_time(ring_allreduce(c, k)) == PR.closed_form(p, ell)
        assert PR.lower_bound(p, ell) == tuple(single_straggler_terms(p, ell))


def test_prove_all_ring_proves_every_property():
    res = prove_all("ring")
    assert res["proved"] is True and res["failures"] == []
    assert set(res["properties"]) == set(PROPERTIES)
    assert all(v == "proved" for v in res["properties"].values())
    assert res["obligations"] >= 40
    assert "p ≥ 2" in res["for_all"] and "k ≥ 1" in res["for_all"]
    json.dumps(res, allow_nan=False)


def test_prove_all_refuses_unknown_constructions():
    with pytest.raises(OptccError):
        prove_all("nope")


def test_optcc_families_enumerate_the_generator_sha256_identical():
    for p, k, c in _grid():
        if p < 3 or len(c.stragglers) > 1:
            continue
        (s, ell), = c.stragglers.items() if c.stragglers else [(0, Fraction(1))]
        gen = optcc_allreduce(c, k)
        pieces, flows = FO.optcc_flows(p, k, s, ell)
        again = Schedule(c, pieces, flows, meta=gen.meta, stated_slot_time=gen.stated_slot_time)
        assert again.sha256() == gen.sha256(), (p, k, s, ell)


def test_optcc_family_durations_and_closed_form_are_the_projects():
    import z3
    for p, k, c in _grid():
        if p < 3:
            continue
        (s, ell), = c.stragglers.items() if c.stragglers else [(0, Fraction(1))]
        H = p - 1
        P = Params(p, k, Fraction(ell), s)
        d = FO.shard_size(INT, P)
        lam = d if ell < 2 else ell * d / 2
        unit = (d, lam, d)
        gen = optcc_allreduce(c, k)
        durs = durations(gen)
        seen = 0
        by_key = {}
        for fam in FO.FAMILIES:
            for idx in itertools.product(*[range(-1, max(k, H) + 1)] * len(fam.index)):
                if all(fam.domain(INT, P, *idx)):
                    T = fam.terms(INT, P, *idx)
                    rank = [s if n == H else n + (n >= s) for n in (T.src, T.dst)]
                    by_key[(*rank, FO.piece_index(INT, P, T.piece), fam.op)] = T.dur * unit[T.phase]
                    seen += 1
        assert seen == len(gen.flows)
        for f, dd in zip(gen.flows, durs):
            assert by_key[(f.src, f.dst, f.piece, f.op)] == dd
        cf = z3.simplify(PO.closed_form(z3.RealVal(H), z3.RealVal(k), z3.RealVal(ell)))
        assert Fraction(str(cf.as_fraction())) == optcc_slot_time(c, k) == slot_time(gen)


def test_prove_all_optcc_proves_every_property():
    res = prove_all("optcc")
    assert res["proved"] is True and res["failures"] == []
    assert set(res["properties"]) == set(PROPERTIES)
    assert res["obligations"] >= 200 and "p ≥ 3" in res["for_all"]


def test_cli_prove_all_json(capsys, tmp_path):
    cert = tmp_path / "ring.cert.json"
    assert main(["prove-all", "--algo", "ring", "--json", "--certificate", str(cert)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["proved"] is True and out["properties"]["sum"] == "proved"
    assert isinstance(out["obligations"], int) and math.isfinite(out["seconds"])
    assert json.loads(cert.read_text())["algo"] == "ring"


def test_cli_prove_all_prints_counterexample(capsys, monkeypatch):
    from parametric_mutants import MUTANTS
    import verifier.parametric as vp
    real = vp.prove_all
    monkeypatch.setattr(vp, "prove_all", lambda algo: real(algo, families=MUTANTS["rs copies instead of adding"]))
    assert main(["prove-all", "--algo", "ring"]) == 1
    out = capsys.readouterr().out
    assert "REFUTED (sum)" in out and "counterexample: p=" in out and "flow ring.reduce_scatter(" in out
    assert "NOT PROVED" in out


def test_cli_prove_all_optcc_json(capsys):
    assert main(["prove-all", "--algo", "optcc", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["proved"] is True and set(out["properties"].values()) == {"proved"}


@pytest.fixture(scope="module")
def ring_cert(tmp_path_factory):
    path = tmp_path_factory.mktemp("gencert") / "ring.json"
    write_generator_certificate(prove_all("ring"), str(path))
    return str(path)


def test_generator_certificate_accepts_generated_schedules(ring_cert):
    for p, k, st in ((2, 1, []), (5, 3, [(4, Fraction(3))]), (64, 2, [(7, Fraction(9, 8))])):
        sched = Schedule.from_json(ring_allreduce(Cluster.build(p, 1, st), k).to_json())
        ok, why = generator_certificate_check(sched, ring_cert)
        assert ok, why


def test_generator_certificate_rejects_other_schedules(ring_cert, monkeypatch):
    c = Cluster.build(5, 1, [(0, Fraction(2))])
    good = ring_allreduce(c, 2)
    f = good.flows[3]
    tampered = Schedule(c, good.pieces, good.flows[:3] + [Flow(f.src, f.dst, f.piece, f.op, f.start + 1)]
                        + good.flows[4:], meta=good.meta)
    assert generator_certificate_check(tampered, ring_cert)[0] is False
    wrong_k = Schedule(c, good.pieces, good.flows, meta={**good.meta, "segments": 1})
    assert generator_certificate_check(wrong_k, ring_cert)[0] is False
    assert generator_certificate_check(optcc_allreduce(c, 2), ring_cert)[0] is False
    two = ring_allreduce(Cluster.build(5, 1, [(0, 2), (1, 3)]), 1)
    assert generator_certificate_check(two, ring_cert)[0] is False      # outside the proved range
    import verifier.parametric.certificate as gc
    monkeypatch.setattr(gc, "sources_digest", lambda algo: "0" * 64)
    assert generator_certificate_check(good, ring_cert)[0] is False      # sources changed


@pytest.fixture(scope="module")
def optcc_cert(tmp_path_factory):
    path = tmp_path_factory.mktemp("gencert") / "optcc.json"
    write_generator_certificate(prove_all("optcc"), str(path))
    return str(path)


def test_optcc_generator_certificate(optcc_cert, ring_cert):
    for p, k, st in ((3, 1, []), (7, 3, [(3, Fraction(3, 2))]), (9, 2, [(8, Fraction(3))])):
        sched = optcc_allreduce(Cluster.build(p, 1, st), k)
        ok, why = generator_certificate_check(sched, optcc_cert)
        assert ok, why
        assert generator_certificate_check(sched, ring_cert)[0] is False
    p2 = optcc_allreduce(Cluster.build(2, 1, [(0, Fraction(2))]), 1)
    assert generator_certificate_check(p2, optcc_cert)[0] is False        # p = 2: per instance
    good = optcc_allreduce(Cluster.build(5, 1, [(1, Fraction(3, 2))]), 2)
    moved = Schedule(good.cluster, good.pieces, good.flows, meta={**good.meta, "straggler": 0})
    assert generator_certificate_check(moved, optcc_cert)[0] is False
    f = good.flows[-1]
    late = Schedule(good.cluster, good.pieces, good.flows[:-1] + [f._replace(start=f.start + 1)], meta=good.meta)
    assert generator_certificate_check(late, optcc_cert)[0] is False


def test_runner_gate_accepts_a_generator_certificate(ring_cert):
    from gpu_runner.proof import require_proof
    sched = ring_allreduce(Cluster.build(6, 1, [(2, 2)]), 2)
    assert "generator certificate" in require_proof(sched, ring_cert)
    bad = Schedule(sched.cluster, sched.pieces, sched.flows[1:] + sched.flows[:1], meta=sched.meta)
    with pytest.raises(OptccError):
        require_proof(bad, ring_cert)


def test_multi_straggler_core_ports_for_all_sizes_and_core_is_in_the_generator():
    from collections import Counter
    from dataclasses import replace

    from optcc.algorithms.multi import families as M
    from optcc.algorithms.multi.build import _slot, optcc_multi_allreduce
    from verifier.parametric import multi
    from verifier.parametric.obligations import discharge
    results = [discharge(ob) for ob in multi.obligations()]
    assert len(results) >= 20 and all(r["status"] == "proved" for r in results), results
    for p, m, k in ((6, 3, 1), (6, 3, 3), (8, 4, 2), (9, 3, 2)):
        st = list(zip(range(0, 2 * m, 2), [Fraction(3), Fraction(2), Fraction(3, 2), Fraction(5, 4)]))
        c = Cluster.build(p, 1, st)
        ranked = sorted(c.stragglers.items(), key=lambda kv: (-kv[1], kv[0]))
        _, lam = _slot(p - m, k, [e for _, e in ranked])
        core = M.core_flows(p - m, m, k, c.healthy, [r for r, _ in ranked], lam)
        assert len(core) > 0 and not Counter(core) - Counter(optcc_multi_allreduce(c, k).flows)
    # a mutant (F one window late) collides with the next window's flows and is refuted
    late = replace(M.F, terms=lambda A, P, *idx: M.F.terms(A, P, *idx)._replace(box=M.F.terms(A, P, *idx).box + 2))
    C = multi.generator_model()
    C.families = (M.RAW, M.RS, late, M.AG)
    from verifier.parametric.generic import ports
    bad = [discharge(ob) for ob in ports(C)]
    refuted = [r for r in bad if r["status"] == "refuted"]
    assert refuted and {"H", "m", "k"} <= set(refuted[0]["counterexample"])


def test_optcc_small_case_p2_is_proved_per_instance():
    """p = 2 is outside the families' range (one exchange, not the pipeline): per instance."""
    from verifier import prove_allreduce
    for ell in (Fraction(1), Fraction(3, 2), Fraction(2), Fraction(3)):
        for s in (0, 1):
            for k in (1, 2):
                c = Cluster.build(2, 1, [(s, ell)] if ell != 1 else [])
                assert prove_allreduce(optcc_allreduce(c, k)).proved, (ell, s, k)
