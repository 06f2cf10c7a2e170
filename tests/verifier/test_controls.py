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
    "ring.reduce_scatter vs ring.all_gather: two writes at once": "the two never write one value back to back",
    "ring.all_gather vs ring.reduce_scatter: two writes at once": "the same pair, the other order",
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


@pytest.mark.parametrize("algo, refuted, fallback, antecedent, total",
                         [("optcc", 215, 20, 2, 303), ("servers", 267, 20, 3, 359)])
def test_controls_refuted_count(algo, refuted, fallback, antecedent, total):
    """OptCC: 215 of its 303 obligations have a refuted control, 20 of them through the premise
    fallback (port, causality and order pairs never back to back) and 2 through the antecedent
    control (the algebra lemma, piece sizes positive where their regime holds); servers 267 of
    359, 20 and 3 so; the rest hold one step stronger too (pairs in different phases, never back
    to back; docs/parametric.md "Controls"): a count that moves is a statement that changed strength."""
    res = check_controls(_obligations(algo), 20000, _small)
    assert res["controls"] == total
    assert total - len(res["not_refuted"]) == refuted and res["by_rule"].get(FALLBACK) == fallback
    assert res["by_rule"].get("antecedent", 0) + res["by_rule"].get(ANTECEDENT_FALLBACK, 0) == antecedent
    assert all(f["status"] in ("proved", "no control") for f in res["not_refuted"])


def test_a_pair_never_back_to_back_is_guarded_by_its_premise_control():
    """OptCC's "rs_hop vs rs_hop: one send port" holds strictly too (its strict control is
    proved), so its premise control guards it: without the same port the pair overlaps (refuted);
    the goal replaced by True leaves both controls proved: caught."""
    ob = next(o for o in _obligations("optcc") if o.name == "optcc.rs_hop vs optcc.rs_hop: one send port")
    assert control(ob)[0] == "strict"
    res = check_controls([ob], 20000, _small)
    assert res["not_refuted"] == [] and res["by_rule"] == {"strict": 1, FALLBACK: 1}
    trivial = type(ob)(ob.prop, ob.name, ob.assumptions, z3.BoolVal(True), [], ob.params, ob.flows, list(ob.premise))
    [f] = check_controls([trivial], 20000, _small)["not_refuted"]
    assert f["status"] == "proved"


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
