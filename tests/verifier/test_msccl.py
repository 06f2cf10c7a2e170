"""optcc msccl verify: fixtures written from the spec, mutants, malformed files, real files."""
import json
import re
import time
import math
from pathlib import Path

import msccl_cases as mc
import pytest

from optcc_app.cli import main
from optcc.errors import OptccError
from verifier.msccl import load_program, verify_xml
from verifier.msccl.parse import c_strtol

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "msccl-xml"
ALL_PROVED = {"sum": True, "deadlock_free": True, "limits": True, "deterministic": True}


@pytest.mark.parametrize("name,text", [("ring3", mc.ring(3)), ("ring4", mc.ring(4)), ("ring8", mc.ring(8)),
                                       ("ring2", mc.ring(2)), ("tree", mc.tree()),
                                       ("hierarchical", mc.hierarchical())])
def test_correct_fixtures_are_proved(name, text):
    proof = verify_xml(text)
    assert proof.properties == ALL_PROVED, proof.counterexamples
    assert proof.counterexample is None and proof.proved
    assert proof.facts["z3_queries"] >= 1


def test_fixtures_use_the_step_types_they_claim():
    assert {"s", "rrs", "rrcs", "rcs", "r"} <= set(_types(mc.ring(4)))
    assert {"rrc", "rrs", "rcs"} <= set(_types(mc.tree()))
    assert {"re", "nop", "rrc"} <= set(_types(mc.hierarchical()))
    assert _types(mc.one_shot()).count("re") == 4 * 3


def _types(text):
    return [line.split('type="')[1].split('"')[0] for line in text.splitlines() if "<step " in line]


def test_one_shot_is_refuted_on_deterministic_only():
    proof = verify_xml(mc.one_shot(4))
    assert proof.properties == {**ALL_PROVED, "deterministic": False}
    cx = proof.counterexample
    assert cx["property"] == "deterministic" and cx["chunk"] == 0
    assert cx["other_rank"] == 0 and cx["rank"] == 2          # ranks 0 and 1 agree up to commuting
    assert cx["tb"] == 3 and cx["step"] == 4                  # rank 2's last `re`
    assert cx["trees"]["0"] != cx["trees"]["2"]
    assert "(x0[0] + x1[0])" in cx["trees"]["0"] and "(x0[0] + x2[0])" in cx["trees"]["2"]


def test_textbook_ring_needs_two_messages_of_buffer():
    proof = verify_xml(mc.ring_one_channel(4))
    assert proof.properties == {**ALL_PROVED, "deadlock_free": False}
    cx = proof.counterexample
    assert cx["buffers"] == "one-message buffers" and len(cx["blocked"]) == 4
    assert (cx["rank"], cx["tb"], cx["step"], cx["chunk"]) == (0, 0, 1, 3)
    assert "slot is full" in cx["message"]


def test_eager_pair_deadlocks_only_with_one_message_buffers():
    proof = verify_xml(mc.eager_pair())
    assert proof.properties == {**ALL_PROVED, "deadlock_free": False}
    assert proof.counterexample["buffers"] == "one-message buffers"


# ---- mutants ----------------------------------------------------------------------------------
def test_mutant_offset_changed_is_refuted():
    text = mc.set_attr(mc.ring(4), 1, 0, 0, srcoff=2, dstoff=2)     # rank 1 adds chunk 2 into chunk 0's ring
    proof = verify_xml(text)
    assert not proof.properties["sum"]
    cx = proof.counterexamples["sum"]
    assert (cx["rank"], cx["tb"], cx["step"]) == (1, 2, 0) and cx["chunk"] == 2
    assert cx["first"]["tb"] == 0 and cx["first"]["step"] == 0


