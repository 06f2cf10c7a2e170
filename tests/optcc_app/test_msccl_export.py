"""optcc msccl export: every exported ring / OptCC schedule on a small grid is proved by
msccl verify within the runtime's limits (round trip); what MSCCL cannot express is refused."""
import math
import re
from fractions import Fraction as F

import pytest
import verifier_cases

from optcc.algorithms import build_schedule
from optcc_app.cli import main
from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.schedule import Schedule
from verifier.msccl import verify_xml
from optcc.lowering.msccl import chunk_layout, export_xml

# (p, g, stragglers, k): single and multiple stragglers, servers, pipelining segments
GRID = [(2, 1, {}, 1), (3, 1, {0: 2}, 1), (4, 1, {0: 2}, 2), (5, 1, {1: 3}, 1), (8, 1, {0: F(8, 7)}, 1),
        (6, 1, {0: 3, 2: 2}, 1), (8, 2, {0: 2, 1: 2}, 1), (16, 1, {3: 4}, 1)]


def _d(schedule):
    return math.lcm(*(x.denominator for x in schedule.pieces))


@pytest.mark.parametrize("algo", ["ring", "optcc"])
@pytest.mark.parametrize("p,g,stragglers,k", GRID)
def test_round_trip_is_proved(algo, p, g, stragglers, k):
    schedule = build_schedule(algo, Cluster.build(p, g, stragglers), k)
    text, facts = export_xml(schedule, max_steps=64)
    proof = verify_xml(text, 64)
    assert proof.proved, proof.counterexample
    assert facts["D"] == _d(schedule) and f'nchunksperloop="{facts["D"]}"' in text
    assert facts["max_tb_steps"] <= 64
    steps_per_tb = [len(tb.split("<step ")) - 1 for tb in text.split("<tb ")[1:]]
    assert max(steps_per_tb) == facts["max_tb_steps"] and sum(steps_per_tb) == facts["steps"]
    assert proof.facts["steps"] == facts["steps"] and proof.facts["ranks"] == p


def test_peers_are_split_over_channels_to_fit_the_step_limit():
    schedule = build_schedule("ring", Cluster.build(8, 1, {0: 2}), 8)    # 2·7·8 = 112 steps in one tb
    text64, facts64 = export_xml(schedule, max_steps=64)
    text256, facts256 = export_xml(schedule, max_steps=256)
    assert facts256["channels"] == 1 and facts256["max_tb_steps"] == 112
    assert facts64["channels"] >= 2 and facts64["max_tb_steps"] <= 64
    assert verify_xml(text64, 64).proved and verify_xml(text256, 256).proved
    assert not verify_xml(text256, 64).properties["limits"]


def test_chunk_layout_and_cnt_limit():
    c = Cluster.build(2)
    schedule = Schedule(c, [F(1, 2), F(1, 200), F(99, 200)], [])
    d, parts = chunk_layout(schedule)
    assert d == 200
    assert parts[0] == [(0, 71), (71, 29)] and parts[1] == [(100, 1)] and parts[2] == [(101, 71), (172, 28)]


def test_big_pieces_are_cut_into_steps_under_the_cnt_limit():
    from optcc.schedule import Flow
    c = Cluster.build(2)
    flows = [Flow(0, 1, 0, "add", F(0)), Flow(1, 0, 0, "copy", F(1)), Flow(1, 0, 1, "add", F(0)),
             Flow(0, 1, 1, "copy", F(1))]
    assert export_xml(Schedule(c, [F(100, 200), F(100, 200)], flows))[1]["D"] == 2   # lcm of reduced fractions
    big = Schedule(c, [F(150, 151), F(1, 151)], flows)
    text, facts = export_xml(big)
    assert facts["D"] == 151 and max(int(x) for x in re.findall(r'cnt="(\d+)"', text)) == 71
    assert verify_xml(text).proved


def test_what_msccl_cannot_express_is_refused():
    with pytest.raises(OptccError) as err:
        export_xml(verifier_cases.local_op_p2())
    assert err.value.field == "schedule.local_ops" and "scales" in err.value.message
    with pytest.raises(OptccError) as err:
        export_xml(verifier_cases.signed_p3())
    assert err.value.field == "schedule.flows[3].coef" and "-1" in err.value.message


def test_cli_export_writes_a_proved_file(tmp_path, capsys):
    sched, out = tmp_path / "s.json", tmp_path / "optcc.xml"
    build_schedule("optcc", Cluster.build(8, 1, {0: 2}), 1).save(str(sched))
    assert main(["msccl", "export", str(sched), "-o", str(out), "--proto", "LL"]) == 0
    text = out.read_text()
    assert 'proto="LL"' in text and 'nchunksperloop="7"' in text and "D = 7" in capsys.readouterr().out
    assert main(["msccl", "verify", str(out)]) == 0


