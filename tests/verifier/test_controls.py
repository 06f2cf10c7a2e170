"""Every obligation's false control (verifier.parametric.controls): the statement one step
stronger, which Z3 must refute with a counterexample. The obligations whose generic control is
not refuted are listed here by name, each for a stated reason; a statement that weakens (a
bound relaxed) leaves its control proved, which changes that list and fails the test."""
from __future__ import annotations

import functools

import pytest
import z3

from optcc.algorithms.families import Params
from verifier.parametric.controls import ANTECEDENT_FALLBACK, FALLBACK, check_controls, control
from verifier.parametric.prove import obligations


@functools.cache
def _obligations(algo):
    """One build per construction for this module (OptCC's takes seconds)."""
    return obligations(algo)[1]


def _small(P):
    """p ≤ 8, k ≤ 3: a counterexample inside is one of the control itself, and Z3 finds it fast."""
    return [P.p <= 8, P.k <= 3] if isinstance(P, Params) and isinstance(P.p, z3.ExprRef) and P.k is not None else []


# The ring's obligations whose generic control holds, and why the statement is still as strong as meant.
RING_NO_FALSE_CONTROL = {
    "slot k·2(p−1) is time 2(p−1)ℓ/p; slots and pieces positive, pieces add to 1":
        "a closed-form identity over the parameters alone",
    "ring.reduce_scatter: its slots are its piece's transfer time": "every ring flow has one duration, domain or not",
    "ring.all_gather: its slots are its piece's transfer time": "the same, all-gather",
    "ring.reduce_scatter: the src branch enumerates only flows at its rank": "true of every index the branch solves",
    "ring.all_gather: the src branch enumerates only flows at its rank": "the same, all-gather",
    "lex order on event keys is irreflexive": "a fact about tuples with no hypotheses",
}


def test_ring_every_control_refuted_but_the_listed_ones():
    res = check_controls(obligations("ring")[1], 20000, _small)
    assert res["controls"] == 62
    assert {f["obligation"] for f in res["not_refuted"]} == set(RING_NO_FALSE_CONTROL)
    assert all(f["status"] in ("proved", "no control") for f in res["not_refuted"])   # none undecided
    assert res["by_rule"] == {"strict": 37, "range": 19, "premise": 3, "antecedent": 1}


def test_a_relaxed_finish_bound_leaves_its_control_proved():
    """The all-gather's "ends by slot k·2(p−1)" is tight (its control, ends before, is refuted);
    the same statement relaxed by one slot is still true, and its control is proved: caught."""
    ob = next(o for o in obligations("ring")[1] if o.name == "ring.all_gather ends by slot k·2(p−1)")
    assert check_controls([ob], 20000, _small)["not_refuted"] == []
    end, limit = ob.goal.arg(0), ob.goal.arg(1)
    relaxed = type(ob)(ob.prop, ob.name, ob.assumptions, end <= limit + 1, ob.side, ob.params, ob.flows)
    assert control(relaxed)[0] == "strict"
    [f] = check_controls([relaxed], 20000, _small)["not_refuted"]
    assert f["status"] == "proved"


def test_the_reduce_scatters_finish_bound_is_its_own_tight_one():
    """"ring.reduce_scatter ends by slot k·2(p−1) − (p−1)": the last segment's last reduce-scatter
    hop at the straggler ends there, so its control (ends before) is refuted; the all-gather's
    bound k·2(p−1), which it used to share, holds for it with p − 1 slots to spare: its control is
    proved (a statement that loose is caught)."""
    ob = next(o for o in obligations("ring")[1] if o.name == "ring.reduce_scatter ends by slot k·2(p−1) − (p−1)")
    assert check_controls([ob], 20000, _small)["not_refuted"] == []
    end, limit = ob.goal.arg(0), ob.goal.arg(1)
    shared = type(ob)(ob.prop, ob.name, ob.assumptions, end <= limit + (ob.params.p - 1), ob.side, ob.params, ob.flows)
    [f] = check_controls([shared], 20000, _small)["not_refuted"]
    assert f["status"] == "proved"


