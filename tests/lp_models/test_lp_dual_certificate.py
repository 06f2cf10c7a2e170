"""The `bound` property's exact LP dual (lp_models.dual_certificate): for the schedule's own
cluster, a rational (π, μ) that arithmetic alone checks, so "T ≥ μ" for every schedule of the
model rests on a certificate a reader can verify by hand (weak duality is three lines in the
module docstring)."""
import itertools
import json
import random
from fractions import Fraction as F

import pytest

from bounds.closed_form import lower_bound
from lp_models.dual_certificate import DualCertificate, lp_dual
from lp_models.schedule_point import exact_load_matrix
from optcc.cluster import Cluster
from optcc_app.cli import main

CLUSTERS = [Cluster.build(5, 1, {1: F(3, 2), 3: F(5, 4)}), Cluster.build(2, 1, {0: F(3)}), Cluster.build(6, 1),
            Cluster.build(9, 1, {0: F(8, 7)}), Cluster.build(9, 1, {0: F(3)}),
            Cluster.build(16, 1, {0: F(3), 1: F(2), 2: F(5, 4)}), Cluster.build(12, 1, {r: F(2) for r in range(6)}),
            Cluster.build(32, 8, {0: F(2)}), Cluster.build(32, 8, {r: F(2) for r in range(8)}),
            Cluster.build(24, 4, {0: F(3), 5: F(3, 2), 6: F(3, 2)})]


def _nodes(c):
    from lp_models.fluid import pooled_ell
    if c.g == 1:
        return [F(x) for x in c.slowdown], 1
    return [pooled_ell(c.slowdown[s * c.g:(s + 1) * c.g]) for s in range(c.servers)], c.g


def _per_node(cert: DualCertificate, c):
    """π of every node, in node order, from the certificate's classes (matched by ℓ)."""
    ells, _ = _nodes(c)
    by_ell = {ell: p for ell, p, _ in cert.node_duals()}
    return ells, [by_ell[e] for e in ells]


@pytest.mark.parametrize("c", CLUSTERS, ids=lambda c: f"p{c.p}g{c.g}s{len(c.stragglers)}")
def test_the_dual_checks_against_the_full_node_matrix_and_meets_the_bound(c):
    """Checked here without the certificate's own code: the n×n load matrix of the LP the flows
    induce a point of, every column Σ_u π_u·A[u][v] ≥ μ, P·Σπ ≤ 1, π ≥ 0; μ is the bound."""
    cert = lp_dual(c)
    ells, pi = _per_node(cert, c)
    a = exact_load_matrix(ells)
    n = len(ells)
    assert all(p >= 0 for p in pi) and cert.ports * sum(pi) <= 1
    assert all(sum(pi[u] * a[u][v] for u in range(n)) >= cert.mu for v in range(n))
    assert cert.problems() == []
    assert cert.mu == lower_bound(c)


def test_weak_duality_on_random_feasible_points():
    """For any shares x (Σx = 1) the least feasible T = max_v L_v(x)/P is ≥ μ, and = μ at an optimum."""
    rng = random.Random(7)
    for c in CLUSTERS[:7]:
        cert = lp_dual(c)
        ells, _ = _nodes(c)
        a = exact_load_matrix(ells)
        n = len(ells)
        for _ in range(20):
            w = [F(rng.randint(0, 9)) for _ in range(n)]
            if not sum(w):
                continue
            x = [v / sum(w) for v in w]
            t = max(sum(a[u][v] * x[v] for v in range(n)) for u in range(n)) / cert.ports
            assert t >= cert.mu


@pytest.mark.parametrize("change", ["mu up", "pi up", "pi negative", "pi moved"])
def test_a_wrong_dual_is_refused(change):
    cert = lp_dual(CLUSTERS[0])
    pi, mu = list(cert.pi), cert.mu
    if change == "mu up":
        mu += F(1, 10**6)
    elif change == "pi up":
        pi = [p * F(101, 100) for p in pi]
    elif change == "pi negative":
        pi[0] = -pi[0]
    else:
        pi[0], pi[1] = pi[0] + F(1, 100), pi[1] - F(1, 100)
    bad = DualCertificate(cert.level, cert.ports, cert.classes, pi, mu)
    assert bad.problems(), change


def test_the_dual_is_the_exact_lp_optimum_over_a_sweep():
    """μ equals the closed-form bound (Theorem 1 / 3, the derived multi-straggler bound) on every
    cluster of a sweep of up to three straggler slowdowns — where GLOP used to be the only check."""
    ells = [F(8, 7), F(3, 2), F(2), F(3)]
    n = 0
    for p in (3, 4, 7, 16, 64):
        for k in (1, 2, 3):
            for combo in itertools.combinations(ells, k):
                if k >= p:
                    continue
                c = Cluster.build(p, 1, dict(enumerate(combo)))
                assert lp_dual(c).mu == lower_bound(c), (p, combo)
                n += 1
    assert n == 66


def test_optcc_verify_shows_the_dual_a_reader_can_check(tmp_path, capsys):
    """`optcc verify FILE` (text and --json) on a two-straggler schedule: before, its bound rested on
    "optimum = bound checked at instances"; now the dual is printed and carried in --json."""
    path = str(tmp_path / "o5.json")
    assert main(["schedule", "--algo", "optcc", "--p", "5", "--straggler", "1:3/2", "--straggler", "3:5/4",
                 "-o", path]) == 0
    capsys.readouterr()
    assert main(["verify", path]) == 0
    text = capsys.readouterr().out
    assert "an exact LP dual gives T ≥ μ = 120/67 n/B" in text and "rank 1 (ℓ=3/2) 10/67" in text
    assert "checked at instances" not in text
    assert main(["verify", path, "--json"]) == 0
    dual = json.loads(capsys.readouterr().out)["facts"]["lp_bound"]["dual"]
    assert dual["holds"] is True and dual["mu"] == "120/67" and dual["ports"] == 1
    pis = {c["ell"]: (F(c["pi_per_node"]), c["count"]) for c in dual["classes"]}
    assert pis == {"3/2": (F(10, 67), 1), "5/4": (F(12, 67), 1), "1": (F(15, 67), 3)}
