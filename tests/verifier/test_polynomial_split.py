"""A closed-form obligation's polynomial split (verifier.parametric.polynomial): the cases with
denominators cleared and their cover, each part proved by Z3 and decided by cvc5, where cvc5
does not decide the original (division defeats it; docs/parametric.md "A second solver")."""
from __future__ import annotations

import pytest
import z3

from verifier.parametric import optcc as O
from verifier.parametric.obligations import Obligation, discharge
from verifier.parametric.polynomial import parts as split_parts


def _phase_lemma() -> Obligation:
    return O.phase_lemma(O.generator_model())


def test_the_phase_lemma_splits_into_its_regimes_and_a_cover_z3_proves():
    ob = _phase_lemma()
    parts = split_parts(ob)
    names = [p.name[len(ob.name):] for p in parts]
    assert len(parts) == 6 and names[-1] == " [polynomial: the cases cover the range]"
    assert names[-2].endswith(" positive on the range]")                  # factors divided out of the cases
    assert {"ell", "k", "p - 1"} <= set(names[-2][len(" [polynomial: "):-len(" positive on the range]")].split(", "))
    assert sum("ell >= 2" in n and "¬(ell >= 2)" not in n for n in names) == 2     # ℓ ≥ 2 with k = 1 and k ≠ 1
    for p in parts:
        assert not any(z3.is_div(x) for x in _subterms(p.goal)), p.name      # no division left
        assert discharge(p)["status"] == "proved", p.name
    assert {str(v) for p in parts for v in _vars(p.goal)} <= {"p", "k", "ell", "s"}
    assert all(z3.is_real(v) for p in parts for v in _vars(p.goal))          # p, k relaxed to reals


def test_cvc5_decides_every_part_of_the_phase_lemma():
    pytest.importorskip("cvc5")
    from verifier.parametric import recheck as R
    for p in split_parts(_phase_lemma()):
        assert [R.solve(s, 10000)[0] for _, _, s in R.queries(p)] == ["sat", "unsat"], p.name


def test_a_wrong_closed_form_is_refuted_through_its_split():
    """T = 1/k for ℓ ≥ 2, 2/k below, claimed ≤ 1/k: false in the ℓ < 2 case, and that part is
    refuted (by Z3, and by cvc5 where installed) while the ℓ ≥ 2 part is proved."""
    k, ell = z3.Real("k"), z3.Real("ell")
    ob = Obligation("bound", "T ≤ 1/k", [k >= 1, ell >= 1], z3.If(ell >= 2, 1 / k, 2 / k) <= 1 / k, [], (k, ell))
    parts = split_parts(ob)
    status = {p.name[len(ob.name):]: discharge(p)["status"] for p in parts}
    assert status == {" [polynomial: ell >= 2]": "proved", " [polynomial: ¬(ell >= 2)]": "refuted",
                      " [polynomial: k positive on the range]": "proved",
                      " [polynomial: the cases cover the range]": "proved"}
    try:
        from verifier.parametric import recheck as R
        import cvc5  # noqa: F401
    except ImportError:
        return
    wrong = next(p for p in parts if "¬" in p.name)
    assert R.solve(R.queries(wrong)[1][2], 10000)[0] == "sat"


def test_a_factor_positive_on_the_range_is_divided_out():
    """x/(k·g) ≤ y/(k·g) cleared is k·g·(x − y) ≤ 0: the factors k and g, positive on the range,
    are divided out (x − y ≤ 0 is what cvc5 decides), every part assumes them positive and one
    part proves that from the range; without g ≥ 2 the positivity part is refuted."""
    k, g, x, y = z3.Reals("k g x y")
    ob = Obligation("bound", "x/(k·g) ≤ y/(k·g)", [k >= 1, g >= 2, x <= y], x / (k * g) <= y / (k * g), [], (k, g))
    case, positive, cover = split_parts(ob)
    assert {str(v) for v in _vars(case.goal)} == {"x", "y"}
    assert positive.name.endswith("[polynomial: g, k positive on the range]")
    assert all(discharge(p)["status"] == "proved" for p in (case, positive, cover))
    unbounded = Obligation(positive.prop, positive.name, [a for a in positive.assumptions if "g" not in str(a)],
                           positive.goal, [], None)
    assert discharge(unbounded)["status"] == "refuted"