def test_optccs_pipeline_families_end_by_their_own_tight_bounds():
    """Reduce-scatter hops, uploads, P2P uploads and all-gather hops end before the pipeline's L,
    each by its margin (verifier.parametric.optcc.PIPELINE_MARGINS): each bound is proved and its
    control (ends before) refuted; relaxed by one pipeline slot, its control is proved: caught.
    Before, all four claimed L, which only the downloads reach, and their controls held."""
    from verifier.parametric.optcc import PIPELINE_MARGINS
    obs = {o.name: o for o in _obligations("optcc") if "ends by pipeline slot L −" in o.name}
    assert sorted(n.split(" ends")[0] for n in obs) == sorted(PIPELINE_MARGINS)
    for ob in obs.values():
        assert check_controls([ob], 20000, _small)["not_refuted"] == [], ob.name
        end, limit = ob.goal.arg(0), ob.goal.arg(1)
        relaxed = type(ob)(ob.prop, ob.name, ob.assumptions, end <= limit + 1, ob.side, ob.params, ob.flows)
        [f] = check_controls([relaxed], 20000, _small)["not_refuted"]
        assert f["status"] == "proved", ob.name


def test_a_goal_replaced_by_true_leaves_its_control_proved():
    ob = next(o for o in obligations("ring")[1] if "step keeps the invariant" in o.name)
    assert check_controls([ob], 20000, _small)["not_refuted"] == []
    trivial = type(ob)(ob.prop, ob.name, ob.assumptions, z3.BoolVal(True), [], ob.params, ob.flows)
    assert check_controls([trivial], 20000, _small)["not_refuted"][0]["status"] == "proved"


# OptCC's obligations whose generic control holds, and why (the servers' q ≥ 3 instance has the
# same, under its "q ≥ 3 OptCC (p = q): <property>: " prefix).
OPTCC_NO_FALSE_CONTROL = {
    "phase origins: prologue, pipeline, epilogue back to back; end = closed form":
        "equalities of closed forms: no one-step-stronger twin",
    **{f"optcc.{f}: its slots are its piece's transfer time": "one duration for every flow of the family, domain or not"
       for f in ("upload", "download", "p2p_upload", "p2p_download")},
    "closed form ≥ max(ℓ, 2ℓ(p−1)/(ℓ(p−1)+1)) (Theorem 1)":
        "approached as k grows, never attained: the near-optimality statements carry its controls",
    **{f"optcc.{f}: the {end} branch enumerates only flows at its rank": "true as built: the branch solves the index from the rank"
       for f, end in (("prologue_rs", "src"), ("upload", "src"), ("download", "dst"), ("p2p_upload", "src"),
                      ("p2p_download", "dst"), ("epilogue_ag", "src"))},
    "lex order on event keys is irreflexive": "a fact about tuples with no hypotheses",
}
_INSTANCE = {"phase origins": "finish", "closed form": "bound", "its slots": "duration"}
SERVERS_NO_FALSE_CONTROL = {
    **{f"q ≥ 3 OptCC (p = q): {next(prop for key, prop in _INSTANCE.items() if name.startswith(key) or key in name)}: "
       f"{name}": why for name, why in OPTCC_NO_FALSE_CONTROL.items() if any(key in name for key in _INSTANCE)},
    "servers: q = 2: first touches and releases increase with the segment (RS and AG run in segment order); "
    "a segment's global exchange lasts N = ℓ/(g·k), its batch c > 0": "closed forms over the parameters alone",
    "servers: q = 2: RS batch 0 starts at 0 and batch i + 1 where batch i ends (rs_start)": "closed-form equalities",
    "servers: q = 2: the lead D is the least: need(0) = D or need(k − 1) = D": "a disjunction of equalities",
    "servers: q = 2: AG batch 0 starts at max(release, end of the RS block) (ag_start)": "a closed-form equality",
    "servers: q = 2: the last AG batch's last round ends at the finish T": "a closed-form equality",
    "servers: q = 1: RS at 0, AG after it; the AG batch ends at the finish T, after the RS batch":
        "its bounds (b ≤ T, b > 0) have slack beside the equality st + b = T",
}


