"""Near-optimality of multi-GPU OptCC, one straggler server (verifier.parametric.near_optimal_servers):
the ratio statements are proved for every size, the false control is refuted at a point the
project's Fractions and the generated schedule confirm, stronger factors are refuted, and the Z3
terms are the Python closed forms."""
from __future__ import annotations

import json
from fractions import Fraction as F

import pytest
import z3

from bounds.closed_form import exclusive_single_straggler_optimum, lower_bound_straggler_server
from optcc.algorithms.servers.build import optcc_server_slot_time
from optcc.cluster import Cluster
from optcc.errors import OptccError
from verifier.parametric import near_optimal_servers as NS
from verifier.parametric.obligations import Obligation, discharge


@pytest.fixture(scope="module")
def report():
    return NS.near_optimal_report()


def test_every_statement_proved_and_the_control_refuted(report):
    assert report["proved"] is True and report["status"] == "proved"
    assert len(report["obligations"]) == 12 and all(r["status"] == "proved" for r in report["obligations"])
    pt = report["control"]["point"]
    assert report["control"]["status"] == "refuted" and report["control"]["as_expected"] is True
    assert pt["violates"] is True and F(pt["schedule_time"]) == F(pt["T"]) > F(pt["bound_1_plus_1_over_k_theorem3"])


def _value(term, q, g, k, ell, s_nv):
    P, _ = NS.params()
    sub = [(P.q, z3.RealVal(q)), (P.g, z3.RealVal(g)), (P.k, z3.RealVal(k)), (P.ell, z3.RealVal(str(ell))),
           (P.s_nv, z3.RealVal(str(s_nv)))]
    v = z3.simplify(z3.substitute(term(P), *sub)).as_fraction()
    return F(v.numerator, v.denominator)


def _cluster(q, g, ell, s_nv):
    slow = {r: ell for r in range(g, 2 * g)} if ell != 1 else None
    return Cluster.build(q * g, g, slow, bandwidth=1, nvlink_bandwidth=s_nv)


def test_z3_terms_are_the_python_closed_forms():
    """T (q = 2 and q ≥ 3 where optcc_server_slot_time has its closed form), Theorem 3 and T_ex."""
    n = 0
    for q in (2, 3, 4, 7):
        for g in (2, 4, 8):
            for ell in (F(1), F(8, 7), F(3, 2), F(2), F(3)):
                for k in (1, 2, 5):
                    for s_nv in (F(1, 2), F(g - 1), F(9), F(40)):
                        args = (q, g, k, ell, s_nv)
                        assert _value(NS.theorem3, *args) == lower_bound_straggler_server(q * g, g, ell)
                        assert _value(lambda P: NS.NO.exclusive_optimum(NS._single(P)), *args) == \
                            exclusive_single_straggler_optimum(q, ell)
                        try:
                            t = optcc_server_slot_time(_cluster(q, g, ell, s_nv), k)
                        except OptccError:
                            continue
                        term = NS.two_server_time if q == 2 else NS.servers_time
                        assert _value(term, *args) == t, args
                        n += 1
    assert n >= 300


def _stronger(name, extra, goal):
    P, assume = NS.params()
    return discharge(Obligation("near_optimal", name, assume + extra(P), goal(P), [], P))


def test_stronger_factors_are_refuted():
    """The factors are the strongest of their form: halving the fill term is false."""
    def k(P):
        return NS._r(P.k)
    weak2 = _stronger("q = 2: (1 + 1/(2k))", lambda P: [P.q == 2],
                      lambda P: NS.two_server_time(P) <= (1 + 1 / (2 * k(P))) * z3.If(
                          NS.theorem3(P) >= NS.nvlink_work(P), NS.theorem3(P), NS.nvlink_work(P)))
    weak3 = _stronger("q ≥ 3, ℓ ≥ 2: 3/(4k(q−1))", lambda P: [P.q >= 3, P.ell >= 2] + NS.valid(P),
                      lambda P: NS.servers_time(P) <= (1 + 1 / k(P) + 3 / (4 * k(P) * (P.q - 1))) * NS.theorem3(P))
    assert weak2["status"] == "refuted" and weak3["status"] == "refuted"


def test_cli_prove_all_servers_shows_near_optimality(capsys):
    from optcc_app.cli import main
    assert main(["prove-all", "--algo", "servers", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["properties"]["near_optimal"] == "proved" and out["properties"]["finish_q_le_2"] == "proved"
    assert out["near_optimal"]["control"]["point"]["violates"] is True
    assert main(["prove-all", "--algo", "servers"]) == 0
    text = capsys.readouterr().out
    assert "q = 2: T ≤ (1 + 1/k)·max(Theorem 3, ν)" in text and "(as expected: q=2, g=" in text
