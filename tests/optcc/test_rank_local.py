"""Rank-local enumeration (optcc.algorithms.families.local), its all-p property "local", and the
generated schedule form (optcc.generated) as a user meets it through `optcc schedule/verify/time`."""
from __future__ import annotations

import dataclasses
import importlib
import json
import os
import pathlib
import subprocess
import sys
from fractions import Fraction

import pytest

from optcc.algorithms import build_schedule
from optcc.algorithms.families import local as LC
from optcc.algorithms.single.build import optcc_allreduce
from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.generated import FORMAT, GeneratedSchedule, load_any
from optcc.lowering.digest import rank_program_sha256
from optcc.lowering.streaming import rank_program
from optcc.schedule import posting_order

CASES = [(algo, p, k, ell, s) for algo in ("ring", "optcc") for p in (3, 4, 5, 7) for k in (1, 2, 3)
         for ell in (1, Fraction(3, 2), 2, 3) for s in range(p) if not (algo == "optcc" and ell == 1)]


def _global(algo, p, k, ell, s):
    c = Cluster.build(p, 1, {s: ell} if ell != 1 else None)
    return build_schedule(algo, c, k) if algo == "ring" else optcc_allreduce(c, k)


def _tuples(rf):
    ops = ("add", "copy")
    return [(a, b, c, ops[o], Fraction(t, rf.scale)) for a, b, c, o, t in
            zip(rf.src.tolist(), rf.dst.tolist(), rf.piece.tolist(), rf.op.tolist(), rf.start.tolist())]


@pytest.mark.parametrize("algo,p,k,ell,s", CASES)
def test_rank_flows_are_the_schedule_restricted_to_the_rank_in_posting_order(algo, p, k, ell, s):
    schedule = _global(algo, p, k, ell, s)
    order = posting_order(schedule)
    flows = schedule.flows
    seen = 0
    for r in range(p):
        rf = LC.rank_flow_arrays(algo, p, k, s, ell, r)
        want = [(f.src, f.dst, f.piece, f.op, f.start) for f in (flows[i] for i in order) if r in (f.src, f.dst)]
        assert _tuples(rf) == want
        assert rf.pieces == schedule.pieces
        seen += len(rf)
    assert seen == 2 * len(flows)          # every flow at exactly its two ends


def test_rank_flows_name_exactly_the_peers_a_rank_talks_to():
    rf = LC.rank_flow_arrays("optcc", 16, 4, 5, 2, 7)     # a healthy rank: ring neighbours and the straggler
    assert rf.peers() == [5, 6, 8]
    assert LC.rank_flow_arrays("optcc", 16, 4, 5, 2, 5).peers() == [r for r in range(16) if r != 5]


def test_rank_program_from_the_rank_alone_is_the_global_program_renumbered():
    gen = GeneratedSchedule.of("optcc", Cluster.build(7, 1, {2: Fraction(3, 2)}), 3)
    full = gen.materialize()
    order = posting_order(full)
    for r in range(7):
        mine = [i for i in order if r in (full.flows[i].src, full.flows[i].dst)]
        local_id = {g: n for n, g in enumerate(mine)}
        a = rank_program(full, r)
        for op in a.ops:
            if op.flow is not None:
                op.flow = local_id[op.flow]
        b = rank_program(gen.rank_schedule(r), r)
        assert rank_program_sha256(a) == rank_program_sha256(b)


def test_a_part_timed_from_its_integer_starts_lowers_and_checks_as_from_its_fractions():
    """The per-rank path times a part from the integers its starts were made of (no Fraction
    converted back): the same times, the same program, and it passes L1-L5."""
    from optcc.timing import IntegerTimes
    from verifier.streaming_local import check_rank_program
    gen = GeneratedSchedule.of("optcc", Cluster.build(7, 1, {2: Fraction(3, 2)}), 3)
    for r in range(7):
        rf = gen.rank_flows(r)
        part = gen.rank_schedule(r, rf)
        plain, given = IntegerTimes(part), IntegerTimes(part, starts=(rf.start.tolist(), rf.scale))
        for name in ("starts", "ends"):
            assert [Fraction(x, given.scale) for x in getattr(given, name)] == \
                   [Fraction(x, plain.scale) for x in getattr(plain, name)]
        rp = rank_program(part, r, grid=given)
        assert rank_program_sha256(rp) == rank_program_sha256(rank_program(part, r))
        assert check_rank_program(part, rp, 4, given) is None