@pytest.mark.parametrize("algo, listed, refuted, fallback, antecedent, total", [
    ("optcc", OPTCC_NO_FALSE_CONTROL, 219, 0, 2, 232), ("servers", SERVERS_NO_FALSE_CONTROL, 276, 0, 3, 288)])
def test_every_control_refuted_but_the_listed_ones(algo, listed, refuted, fallback, antecedent, total):
    """OptCC: 219 of its 232 obligations have a refuted control, none through the premise
    fallback (every pair that never meets back to back states its least gap) and 2 through the
    antecedent control (the algebra lemma, piece sizes positive where their regime holds); servers
    276 of 288, 0 and 3
    so. The rest are listed above, each with its reason: a statement that weakens changes the
    list, and one that joins it must be given a reason here (docs/parametric.md "Controls")."""
    res = check_controls(_obligations(algo), 20000, _small)
    assert res["controls"] == total
    assert {f["obligation"] for f in res["not_refuted"]} == set(listed)
    assert total - len(res["not_refuted"]) == refuted and res["by_rule"].get(FALLBACK, 0) == fallback
    assert res["by_rule"].get("antecedent", 0) + res["by_rule"].get(ANTECEDENT_FALLBACK, 0) == antecedent
    assert all(f["status"] in ("proved", "no control") for f in res["not_refuted"])


def _phases(ob):
    from verifier.parametric.arith import Z3Arith
    return [fam.terms(Z3Arith(), ob.params, *idx).phase for fam, idx in ob.flows]


@pytest.mark.parametrize("algo", ["optcc", "servers"])     # the ring runs in one phase
def test_no_pair_obligation_relates_two_phases(algo):
    """A pair of flows in two phases (a prologue hop and a pipeline upload) got an obligation whose
    goal was True as built (the phase comparison folds), so it could not fail and held one step
    stronger too. No such pair is an obligation now: what orders them is each family's finish
    bound in its phase, box ≥ 0 and the phase origins (the next test). A chain's "order: A before a
    later B" with B's phase first stays: its goal is False as built and it holds because no flow
    of B comes later on the chain, a real statement (docs/parametric.md "Vacuous premises")."""
    pairs = [o for o in _obligations(algo) if o.flows and len(o.flows) == 2]
    across = [o for o in pairs if all(isinstance(ph, int) for ph in _phases(o)) and len(set(_phases(o))) == 2]
    assert len(pairs) > 50 and across
    assert [o.name for o in across if z3.is_true(z3.simplify(o.goal))] == []
    assert all(" before a later " in o.name and z3.is_false(z3.simplify(o.goal)) for o in across)


def test_a_prologue_flow_moved_into_the_pipeline_is_refuted_by_its_finish_bound():
    """Cross-phase order rests on the finish bounds: the prologue's hops one slot later (the last
    ends in the pipeline's first slot) are refuted by "ends by prologue slot H−1"."""
    import dataclasses
    from optcc.algorithms.single import families as F
    from verifier.parametric import prove_all

    def later(A, P, t, i):
        return F._pro(A, P, t, i)._replace(box=t + 1)
    fams = tuple(dataclasses.replace(f, terms=later) if f is F.PRO else f for f in F.FAMILIES)
    res = prove_all("optcc", families=fams)
    refuted = {r["obligation"] for r in res["failures"] if r["status"] == "refuted"}
    assert "optcc.prologue_rs ends by prologue slot H−1" in refuted