def test_mutant_dependency_dropped_is_refuted_as_a_race():
    text = mc.set_attr(mc.tree(), 0, 1, 0, depid=-1, deps=-1)       # root's two rrc into i no longer ordered
    proof = verify_xml(text)
    cx = proof.counterexamples["sum"]
    assert cx["kind"] == "race" and cx["rank"] == 0 and cx["chunk"] == 0
    assert {cx["first"]["tb"], cx["second"]["tb"]} == {0, 1}
    assert proof.properties["deadlock_free"]


def test_mutant_two_sends_swapped_is_refuted():
    text = mc.swap_steps(mc.hierarchical(), 0, 0, 0, 3)              # rank 0 sends its chunks in the wrong order
    proof = verify_xml(text)
    assert not proof.properties["sum"]
    cx = proof.counterexamples["sum"]
    assert cx["rank"] == 1 and cx["chunk"] in (0, 1) and cx["tb"] is not None and cx["step"] is not None


def test_mutant_missing_hasdep_deadlocks_and_says_why():
    text = mc.set_attr(mc.tree(), 0, 1, 0, hasdep=0)
    proof = verify_xml(text)
    assert not proof.properties["deadlock_free"]
    cx = proof.counterexamples["deadlock_free"]
    assert cx["buffers"] == "unbounded buffers" and (cx["rank"], cx["tb"], cx["step"], cx["chunk"]) == (0, 0, 1, 0)
    assert 'does not have hasdep="1"' in cx["message"]


def test_unreceived_message_and_count_mismatch_are_refuted():
    proof = verify_xml(mc.delete_step(mc.ring(4), 2, 0, 1))         # rank 2 no longer receives chunk 0's result
    cx = proof.counterexamples["deadlock_free"]
    assert cx["unreceived"][0]["to_rank"] == 2 and (cx["rank"], cx["tb"], cx["step"]) == (1, 0, 1)
    assert proof.counterexamples["sum"]["rank"] == 2 and proof.counterexamples["sum"]["missing_ranks"] == [0, 1, 3]
    proof = verify_xml(mc.set_attr(mc.ring(4), 1, 0, 0, cnt=2))
    assert proof.counterexamples["deadlock_free"]["sent"] == 1 and proof.counterexamples["deadlock_free"]["cnt"] == 2


def test_step_limit_is_selectable():
    text = mc.ring_one_channel(33)                                   # 2·33 − 1 = 65 steps per thread block
    assert not verify_xml(text, 64).properties["limits"]
    assert "Max number of steps: 64, requested: 65" in verify_xml(text, 64).counterexamples["limits"]["message"]
    assert verify_xml(text, 256).properties["limits"]


# ---- malformed files: exit 2, naming the line and the field -----------------------------------
RING = mc.ring(3)


@pytest.mark.parametrize("text,line,field,wording", [
    ("hello world\n", 1, "", "XML Parse error : expecting '<', got 'h'"),
    ('<?xml version="1.0"?>\n' + RING, 1, "", "XML Parse : expected >, got '?'"),
    (RING.replace(' ngpus="3"', '\n ngpus="3"'), 1, "", "XML Parse : expected >, got '\\n'"),
    (RING.replace('cnt="1" depid="-1"', 'cnt=1 depid="-1"', 1), 4, "", "XML Parse : Expected (double) quote."),
    (RING.replace(' cnt="1"', "", 1), 4, "<step> cnt", "Attribute cnt of node step not found"),
    (RING.replace('srcoff="1" dstbuf="i" dstoff="1"', 'srcoff="01" dstbuf="i" dstoff="1"', 1), None, "<step> srcoff",
     "zero-padded integer '01'"),
    (RING.replace('nchunksperloop="3"', 'nchunksperloop="010"'), 1, "<algo> nchunksperloop", "as 8"),
    (RING.replace('srcoff="1" dstbuf="i" dstoff="1"', 'srcoff="3" dstbuf="i" dstoff="3"', 1), None,
     "<step> srcoff", "offset out of range"),
    (RING.replace('type="rrs"', 'type="rrx"', 1), None, "<step> type", "MSCCL: type of transfer is not supported: rrx"),
    (RING.replace("</algo>\n", ""), 1, "", "XML Parse : unterminated algo"),
    (RING.replace('<tb id="1"', '<tb id="5"', 1), 2, "<gpu>", "MSCCL: thread block 1 is missing"),
    (RING.replace('proto="Simple"', 'proto="LL64"'), 1, "<algo> proto", "MSCCL: protocol LL64 is not supported."),
])
def test_malformed_files_name_line_and_field(text, line, field, wording, tmp_path, capsys):
    with pytest.raises(OptccError) as err:
        verify_xml(text)
    assert wording in err.value.message
    if line is not None:
        assert err.value.field.startswith(f"line {line}"), err.value.field
    assert err.value.field.endswith(field)
    path = tmp_path / "bad.xml"
    path.write_text(text)
    assert main(["msccl", "verify", str(path)]) == 2
    out = capsys.readouterr()
    assert out.out == "" and out.err.count("\n") == 1
    assert out.err.startswith(f"optcc: error: {path} line ") and wording in out.err


