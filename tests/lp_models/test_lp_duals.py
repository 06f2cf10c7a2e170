"""Closed-form fluid-LP certificates (lp_models.duals): proved for every size by Z3, equal to
lp_models.fluid's LP (its load matrix, GLOP's optimum, primal and duals) at instances, and able
to fail (a wrong dual or a wrong formula is refuted)."""
from fractions import Fraction as F

import numpy as np
import pytest
import sympy as sp

from bounds import closed_form as CF
from lp_models import duals as D
from lp_models.fluid import load_matrix, node_classes, solve_fluid_lp
from optcc.cluster import Cluster


@pytest.fixture(scope="module")
def proved():
    return D.prove_lp_bounds()


def test_every_certificate_is_proved_for_all_sizes(proved):
    assert proved["proved"] is True
    names = [c["lp"] for c in proved["certificates"]]
    assert any("Theorem 1" in n for n in names) and any("Theorem 3" in n for n in names)
    assert any("T_ex" in n for n in names)
    for c in proved["certificates"]:
        assert c["failures"] == [] and c["vacuous_regions"] == [] and c["claims"] >= 25


@pytest.mark.parametrize("capacity", ["shared", "exclusive"])
def test_symbolic_load_matrix_is_the_lp_models_one(capacity):
    for p, ell in [(3, F(3, 2)), (8, F(7, 4)), (13, F(3))]:
        cluster = Cluster.build(p, stragglers={0: ell})
        _, classes = node_classes(cluster)
        a = load_matrix(classes, capacity)
        sym = D.load_matrix((1, sp.Integer(p - 1)), (sp.nsimplify(ell), 1), capacity)
        assert np.allclose(a, np.array(sym.tolist(), dtype=float), rtol=0, atol=1e-12)


def _glop(cluster, capacity):
    """GLOP's optimum, root shares per class and duals per class row (send + receive), normalised
    so that Σ ports·π + π_ν = 1 (the closed form's scaling)."""
    res = solve_fluid_lp(cluster, capacity)
    norm = sum(res.duals[r] * res.rows[r][2] for r in res.rows)
    pi = [sum(v for k, v in res.duals.items() if k.endswith(f"[{c.name}]")) / norm for c in res.classes]
    nv = sum(v for k, v in res.duals.items() if k.startswith("nvlink")) / norm
    return res.objective, [res.root_share[c.name] for c in res.classes], pi, nv


CASES = [(3, F(5, 4)), (5, F(8, 7)), (8, F(3, 2)), (8, F(3)), (16, F(7, 4)), (31, F(4))]


@pytest.mark.parametrize("capacity", ["shared", "exclusive"])
def test_closed_forms_equal_glop_at_instances(capacity):
    cert = D.theorem1_certificate() if capacity == "shared" else D.exclusive_certificate()
    for p, ell in CASES:
        ev = D.evaluate(cert, p, ell)
        want = (CF.lower_bound_single_straggler(p, ell) if capacity == "shared"
                else CF.exclusive_single_straggler_optimum(p, ell))
        assert ev["optimum"] == want and ev["primal"]["T"] == want
        obj, x, pi, _ = _glop(Cluster.build(p, stragglers={0: ell}), capacity)
        assert obj == pytest.approx(float(want), rel=1e-9)
        assert x == pytest.approx([float(v) for v in ev["primal"]["x"]], abs=1e-9), (p, ell)
        best = ev["duals"][ev["optimal_dual"]]
        assert best["mu"] == want
        assert pi == pytest.approx([float(v) for v in best["pi"]], abs=1e-9), (p, ell, capacity)


def test_theorem3_closed_forms_equal_glop_at_instances():
    cert = D.theorem3_certificate()
    for p, g, ell, nvlink in [(16, 4, F(2), None), (16, 4, F(5, 4), None), (24, 8, F(3, 2), None),
                              (16, 4, F(5, 4), "slow")]:
        kw = {} if nvlink is None else {"nvlink_bandwidth": Cluster.build(p).bandwidth}
        cluster = Cluster.build(p, g=g, stragglers={r: ell for r in range(g, 2 * g)}, **kw)
        nu = CF.pooling_nvlink_time(cluster)
        ev = D.evaluate(cert, p, ell, g=g, nu=nu)
        want = max(CF.lower_bound_straggler_server(p, g, ell), nu)
        assert ev["optimum"] == want and ev["primal"]["T"] == want
        obj, x, pi, pi_nu = _glop(cluster, "shared")
        assert obj == pytest.approx(float(want), rel=1e-9)
        best = ev["duals"][ev["optimal_dual"]]
        assert best["mu"] + best["pi_nu"] * nu == want
        assert pi + [pi_nu] == pytest.approx([float(v) for v in best["pi"]] + [float(best["pi_nu"])], abs=1e-9)
        if nvlink is None:
            assert x == pytest.approx([float(v) for v in ev["primal"]["x"]], abs=1e-9)


def test_a_wrong_dual_is_refuted():
    cert = D.theorem1_certificate()
    n, ell = D.N, D.ELL
    cert.duals[1] = D.Dual("volume", (1 / (ell * n + 2), ell * n / (ell * n + 1)), cert.terms["volume"], [])
    res = D.prove_certificate(cert)
    assert not res["proved"] and any("dual [volume]" in f["claim"] for f in res["failures"])


def test_a_wrong_formula_is_refuted():
    """Claiming the shared LP's optimum is T_ex (the exclusive formula) fails: its volume dual is
    infeasible for the shared load matrix."""
    cert = D.theorem1_certificate()
    ex = D.exclusive_certificate()
    cert.terms = dict(ex.terms)
    cert.duals = ex.duals
    res = D.prove_certificate(cert)
    assert not res["proved"]
    cx = next(f["counterexample"] for f in res["failures"] if f["counterexample"])
    assert float(sp.nsimplify(cx["ell"])) >= 1 and float(sp.nsimplify(cx["N"])) >= 1


def test_an_empty_region_is_reported_vacuous():
    cert = D.theorem1_certificate()
    cert.primals[0].region = cert.primals[0].region + [sp.Ge(D.ELL, 3), sp.Le(D.ELL, 2)]
    assert D.vacuous_regions(cert) == [f"primal [{cert.primals[0].regime}]"]
    assert D.prove_certificate(cert)["proved"] is False