@pytest.mark.parametrize("algo, name", [
    ("optcc", "optcc.rs_hop vs optcc.ag_hop: read during a write, 4 slots apart"),
    ("optcc", "optcc.ag_hop vs optcc.rs_hop: read during a write, 6 slots apart"),
    ("optcc", "optcc.rs_hop vs optcc.ag_hop: two writes at once, 8 slots apart"),
    ("optcc", "optcc.ag_hop vs optcc.rs_hop: two writes at once, 8 slots apart"),
    ("optcc", "optcc.rs_hop vs optcc.rs_hop: one send port, 1 slot apart"),
    ("optcc", "optcc.p2p_download vs optcc.p2p_upload: read during a write, 4 slots apart"),
    ("optcc", "optcc.download vs optcc.download: one receive port, 2 slots apart"),
    ("ring", "ring.reduce_scatter vs ring.all_gather: two writes at once, p − 1 slots apart"),
    ("ring", "ring.all_gather vs ring.reduce_scatter: two writes at once, p − 1 slots apart")])
def test_a_pair_never_back_to_back_is_stated_with_its_least_gap(algo, name):
    """A pair that never meets back to back (a reduce-scatter hop and an all-gather hop on one
    value; two hops on one port) is stated with its least gap (proved), so its own control, one
    slot more, is refuted; stated with one slot less its control is proved (only the premise
    fallback would guard it, as it did when the pair was stated at gap 0): caught."""
    from verifier.parametric.obligations import discharge
    ob = next(o for o in _obligations(algo) if o.name == name)
    assert discharge(ob, 20000)["status"] == "proved"
    res = check_controls([ob], 20000, _small)
    assert res["not_refuted"] == [] and res["by_rule"] == {"strict": 1}
    phase_differs, a, b = ob.goal.children()       # Or(phase ≠, end1 + gap ≤ box2, end2 + gap ≤ box1)
    looser = z3.Or(phase_differs, a.arg(0) - 1 <= a.arg(1), b.arg(0) - 1 <= b.arg(1))
    loose = type(ob)(ob.prop, ob.name, ob.assumptions, looser, ob.side, ob.params, ob.flows, list(ob.premise))
    assert discharge(loose, 20000)["status"] == "proved"
    rule, c = control(loose)
    c.assumptions = c.assumptions + _small(ob.params)
    assert rule == "strict" and discharge(c, 20000)["status"] == "proved"


def _order_looser_by_one(ob):
    """The chain order's goal Or(phase <, And(phase =, end1 + gap ≤ box2)) with one slot less."""
    lt, same = ob.goal.children()
    eq, le = same.children()
    goal = z3.Or(lt, z3.And(eq, le.arg(0) - 1 <= le.arg(1)))
    return type(ob)(ob.prop, ob.name, ob.assumptions, goal, ob.side, ob.params, ob.flows, list(ob.premise))


def test_a_pair_never_back_to_back_is_guarded_by_its_premise_control():
    """Chain order stated at gap 0 for two reduce-scatter hops of a piece (never back to back: as
    it was stated before its gap): its strict control is proved, so the premise control guards it
    (without j1 < j2 the order fails: refuted); the goal replaced by True leaves both proved: caught."""
    stated = next(o for o in _obligations("optcc")
                  if o.name == "optcc shard piece (σ, c): order: optcc.rs_hop before a later optcc.rs_hop, 1 slot apart")
    ob = _order_looser_by_one(stated)
    assert control(ob)[0] == "strict"
    res = check_controls([ob], 20000, _small)
    assert res["not_refuted"] == [] and res["by_rule"] == {"strict": 1, FALLBACK: 1}
    trivial = type(ob)(ob.prop, ob.name, ob.assumptions, z3.BoolVal(True), [], ob.params, ob.flows, list(ob.premise))
    [f] = check_controls([trivial], 20000, _small)["not_refuted"]
    assert f["status"] == "proved"