@pytest.mark.parametrize("column, change, shown", [("start", 1, "at"), ("op", None, "copy"), ("dst", 1, "->")])
def test_a_rank_part_off_the_proved_terms_in_one_field_is_refused_naming_the_flow(column, change, shown):
    gen = GeneratedSchedule.of("optcc", Cluster.build(7, 1, {2: Fraction(3, 2)}), 3)
    rf = gen.rank_flows(4)
    LC.check_rank_part("optcc", *gen.params(), 4, rf)
    values = getattr(rf, column).copy()
    values[5] = 1 - values[5] if change is None else values[5] + change
    with pytest.raises(OptccError, match=f"rank 4's flow 5 .*{shown}.* is not the proved families'"):
        LC.check_rank_part("optcc", *gen.params(), 4, dataclasses.replace(rf, **{column: values}))


def _local_results(algo, form):
    from verifier.parametric import optcc as O
    from verifier.parametric import ring as R
    from verifier.parametric.local import obligations
    from verifier.parametric.obligations import discharge
    LC._BUILT[algo] = form
    try:
        C = (O if algo == "optcc" else R).generator_model()
        return [discharge(ob)["status"] for ob in obligations(C)]
    finally:
        LC._BUILT.pop(algo, None)


def _fresh_form(algo):
    """The generator's LocalForm as its folder's local.py builds it (not the cached one)."""
    from optcc.proof_sources import SOURCES
    return importlib.import_module(SOURCES[algo].replace("/", ".") + ".local").form()


def test_the_local_property_is_proved_for_the_real_enumeration():
    for algo in ("ring", "optcc"):
        assert set(_local_results(algo, _fresh_form(algo))) == {"proved"}


def _mutants():
    base = _fresh_form("optcc")
    br = list(base.branches)
    yield "hop dst solved as src", dataclasses.replace(base, branches=tuple(br[:3] + [dataclasses.replace(br[3], solve=br[2].solve)] + br[4:]))
    yield "upload dst at healthy ranks", dataclasses.replace(base, branches=tuple(br[:5] + [dataclasses.replace(br[5], applies=br[4].applies)] + br[6:]))
    yield "all-gather dst branch dropped", dataclasses.replace(base, branches=tuple(br[:13] + br[14:]))
    yield "download enumerated twice", dataclasses.replace(base, branches=tuple(br + [br[7]]))

    def short(P, f=base.ranges):
        d = dict(f(P))
        d["optcc.rs_hop"] = d["optcc.rs_hop"][:2] + ((2, P.p - 2),)
        return d
    yield "reduce-scatter hops from j = 2", dataclasses.replace(base, ranges=short)

    def ring_dst(A, P, r, t):
        return (t, r)                     # the prologue's receiver taken for its sender
    yield "prologue dst = src", dataclasses.replace(base, branches=(br[0], dataclasses.replace(br[1], solve=ring_dst)) + tuple(br[2:]))


@pytest.mark.parametrize("name,form", list(_mutants()), ids=[n for n, _ in _mutants()])
def test_each_plausible_enumeration_bug_is_refuted(name, form):
    assert "refuted" in _local_results("optcc", form)


def test_prove_all_shows_the_local_property():
    from verifier.parametric import prove_all
    res = prove_all("ring")
    assert res["properties"]["local"] == "proved"


# ---- the generated schedule as a user meets it ---------------------------------------------------

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _optcc(*args, check=True):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")]))}
    r = subprocess.run([sys.executable, "-m", "optcc", *args], capture_output=True, text=True, timeout=600, env=env)
    if check:
        assert r.returncode == 0, r.stderr
    return r