def test_cli_export_refuses_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "x.xml"
    bad = tmp_path / "local.json"
    verifier_cases.local_op_p2().save(str(bad))
    assert main(["msccl", "export", str(bad), "-o", str(out)]) == 2
    assert "schedule.local_ops" in capsys.readouterr().err and not out.exists()
    good = build_schedule("ring", Cluster.build(4), 1)
    broken = Schedule(good.cluster, good.pieces, good.flows[1:], meta=good.meta)   # one flow dropped
    wrong = tmp_path / "wrong.json"
    broken.save(str(wrong))
    assert main(["msccl", "export", str(wrong), "-o", str(out)]) == 1
    assert "not proved" in capsys.readouterr().out and not out.exists()


def test_every_offset_mutant_of_an_export_is_refuted():
    text, facts = export_xml(build_schedule("optcc", Cluster.build(4, 1, {0: 2}), 1))
    lines = text.split("\n")
    steps = [i for i, line in enumerate(lines) if "<step " in line and 'type="nop"' not in line]
    assert len(steps) == facts["steps"] == 36
    for i in steps:
        off = int(re.search(r'srcoff="(\d+)"', lines[i]).group(1))
        new = (off + 1) % facts["D"]
        mutant = list(lines)
        mutant[i] = re.sub(r'(src|dst)off="\d+"', rf'\1off="{new}"', mutant[i])
        proof = verify_xml("\n".join(mutant))
        assert not proof.properties["sum"], lines[i]
        cx = proof.counterexamples["sum"]
        assert {"rank", "chunk", "tb", "step", "message"} <= set(cx)


def test_export_deps_count_the_nops_as_the_runtime_does():
    """With g = 2 and every conflict kept as a dependency the export orders thread blocks with
    nops; its deps are the runtime's step numbers. The same file numbered by real steps only
    (what optcc wrote before) races: a wait ends at an earlier step's flag."""
    import msccl_cases as mc
    schedule = build_schedule("optcc", Cluster.build(8, 2, {0: 2, 1: 2}), 1)
    text, _ = export_xml(schedule, reduce_deps=False)
    assert verify_xml(text).proved
    old = mc.renumber_without_nops(text)
    assert 'type="nop"' in text and old != text
    proof = verify_xml(old)
    assert not proof.properties["sum"] and proof.counterexamples["sum"]["kind"] == "race"
    reduced, facts = export_xml(schedule)                 # implied dependencies left out: no nops here
    assert reduced.count('type="nop"') == 0 < text.count('type="nop"') and verify_xml(reduced).proved


def test_implied_dependencies_are_left_out():
    schedule = build_schedule("optcc", Cluster.build(16, 1, {0: 2}), 4)
    full, full_facts = export_xml(schedule, reduce_deps=False)
    reduced, facts = export_xml(schedule)
    assert full.count('type="nop"') == 622 and reduced.count('type="nop"') == 0
    assert facts["steps"] == full_facts["steps"] - 622 == 3600
    assert verify_xml(reduced).proved and verify_xml(full).proved


def test_more_than_32_peers_are_spread_over_channels():
    """p = 34: the straggler has 33 peers, more than the 32 send peers one channel allows (the
    export was refuted by its own proof, exit 3, before)."""
    schedule = build_schedule("optcc", Cluster.build(34, 1, {0: 2}), 1)
    text, facts = export_xml(schedule)
    assert facts["channels"] >= 2
    proof = verify_xml(text)
    assert proof.proved, proof.counterexample


def test_what_a_gpu_cannot_hold_is_refused_before_building(tmp_path, capsys):
    sched, out = tmp_path / "s66.json", tmp_path / "x.xml"
    build_schedule("optcc", Cluster.build(66, 1, {0: 2}), 1).save(str(sched))
    assert main(["msccl", "export", str(sched), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "rank 0 exchanges data with 65 peers" in err and "p <= 65" in err
    assert not out.exists()
    with pytest.raises(OptccError) as e:          # p = 16, k = 80: more steps than the runtime's parser stores
        export_xml(build_schedule("optcc", Cluster.build(16, 1, {0: 2}), 80), max_steps=256)
    assert e.value.field == "schedule" and "MSCCL_MAX_NODES" in e.value.message


def test_large_exports_report_progress_on_stderr(tmp_path, capsys, monkeypatch):
    from optcc_app.commands import msccl as cmd
    sched, out = tmp_path / "s.json", tmp_path / "x.xml"
    build_schedule("optcc", Cluster.build(8, 2, {0: 2, 1: 2}), 1).save(str(sched))
    assert main(["msccl", "export", str(sched), "-o", str(out)]) == 0
    quiet = capsys.readouterr()
    assert quiet.err == ""                                     # small: silent
    monkeypatch.setattr(cmd, "LOUD_FLOWS", 0)
    assert main(["msccl", "export", str(sched), "-o", str(out)]) == 0
    loud = capsys.readouterr()
    stages = [line.split("] ", 1)[1] for line in loud.err.splitlines()]
    assert stages[0].startswith("proving the schedule") and stages[1].startswith("schedule proved")
    assert stages[2].startswith("layout 1:") and stages[-1].startswith("proving the XML")
    assert loud.out.splitlines()[0] == quiet.out.splitlines()[0]            # stdout as before (times aside)
