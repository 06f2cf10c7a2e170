"""Near-optimality of single-straggler OptCC for every p (verifier.parametric.near_optimal):
the Z3 closed form is optcc_slot_time, the true ratio statements are proved, the false control
is refuted at a point the project's own Fractions (and the generated schedule) confirm."""
from fractions import Fraction as F

import z3

from bounds.closed_form import exclusive_single_straggler_optimum, lower_bound_single_straggler
from optcc.algorithms.families import Params
from optcc.algorithms.single.build import optcc_slot_time
from optcc.cluster import Cluster
from verifier.parametric import near_optimal as NO
from verifier.parametric.obligations import discharge


def _eval(term, p, k, ell):
    P = Params(z3.IntVal(p), z3.IntVal(k), z3.RealVal(str(ell)), 0)
    v = z3.simplify(term(P))
    return F(v.as_fraction().numerator, v.as_fraction().denominator)


def test_z3_terms_are_the_projects_closed_forms():
    for p in (2, 3, 4, 7, 12):
        for k in (1, 2, 5):
            for ell in (F(1), F(8, 7), F(3, 2), F(2), F(7, 2)):
                c = Cluster.build(p, stragglers={0: ell})
                assert _eval(NO.slot_time, p, k, ell) == optcc_slot_time(c, k)
                assert _eval(NO.theorem1, p, k, ell) == lower_bound_single_straggler(p, ell)
                assert _eval(NO.exclusive_optimum, p, k, ell) == exclusive_single_straggler_optimum(p, ell)


def test_ratio_statements_hold_numerically_and_are_tight():
    for p in (3, 5, 9, 33):
        for k in (1, 2, 3, 8):
            for ell in (F(1), F(9, 8), F(3, 2), F(19, 10), F(2), F(5, 2), F(4)):
                c = Cluster.build(p, stragglers={0: ell})
                t = optcc_slot_time(c, k)
                b1, tex = lower_bound_single_straggler(p, ell), exclusive_single_straggler_optimum(p, ell)
                if ell >= 2:
                    assert t == ell * (1 + F(1, k)) - (ell - 2) * (p - 2) / (k * (p - 1))
                    assert t <= (1 + F(1, k)) * b1 and (ell != 2 or t == (1 + F(1, k)) * b1)
                else:
                    assert t <= (1 + F(2, k)) * tex
                    if k >= 2:
                        h = p - 1
                        assert t == tex * (1 + (ell * h + 2 * (2 - ell)) / (k * ell * h + (k - 1) * (2 - ell)))
                assert tex >= b1 and t >= tex


def test_report_proves_every_statement_and_refutes_the_control():
    rep = NO.near_optimal_report()
    assert rep["proved"] is True and rep["status"] == "proved"
    assert [r["status"] for r in rep["obligations"]] == ["proved"] * len(rep["obligations"]) == ["proved"] * 8
    ctl = rep["control"]
    assert ctl["status"] == "refuted" and ctl["as_expected"] is True
    pt = ctl["point"]
    p, k, ell = pt["p"], pt["k"], F(pt["ell"])
    assert p >= 2 and k >= 2 and 1 <= ell < 2
    t = optcc_slot_time(Cluster.build(p, stragglers={0: ell}), k)
    assert t > (1 + F(2, k)) * lower_bound_single_straggler(p, ell)
    assert F(pt["schedule_time"]) == t                     # the generated schedule, timed


def test_wrong_factor_is_refuted():
    """(1 + 1/k)·T_ex is too small for ℓ < 2 (the P2P pieces cost more than 1/k)."""
    ob = NO._ob("wrong", lambda P: [P.ell < 2, P.k >= 2],
                lambda P: NO.slot_time(P) <= (1 + 1 / z3.ToReal(P.k)) * NO.exclusive_optimum(P), integers=True)
    r = discharge(ob)
    assert r["status"] == "refuted"
    cx = r["counterexample"]
    p, k, ell = cx["p"], cx["k"], F(cx["ell"])
    t = optcc_slot_time(Cluster.build(p, stragglers={0: ell}), k)
    assert t > (1 + F(1, k)) * exclusive_single_straggler_optimum(p, ell)


def test_extend_prove_all_adds_the_property():
    base = {"algo": "optcc", "proved": True, "properties": {"sum": "proved"}, "obligations": 3,
            "seconds": 1.0, "failures": []}
    res = NO.extend_prove_all(base)
    assert res["properties"] == {"sum": "proved", "near_optimal": "proved"}
    assert res["obligations"] == 3 + 9 + 3 and res["proved"] is True     # statements, the control, tightness controls
    assert res["near_optimal"]["control"]["as_expected"] is True


def test_cli_prove_all_optcc_shows_near_optimality_and_lp_certificates(capsys):
    import json

    from optcc_app.cli import main
    assert main(["prove-all", "--algo", "optcc", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["properties"]["near_optimal"] == "proved" and out["properties"]["lower_bound_lp"] == "proved"
    assert out["near_optimal"]["control"]["status"] == "refuted"
    assert out["near_optimal"]["control"]["point"]["violates"] is True
    assert len(out["lower_bound_lp"]["certificates"]) == 3 and out["lower_bound_lp"]["proved"] is True
    assert out["seconds"] < 120


def test_every_tight_statement_has_a_false_control_one_step_stronger():
    """Each attained inequality's strict version is refuted (a counterexample, not vacuity), so
    its constant cannot be improved; the report lists them and passes only if all are refuted."""
    from verifier.parametric import near_optimal as N
    rep = N.near_optimal_report()
    assert [t["obligation"] for t in rep["tightness"]] == [f"CONTROL (false, strict): {n}" for n in N.TIGHT]
    assert all(t["status"] == "refuted" and t["why"] == "goal fails" and t["as_expected"] for t in rep["tightness"])
    assert rep["proved"] is True


def test_a_tight_statement_weakened_under_its_old_name_fails_its_control():
    """(1 + 1/k) → (1 + 2/k) in "ℓ ≥ 2: T ≤ (1 + 1/k)·Theorem 1": still true, still PROVED, but
    its strict control now holds too, which the report counts as a failure."""
    import z3

    from verifier.parametric import near_optimal as N
    from verifier.parametric.obligations import discharge
    obs = N.obligations()
    i = next(n for n, ob in enumerate(obs) if ob.name == N.TIGHT[0])
    P = obs[i].params
    weak = N.slot_time(P) <= (1 + 2 / z3.ToReal(P.k) if P.k.is_int() else 1 + 2 / P.k) * N.theorem1(P)
    obs[i] = type(obs[i])(obs[i].prop, obs[i].name, obs[i].assumptions, weak, [], P)
    assert discharge(obs[i])["status"] == "proved"                  # the weakened statement is true
    ctl, = [c for c in N.tightness_controls(obs) if N.TIGHT[0] in c.name]
    assert discharge(ctl)["status"] == "proved"                     # so its control is not refuted