def test_documented_schedule_at_p_4096_is_its_parameters(tmp_path):
    out = tmp_path / "optcc4096.json"
    r = _optcc("schedule", "--algo", "optcc", "--p", "4096", "--straggler", "0:2", "--segments", "25",
               "-o", str(out))
    assert "generated schedule" in r.stderr
    data = json.loads(out.read_text())
    assert data["format"] == FORMAT and data["algo"] == "optcc" and data["segments"] == 25
    assert out.stat().st_size < 1024
    gen = load_any(str(out))
    assert isinstance(gen, GeneratedSchedule) and gen.params() == (4096, 25, 0, 2)
    rf = gen.rank_flows(9)
    H, k = 4095, 25              # a healthy rank: ring hops 4(H−1) per segment and more, k uploads, k downloads
    assert len(rf) == 4 * k * (H - 1) + 2 * k
    assert rf.peers() == [0, 8, 10]
    assert len(gen.rank_flows(0)) == 2 * k * H          # the straggler: one upload and one download per job
    v = _optcc("verify", str(out), "--json")
    res = json.loads(v.stdout)
    assert res["proved"] is True and res["form"] == "generated"
    assert res["properties"]["sum"] == res["properties"]["local"] == "proved"


def test_generated_and_flow_list_forms_time_and_simulate_alike(tmp_path):
    gen_path, flows_path = tmp_path / "g.json", tmp_path / "f.json"
    common = ["--algo", "optcc", "--p", "8", "--straggler", "1:1.5", "--segments", "3"]
    _optcc("schedule", *common, "--form", "generated", "-o", str(gen_path))
    _optcc("schedule", *common, "--form", "flows", "-o", str(flows_path))
    assert json.loads(flows_path.read_text()).get("format") != FORMAT
    t_gen = json.loads(_optcc("time", str(gen_path), "--json", "--latency-model", "simai").stdout)
    t_flows = json.loads(_optcc("time", str(flows_path), "--json", "--latency-model", "simai").stdout)
    for key in ("slot_time", "event_time", "t0", "lower_bound", "capacity_ok"):
        assert t_gen[key] == t_flows[key]
    assert GeneratedSchedule.load(str(gen_path)).materialize().sha256() == \
        build_schedule("optcc", Cluster.build(8, 1, {1: Fraction(3, 2)}), 3).sha256()
    assert "exact sum" in _optcc("simulate", str(gen_path)).stdout


@pytest.mark.parametrize("edit,field", [
    ({"algo": "optcc_multi"}, "algo"),
    ({"sources_sha256": "0" * 64}, "sources_sha256"),
    ({"sources_sha256": "xyz"}, "sources_sha256"),
    ({"segments": 0}, "segments"),
    ({"extra": 1}, "extra"),
    ({"cluster": {"p": 8, "g": 2, "stragglers": [{"rank": 0, "ell": 2}]}}, "cluster"),
])
def test_bad_generated_file_exits_2_naming_the_field(tmp_path, edit, field):
    path = tmp_path / "g.json"
    data = GeneratedSchedule.of("optcc", Cluster.build(8, 1, {0: 2}), 2).to_json()
    data.update(edit)
    path.write_text(json.dumps(data))
    r = _optcc("time", str(path), check=False)
    assert r.returncode == 2 and f"error: schedule.{field}" in r.stderr, r.stderr
    with pytest.raises(OptccError) as e:
        load_any(str(path))
    assert e.value.field == "schedule." + field


def test_rank_outside_p_is_refused_naming_rank():
    gen = GeneratedSchedule.of("ring", Cluster.build(4), 1)
    for bad in (-1, 4, True):
        with pytest.raises(OptccError) as e:
            gen.rank_flows(bad)
        assert e.value.field == "rank"


def test_generated_form_is_refused_where_no_proved_generator_serves(tmp_path):
    r = _optcc("schedule", "--algo", "optcc", "--p", "8", "--straggler", "0:2", "--straggler", "3:2",
               "--form", "generated", "-o", str(tmp_path / "x.json"), check=False)
    assert r.returncode == 2 and "error: --form" in r.stderr and "optcc_multi" in r.stderr
    assert not (tmp_path / "x.json").exists()