@pytest.mark.parametrize("pair, gap", [("rs_hop before a later optcc.rs_hop", 1), ("rs_hop before a later optcc.ag_hop", 4),
                                       ("upload before a later optcc.ag_hop", 2)])
def test_chain_order_is_stated_with_its_least_gap(pair, gap):
    """Chain flows j1 < j2 of a piece that never meet back to back (verifier.parametric.optcc.ORDER_GAPS):
    the order with its least gap is proved and its own control, one slot more, refuted; one slot
    less leaves the strict control proved: caught."""
    from verifier.parametric.obligations import discharge
    name = f"optcc shard piece (σ, c): order: optcc.{pair}, {gap} slot{'' if gap == 1 else 's'} apart"
    ob = next(o for o in _obligations("optcc") if o.name == name)
    assert discharge(ob, 20000)["status"] == "proved"
    assert check_controls([ob], 20000, _small)["by_rule"] == {"strict": 1}
    loose = _order_looser_by_one(ob)
    rule, c = control(loose)
    c.assumptions = c.assumptions + _small(ob.params)
    assert rule == "strict" and discharge(c, 20000)["status"] == "proved"


def test_a_lemma_whose_conclusion_no_longer_needs_its_case_leaves_its_control_proved():
    """The algebra lemma "a = 0 ⇒ a·b = 0; …" has no inequality, premise or domain: its control
    drops the antecedents ("a·b = 0" for every a, refuted). A case whose conclusion became true
    on its own (a = 0 ⇒ a·b = a·b) leaves that control proved: caught."""
    ob = next(o for o in obligations("ring")[1] if o.name == "a = 0 ⇒ a·b = 0; a = 1 ⇒ a·b = b")
    res = check_controls([ob], 20000, _small)
    assert res["not_refuted"] == [] and res["by_rule"] == {"antecedent": 1}
    case = ob.goal.arg(0)
    ab = case.arg(1).arg(0)
    trivial = type(ob)(ob.prop, ob.name, ob.assumptions, z3.Implies(case.arg(0), ab == ab), [], ob.params, ob.flows)
    [f] = check_controls([trivial], 20000, _small)["not_refuted"]
    assert f["rule"] == "antecedent" and f["status"] == "proved"


@pytest.mark.parametrize("family, margin", [("upload", "1"), ("download", "2"), ("ag_hop", "5"), ("p2p_download", "2p")])
def test_servers_first_touch_is_stated_with_each_familys_least_margin(family, margin):
    """servers' q ≥ 3 instance: a later family leaves a node with a piece some slots after the
    piece's first touch there (verifier.parametric.servers.FIRST_TOUCH_MARGINS): stated with that
    margin the bound is tight (its control refuted); stated at ft, as it was, its control is proved."""
    from verifier.parametric.obligations import discharge
    name = f"servers: q ≥ 3: no optcc.{family} flow at its src starts before ft + {margin} (in ft's phase)"
    ob = next(o for o in _obligations("servers") if o.name == name)
    assert discharge(ob, 20000)["status"] == "proved"
    assert check_controls([ob], 20000, _small)["by_rule"] == {"strict": 1}
    later, same = ob.goal.children()                      # Or(phase > ft's, And(phase = ft's, slot ≥ ft + margin))
    eq, ge = same.children()
    at_ft = z3.Or(later, z3.And(eq, ge.arg(0) >= ge.arg(1) - _margin(ob, margin)))
    loose = type(ob)(ob.prop, ob.name, ob.assumptions, at_ft, ob.side, ob.params, ob.flows)
    assert discharge(loose, 20000)["status"] == "proved"
    rule, c = control(loose)
    c.assumptions = c.assumptions + _small(ob.params)
    assert rule == "strict" and discharge(c, 20000)["status"] == "proved"


def _margin(ob, text):
    return 2 * ob.params.p if text == "2p" else int(text)