def test_regimes_in_the_hypotheses_are_cases_too_and_the_cover_names_where_they_fail():
    """x ≤ (2/k if k ≥ 2 else 1) ⇒ x/2 ≤ 1/2: one case per regime of the hypothesis; the cover
    says every point of the relaxed range is in a case or, in its regime, outside the hypothesis
    (without those disjuncts it is refuted: x = 5). A wrong regime (3/k) is refuted in its case."""
    k, x = z3.Reals("k x")
    ob = Obligation("bound", "x/2 ≤ 1/2", [k >= 1, x <= z3.If(k >= 2, 2 / k, 1)], x / 2 <= z3.RealVal(1) / 2, [], (k,))
    parts = split_parts(ob)
    assert [p.name[len(ob.name):] for p in parts if "k >= 2" in p.name] == [" [polynomial: k >= 2]", " [polynomial: ¬(k >= 2)]"]
    assert all(discharge(p)["status"] == "proved" for p in parts)
    cover = parts[-1]
    inside = Obligation(cover.prop, cover.name, cover.assumptions, z3.Or(*cover.goal.children()[:2]), [], None)
    assert discharge(inside)["status"] == "refuted"
    wrong = Obligation("bound", "x/2 ≤ 1/2", [k >= 1, x <= z3.If(k >= 2, 3 / k, 1)], x / 2 <= z3.RealVal(1) / 2, [], (k,))
    status = {p.name[len(wrong.name):]: discharge(p)["status"] for p in split_parts(wrong)}
    assert status[" [polynomial: k >= 2]"] == "refuted" and status[" [polynomial: ¬(k >= 2)]"] == "proved"


def test_the_cover_is_checked_a_missing_case_fails_it():
    ob = _phase_lemma()
    cover = split_parts(ob)[-1]
    cases = cover.goal.children()
    assert discharge(cover)["status"] == "proved"
    short = Obligation(cover.prop, cover.name, cover.assumptions, z3.Or(*cases[1:]), [], None)
    assert discharge(short)["status"] == "refuted"


def test_flow_obligations_and_linear_ones_are_not_split():
    """Only closed forms are split: a family's flow obligation (its indices are integers that
    must stay integers) and a claim without division keep their one query."""
    from verifier.parametric import generic as G
    C = O.generator_model()
    assert all(split_parts(ob) == [] for ob in G.well_formed(C))
    assert split_parts(O.piece_lemma()) == []


def _subterms(e):
    seen, todo = set(), [e]
    while todo:
        x = todo.pop()
        if x.get_id() in seen:
            continue
        seen.add(x.get_id())
        yield x
        todo.extend(x.children())


def _vars(e):
    return {x for x in _subterms(e) if z3.is_const(x) and x.decl().kind() == z3.Z3_OP_UNINTERPRETED}


def test_a_cover_over_regimes_with_positive_denominators_is_their_case_analysis():
    """servers' "q ≥ 3, ℓ < 2: T ≤ (1 + 2/k + 3/(k(q−1)))·T_ex(q)/g" has regimes in its
    hypotheses and every denominator positive on the range: the cover names a regime's points
    outside its hypotheses by the cleared formulas its case assumes (the positivity part proves
    the denominators positive), so cvc5 decides it at once; named with squared denominators it
    was undecided at 2 × 60 s. Without its k = 1 case it is refuted (its hypotheses, the two
    statements before it, hold on the whole range, so no "hypothesis fails" disjunct covers k = 1)."""
    pytest.importorskip("cvc5")
    from verifier.parametric import near_optimal_servers as NS
    from verifier.parametric import recheck as R
    ob = next(o for o in NS.obligations() if "ℓ < 2, s_nv ≥ g − 1: T ≤" in o.name)
    parts = split_parts(ob)
    cover, positive = parts[-1], parts[-2]
    assert cover.name.endswith("[polynomial: the cases cover the range]")
    assert [R.solve(s, 5000)[0] for _, _, s in R.queries(cover)] == ["sat", "unsat"]
    assert discharge(cover)["status"] == "proved" and not cover.side
    assert positive.name.endswith(" positive on the range]") and discharge(positive)["status"] == "proved"
    assert "k == 1" in parts[0].name and "¬(k == 1)" not in parts[0].name
    short = Obligation(cover.prop, cover.name, cover.assumptions, z3.Or(*cover.goal.children()[1:]), [], None)
    assert discharge(short)["status"] == "refuted"


def test_a_denominator_not_positive_on_the_range_keeps_the_squared_cover():
    """x ≤ (1/(k − 2) if k ≥ 3 else 1) ⇒ x/2 ≤ 1/2 over k ≥ 1, k ≠ 2: k − 2 is positive in its
    regime only, so the cover names the points outside the hypothesis with the squared
    denominator and proves it nonzero; with 2/k (positive on the range) it needs neither."""
    k, x = z3.Reals("k x")
    claim = x / 2 <= z3.RealVal(1) / 2
    squared = split_parts(Obligation("bound", "x/2 ≤ 1/2", [k >= 1, k != 2, x <= z3.If(k >= 3, 1 / (k - 2), 1)],
                                     claim, [], (k,)))
    assert [str(d) for d in squared[-1].side] == ["k - 2 != 0"]
    assert "(x*(k - 2) - 1)*(k - 2)" in str(squared[-1].goal)
    assert all(discharge(p)["status"] == "proved" for p in squared)
    positive = split_parts(Obligation("bound", "x/2 ≤ 1/2", [k >= 1, x <= z3.If(k >= 2, 2 / k, 1)], claim, [], (k,)))
    assert positive[-1].side == [] and "*k)" not in str(positive[-1].goal)
    assert all(discharge(p)["status"] == "proved" for p in positive)