def test_tokenizer_details_match_the_runtime():
    assert (c_strtol("010"), c_strtol("09"), c_strtol("0x1f"), c_strtol("-1"), c_strtol("abc")) == (8, 0, 31, -1, 0)
    commented = "<!-- a comment -->\n<!--x-->" + RING
    assert verify_xml(commented).proved
    with pytest.raises(OptccError, match="expecting '<', got '\t'"):
        verify_xml("\t" + RING)
    # a second space makes an empty attribute, which the runtime accepts
    assert verify_xml(RING.replace(' proto="Simple"', '  proto="Simple"')).proved
    # attributes past the 16th are dropped, so a required one there is missing
    extra = " ".join(f'x{i}="0"' for i in range(10))
    with pytest.raises(OptccError, match="dropped"):
        verify_xml(RING.replace('<step s="0" type="s"', f'<step {extra} s="0" type="s"', 1))


# ---- CLI ----------------------------------------------------------------------------------------
def test_cli_verify_exit_codes_and_json(tmp_path, capsys):
    good, bad = tmp_path / "ring.xml", tmp_path / "oneshot.xml"
    good.write_text(mc.ring(4))
    bad.write_text(mc.one_shot(4))
    assert main(["msccl", "verify", str(good)]) == 0
    assert "PROVED" in capsys.readouterr().out
    assert main(["msccl", "verify", str(bad), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["proved"] is False
    assert out["properties"] == {"sum": "proved", "deadlock_free": "proved", "limits": "proved",
                                 "deterministic": "refuted"}
    assert out["counterexample"]["property"] == "deterministic" and math.isfinite(out["seconds"])
    assert main(["msccl", "verify", str(good), "--max-steps", "256", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["facts"]["max_steps"] == 256


# ---- the real files in ../shared/msccl-xml -------------------------------------------------------
REAL = {
    "msccl-scheduler_ncv4_ar_tree_12_LL.xml": ALL_PROVED,
    "msccl-scheduler_ncv4_ar_hier_12_Simple.xml": ALL_PROVED,
    "msccl-scheduler_ndv4_r48ll.xml": ALL_PROVED,
    "rccl_allreduce-1step-4n-ll-1pass.xml": {**ALL_PROVED, "deterministic": False},
}


@pytest.mark.parametrize("name", sorted(REAL))
def test_real_files(name):
    path = SHARED / name
    if not path.exists():
        pytest.skip(f"{path} is absent (the shared real MSCCL files sit beside the checkout)")
    proof = verify_xml(path.read_text())
    assert proof.properties == REAL[name], proof.counterexamples
    if name.startswith("rccl_"):
        # withdrawn upstream: "MSCCL 1-shot xmls may cause different output values on different ranks"
        cx = proof.counterexample
        assert cx["property"] == "deterministic" and cx["rank"] != cx["other_rank"]


def test_two_thread_blocks_on_one_connection_are_refuted():
    text = mc.ring(4).replace('<tb id="1" send="1" recv="3" chan="1">', '<tb id="1" send="1" recv="3" chan="0">', 1)
    proof = verify_xml(text)
    assert not proof.properties["limits"]
    v = proof.counterexamples["limits"]["violations"][0]
    assert (v["rank"], v["tb"], v["channel"]) == (0, 1, 0) and "one connection per (peer, channel)" in v["message"]


def test_wait_on_a_step_without_hasdep_is_refuted_even_when_a_later_step_publishes():
    x = mc.Xml("reduce-bcast2", 2, 2, nchannels=2)
    x.gpu(0).tb(send=1, recv=1, chan=0).step("rrc", ("i", 0)).step("rrc", ("i", 1))
    x.tb(send=1, recv=1, chan=1).step("s", ("i", 0), dep=(0, 0)).step("s", ("i", 1), dep=(0, 1))
    x.gpu(1).tb(send=0, recv=0, chan=0).step("s", ("i", 0)).step("s", ("i", 1))
    x.tb(send=0, recv=0, chan=1).step("r", ("i", 0)).step("r", ("i", 1))
    text = x.text()
    assert verify_xml(text).proved
    mutant = mc.set_attr(text, 0, 0, 0, hasdep=0)       # step 1 still publishes, so nothing deadlocks
    proof = verify_xml(mutant)
    assert proof.properties == {**ALL_PROVED, "deadlock_free": False}
    cx = proof.counterexample
    assert cx["kind"] == "unpublished_wait" and (cx["rank"], cx["tb"], cx["step"]) == (0, 1, 0)
    assert cx["target"] == {"tb": 0, "step": 0, "line": 4}


def test_out_of_place_results_go_to_the_output_buffer():
    assert verify_xml(mc.ring(4, out_of_place=True)).proved
    both = mc.ring(4, out_of_place=True).replace('inplace="0"', 'inplace="1"')   # claims in-place too
    proof = verify_xml(both)
    assert proof.facts["modes"] == ["in-place", "out-of-place"]
    assert verify_xml(both).proved                  # in place, o aliases i: the same program is right
    wrong = mc.ring(4).replace('inplace="1" outofplace="0"', 'inplace="0" outofplace="1"')
    wrong = wrong.replace('o_chunks="0"', 'o_chunks="4"')
    cx = verify_xml(wrong).counterexamples["sum"]
    assert cx["mode"] == "out-of-place" and cx["rank"] == 0 and cx["chunk"] == 0
    assert "undefined" in cx["message"] and cx["tb"] is None          # nothing writes o[0] on rank 0


# ---- step numbers as the runtime counts them (nops with a dependency count) ---------------------
def test_a_file_numbered_as_msccl_tools_does_is_proved():
    """deps counts the nop before the target (msccl-tools' op index, the runtime's counter); the
    old count of real steps only read deps="2" as a third real step and refuted it."""
    text = mc.numbered_by_nops()
    assert 'type="nop"' in text and 'depid="1" deps="2"' in text
    proof = verify_xml(text)
    assert proof.properties == ALL_PROVED, proof.counterexamples


def test_a_wait_numbered_without_nops_ends_early_and_races():
    """The same file with deps counting real steps only: on the runtime, tb 0's wait for step 1
    of tb 1 ends when A (number 1) publishes, before T adds into i[0]: rank 1 may get x0 alone."""
    text = mc.renumber_without_nops(mc.numbered_by_nops())
    assert 'depid="1" deps="1"' in text and 'depid="1" deps="0"' in text
    proof = verify_xml(text)
    assert not proof.properties["sum"] and not proof.proved
    cx = proof.counterexamples["sum"]
    assert cx["kind"] == "race" and (cx["rank"], cx["chunk"]) == (0, 0)
    assert (cx["first"]["tb"], cx["first"]["step"]) == (1, 2) and (cx["second"]["tb"], cx["second"]["step"]) == (0, 1)
    cx = proof.counterexamples["deadlock_free"]          # tb 2 waits on number 0: the nop, which never publishes
    assert cx["kind"] == "unpublished_wait" and cx["target"] == {"tb": 1, "step": 0, "line": None}


def test_nops_without_a_dependency_do_not_count():
    text = mc.numbered_by_nops()
    nop = ('      <step s="0" type="nop" srcbuf="i" srcoff="-1" dstbuf="o" dstoff="-1" cnt="0" depid="-1" deps="-1" '
           'hasdep="0"/>')
    lines = text.split("\n")
    at = next(i for i, line in enumerate(lines) if '<tb id="1"' in line) + 1
    lines.insert(at, nop)                       # a dependency-free nop first: numbers of tb 1 do not move
    for i in range(at + 1, at + 4):
        lines[i] = re.sub(r' s="(\d+)"', lambda m: f' s="{int(m.group(1)) + 1}"', lines[i])
    assert verify_xml("\n".join(lines)).proved


def test_fused_reductions_run_as_one_transmission():
    """A nop with a dependency between two fusable `re`s: the loader fuses the `re`s into one
    transmission and moves the nop's dependency on to the next one (there is none), so the
    second `re` reads s[1] without waiting for its receive. Counting the nop onto the second
    `re` (one step at a time) would order them."""
    x = mc.Xml("fused2", 2, 1)
    x.gpu(0, s_chunks=2).tb(recv=1).step("r", ("i", 0), ("s", 0)).step("r", ("i", 0), ("s", 1))
    x.tb().step("re", ("s", 0), ("i", 0), dep=(0, 0)).step("re", ("s", 1), ("i", 0))
    x.gpu(1).tb(send=0).step("s", ("i", 0)).step("s", ("i", 0))
    lines = mc.set_attr(x.text(), 0, 0, 1, hasdep=1).split("\n")
    at = next(i for i, line in enumerate(lines) if 'type="re"' in line and 'srcoff="1"' in line)
    lines.insert(at, '      <step s="1" type="nop" srcbuf="i" srcoff="-1" dstbuf="o" dstoff="-1" cnt="0" depid="0" '
                     'deps="1" hasdep="0"/>')
    lines[at + 1] = lines[at + 1].replace(' s="1"', ' s="2"')
    proof = verify_xml("\n".join(lines))
    cx = proof.counterexamples["sum"]
    assert cx["kind"] == "race" and (cx["rank"], cx["buffer"], cx["chunk"]) == (0, "s", 1)
    assert (cx["second"]["tb"], cx["second"]["step"]) == (1, 2)


def test_fused_reductions_with_different_cnt_are_refused():
    x = mc.Xml("fusedcnt", 1, 2)
    x.gpu(0, s_chunks=2).tb().step("re", ("s", 0), ("i", 0), cnt=2).step("re", ("s", 0), ("i", 0), cnt=1)
    with pytest.raises(OptccError) as err:
        verify_xml(x.text())
    assert err.value.field == "line 5 <step> cnt" and "last step's cnt" in err.value.message


# ---- hostile files: bounded before anything grows, exit 2 naming the attribute and line --------
HOSTILE = [
    ('nchunksperloop="3"', 'nchunksperloop="1000000000"', "line 1 <algo> nchunksperloop", "more than 65536"),
    ('nchannels="3"', 'nchannels="1000000000"', "line 1 <algo> nchannels", "MAXCHANNELS"),
    ('s_chunks="0"', 's_chunks="1000000000"', "line 2 <gpu> s_chunks", "more than 65536"),
    ('cnt="1" depid="-1"', 'cnt="1000000000" depid="-1"', "line 4 <step> cnt", "less than 72"),
    ('srcoff="0"', 'srcoff="' + "9" * 5000 + '"', "line 4 <step> srcoff", "overflow"),
    ('srcoff="0"', 'srcoff="99999999999"', "line 4 <step> srcoff", "outside a C int"),
    ('ngpus="3"', 'ngpus="-3"', "line 1 <algo> ngpus", "positive"),
]


@pytest.mark.parametrize("old,new,field,wording", HOSTILE)
def test_hostile_sizes_exit_2_within_a_second(old, new, field, wording, tmp_path, capsys):
    text = RING.replace(old, new, 1)
    assert text != RING
    path = tmp_path / "hostile.xml"
    path.write_text(text)
    t = time.perf_counter()
    assert main(["msccl", "verify", str(path)]) == 2
    assert time.perf_counter() - t < 1.0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{path} {field}:" in err and wording in err, err


def test_cells_of_all_ranks_are_bounded_together():
    for p, d in ((64, 40000), (1024, 200)):            # too many cells; cells of too many terms
        x = mc.Xml("wide", p, d)
        for r in range(p):
            x.gpu(r)
        t = time.perf_counter()
        with pytest.raises(OptccError) as err:
            load_program(x.text())
        assert err.value.field == "line 1 <algo> nchunksperloop" and f"{p} x {d}" in err.value.message
        assert time.perf_counter() - t < 1.0


def test_deep_nesting_and_many_comments_are_read_without_recursion():
    deep = "<x>" * 5000 + "</x>" * 5000          # 5x Python's recursion limit
    text = RING.replace("</algo>", deep + "\n</algo>")
    text = "<!-- c -->" * 5000 + "\n" + text
    t = time.perf_counter()
    assert verify_xml(text).proved
    with pytest.raises(OptccError, match="XML Mismatch : x / algo"):
        verify_xml(RING.replace("</algo>", "<x>" * 5000 + "\n</algo>"))
    assert time.perf_counter() - t < 10.0


def test_deep_summation_trees_and_unreachable_waits_do_not_crash():
    x = mc.Xml("deep", 1, 1)
    x.gpu(0, s_chunks=1).tb()
    for _ in range(1000):
        x.step("re", ("s", 0), ("i", 0))       # i[0] += undefined s[0], a thousand times: a 1000-deep tree
    proof = verify_xml(x.text(), 256)
    assert not proof.properties["sum"] and not proof.properties["limits"]
    far = mc.set_attr(mc.tree(), 0, 1, 0, deps=2147483647)
    t = time.perf_counter()
    proof = verify_xml(far)
    assert not proof.properties["deadlock_free"] and time.perf_counter() - t < 1.0


def test_the_fast_element_pattern_reads_what_the_runtime_loop_reads(monkeypatch):
    from verifier.msccl import parse

    def tree(node):
        return (node.name, node.line, sorted(node.attrs.items()), node.dropped, [tree(c) for c in node.children])

    texts = [mc.ring(4), mc.hierarchical(), mc.one_shot(4), mc.numbered_by_nops(),
             RING.replace(' proto="Simple"', ' proto="Simple" proto="LL"'),            # first one wins
             RING.replace('<step s="0" type="s"', " ".join(f'<step x{i}="0"' for i in range(1)) + ' s="0" type="s"', 1)]
    fast = [tree(parse.parse_xml(t)) for t in texts]
    monkeypatch.setattr(parse, "_ELEMENT", re.compile(r"(?!)"))
    assert [tree(parse.parse_xml(t)) for t in texts] == fast


def test_non_ascii_digits_are_not_integers():
    with pytest.raises(OptccError) as err:                 # int("٣") is 3 in Python; strtol reads 0
        verify_xml(RING.replace('nchunksperloop="3"', 'nchunksperloop="٣"'))
    assert err.value.field == "line 1 <algo> nchunksperloop" and "as 0" in err.value.message
