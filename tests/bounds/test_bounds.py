"""Symbolic facts about the lower bounds (sympy; no sampling), and closed form ≡ symbolic."""
from fractions import Fraction as F

import numpy as np
import pytest
import sympy as sp

from bounds import closed_form as CF
from bounds import symbolic as S
from bounds.sweep import sweep_single_straggler, sweep_straggler_server
from optcc.cluster import Cluster

p, g, ell = S.p, S.g, S.ell
r = sp.Symbol("r", nonnegative=True)  # p = 2 + r (g = 1) or p = 2g + r


def zero(e) -> bool:
    return sp.simplify(e) == 0


def assert_same_terms(bound_a, cut, volume):
    assert zero(bound_a.cut.expr - cut), (bound_a.cut.expr, cut)
    assert zero(bound_a.volume.expr - volume), (bound_a.volume.expr, volume)


# ---- the bounds are the paper's formulas, and the closed forms are their evaluations -----
def test_theorems_match_paper_verbatim():
    for bound, verbatim in [(S.THEOREM_1, S.PAPER_THEOREM_1_VERBATIM),
                            (S.THEOREM_3, S.PAPER_THEOREM_3_VERBATIM)]:
        assert isinstance(verbatim, sp.Max) and len(verbatim.args) == 2
        ours = [bound.cut.expr, bound.volume.expr]
        for arg in verbatim.args:  # each of the paper's two arguments is one of our terms
            assert sum(zero(arg - t) for t in ours) == 1


def test_closed_forms_equal_symbolic_terms():
    assert zero(CF.fault_free_optimum(p, g) - S.T0)
    assert zero(CF.fault_free_optimum(p) - S.T0_G1)
    assert_same_terms(S.THEOREM_1, *CF.single_straggler_terms(p, ell))
    assert_same_terms(S.THEOREM_3, *CF.straggler_server_terms(p, g, ell))
    ls = S.ells(3)
    assert_same_terms(S.multi_straggler(ls), *CF.multi_straggler_terms(p, ls))
    servers = [[ls[0], ls[1]], [ls[2], 1], [1, 1]]
    assert_same_terms(S.servers_bound(servers), *CF.server_terms(servers))


def test_every_term_has_an_argument_and_a_label():
    bounds = [S.THEOREM_1, S.THEOREM_3, S.MULTI_STRAGGLER, S.straggler_servers([ell]),
              S.servers_bound([[ell], [1]])]
    for b in bounds:
        assert b.label.split(" ")[0].rstrip(":") in {"paper", "derived"}
        for t in b.terms():
            sentences = [s for s in t.argument.replace("e.g.", "eg").split(". ") if s.strip()]
            assert 3 <= len(sentences) <= 6, (b.name, t.kind, len(sentences))
            assert t.label.startswith(("paper", "derived"))


# ---- machine-checked facts ----------------------------------------------------------------
def test_theorem3_with_g1_is_theorem1():
    assert_same_terms(S.THEOREM_1, S.THEOREM_3.cut.expr.subs(g, 1), S.THEOREM_3.volume.expr.subs(g, 1))


def test_ell_one_gives_t0_and_busbw_factor():
    # Theorem 1 at ℓ = 1: volume = 2(p−1)/p (nccl-tests' bus-bandwidth factor), cut = 1 ≤ it.
    assert zero(S.THEOREM_1.volume.expr.subs(ell, 1) - 2 * (p - 1) / p)
    assert zero(S.T0_G1 - 2 * (p - 1) / p)
    assert sp.simplify((S.T0_G1 - S.THEOREM_1.cut.expr.subs(ell, 1)).subs(p, 2 + r)).is_nonnegative
    # Theorem 3 at ℓ = 1: volume = T0, cut = 1/g ≤ T0 when p ≥ 2g.
    assert zero(S.THEOREM_3.volume.expr.subs(ell, 1) - S.T0)
    assert sp.simplify((S.T0 - S.THEOREM_3.cut.expr.subs(ell, 1)).subs(p, 2 * g + r)).is_nonnegative
    assert zero(S.T0.subs(g, 1) - S.T0_G1)


def _series_in_inverse_p(expr):
    x = sp.Symbol("x", positive=True)  # x = 1/p
    return sp.series(sp.simplify(expr.subs(p, 1 / x)), x, 0, 3).removeO(), x


@pytest.mark.parametrize("kind,paper_first_order", [
    ("volume", lambda x: 1 + g * (ell - 1) / ell * x),      # 1 + g(ℓ−1)/(ℓp)
    ("cut", lambda x: ell / 2 + ell * g / 2 * x),           # ℓ/2 + ℓg/(2p)
])
def test_series_matches_paper_expansions(kind, paper_first_order):
    term = getattr(S.THEOREM_3, kind)
    series, x = _series_in_inverse_p(term.expr / S.T0)
    poly = sp.Poly(sp.expand(series), x)
    assert zero(poly.coeff_monomial(1) + poly.coeff_monomial(x) * x - paper_first_order(x))
    # the remainder is O(g²/p²): the x² coefficient is g² times a function of ℓ alone
    second = sp.simplify(poly.coeff_monomial(x**2) / g**2)
    assert second != 0 and g not in second.free_symbols


def test_crossing_points():
    assert zero(S.crossing_point(S.THEOREM_1) - (2 - 1 / (p - 1)))
    star = S.crossing_point(S.THEOREM_3)
    assert zero(star - (2 - g / (p - g)))
    assert zero(star.subs(g, 1) - (2 - 1 / (p - 1)))
    # below ℓ* the volume term binds, above it the cut term: cut − volume = ℓ(ℓ − ℓ*)·positive
    diff = sp.factor(S.THEOREM_3.cut.expr - S.THEOREM_3.volume.expr)
    assert zero(diff.subs(ell, star))
    ratio = sp.simplify(diff / (ell * (ell - star)))
    assert sp.simplify(ratio.subs(p, 2 * g + r + 1)).is_positive  # p > 2g: every factor > 0


def test_overhead_beyond_two_tends_to_half_ell_minus_one():
    d = sp.Symbol("d", positive=True)  # ℓ = 2 + d
    for bound, t0 in [(S.THEOREM_1, S.T0_G1), (S.THEOREM_3, S.T0)]:
        limits = [sp.limit(t.expr / t0, p, sp.oo) for t in bound.terms()]
        assert zero(limits[0] - ell / 2) and zero(limits[1] - 1)  # cut → ℓ/2, volume → 1
        overhead = sp.Max(*limits).subs(ell, 2 + d) - 1             # max is continuous
        assert zero(overhead - ((2 + d) / 2 - 1)) and overhead.is_positive


def test_multi_straggler_reduces_to_theorem1_at_m1():
    cut = S.MULTI_STRAGGLER.cut.expr.subs(S.ELL[1], ell)
    volume = S.MULTI_STRAGGLER.volume.expr.subs(S.m, 1).doit().subs(S.ELL[1], ell)
    assert_same_terms(S.THEOREM_1, cut, volume)
    (l1,) = S.ells(1)
    one = S.multi_straggler([l1])
    assert_same_terms(S.THEOREM_1, one.cut.expr.subs(l1, ell), one.volume.expr.subs(l1, ell))
    # and with ℓ_i = 1 for all i it is T0 (volume) for any m
    all_one = S.MULTI_STRAGGLER.volume.expr.replace(lambda e: isinstance(e, sp.Indexed), lambda e: 1)
    assert zero(all_one.doit() - S.T0_G1)


def test_server_bounds_reduce_to_paper_and_g1_cases():
    one_server = S.straggler_servers([ell])
    assert_same_terms(S.THEOREM_3, one_server.cut.expr, one_server.volume.expr)
    # the general per-GPU form with a concrete shape: q = 4 servers of g = 3, server 0 slowed
    # (ℓ ≥ 1 is written ℓ = 1 + s with s ≥ 0 so that sympy can decide the Max over servers)
    s0, s1, s2 = sp.symbols("s0:3", nonnegative=True)
    shaped = S.servers_bound([[1 + s0] * 3] + [[1] * 3] * 3)
    assert_same_terms(shaped, S.THEOREM_3.cut.expr.subs({p: 12, g: 3, ell: 1 + s0}),
                      S.THEOREM_3.volume.expr.subs({p: 12, g: 3, ell: 1 + s0}))
    # g = 1: the server form is the multi-straggler bound on p = 4 GPUs
    ls = S.ells(2)
    g1 = S.servers_bound([[1 + s1], [1 + s2], [1], [1]])
    multi = S.multi_straggler([1 + s1, 1 + s2])
    assert_same_terms(g1, multi.cut.expr, multi.volume.expr.subs(p, 4))
    # m fully slowed servers: the multi-straggler bound on q = p/g nodes, divided by g
    two = S.straggler_servers(ls)
    q = sp.Symbol("q", positive=True)
    mq = S.multi_straggler(ls)
    assert zero(two.volume.expr.subs(p, q * g) - mq.volume.expr.subs(p, q) / g)
    assert zero(two.cut.expr - mq.cut.expr / g)


# ---- the cluster-level entry point --------------------------------------------------------
def test_lower_bound_for_clusters():
    assert CF.lower_bound(Cluster.build(8)) == F(7, 4) == CF.fault_free_optimum(8)
    assert CF.lower_bound(Cluster.build(8, 1, {3: 2})) == CF.lower_bound_single_straggler(8, 2) == 2
    c = Cluster.build(8, 1, {3: 2, 5: F(4, 3)})
    assert CF.lower_bound(c) == max(F(2), F(14) / (6 + F(1, 2) + F(3, 4)))
    full = Cluster.build(16, 4, {r: 2 for r in range(4, 8)})
    assert CF.is_straggler_server(full)
    assert CF.lower_bound(full) == CF.lower_bound_straggler_server(16, 4, 2) == F(1, 2)
    assert CF.cluster_terms(full).binding == "cut"
    assert CF.lower_bound(Cluster.build(16, 4)) == CF.fault_free_optimum(16, 4)
    # one slowed GPU of a 4-GPU server: its server still sends 3 + 1/2 NIC-units; derived bound
    part = Cluster.build(16, 4, {4: 2})
    assert not CF.is_straggler_server(part)
    assert CF.lower_bound(part) == max(1 / F(7, 2), F(6) / (12 + F(7, 2))) == F(12, 31)
    assert CF.lower_bound(part) < CF.lower_bound_straggler_server(16, 4, 2)
    assert CF.lower_bound(Cluster.build(4, 4, {0: 2})) == 0  # one server: no NIC traffic needed


def test_partial_server_derived_bound_is_reachable_where_theorem3_is_not():
    """Why Theorem 3 must not be applied to a partly slowed server: with q = 2 servers of g = 2
    and one GPU at ℓ = 2, swapping whole vectors through the server's two NICs (rates 1 and 1/2
    of B, split 2:1) takes 2/3 n/B, below Theorem 3's ℓ/g = 1 but equal to the derived bound."""
    c = Cluster.build(4, 2, {0: 2})
    shares = [F(2, 3), F(1, 3)]                      # of n, through GPU 1 (ℓ=1) and GPU 0 (ℓ=2)
    swap_time = max(shares[0] * 1, shares[1] * 2)    # each NIC sends and receives its share
    assert swap_time == F(2, 3) == CF.lower_bound(c) < CF.lower_bound_straggler_server(4, 2, 2)


def test_sweep_matches_exact_closed_forms():
    ps = np.array([2, 3, 8, 64, 1000])
    ls = np.array([1, 1.5, 2, 8 / 7, 3])
    out = sweep_single_straggler(ps, ls)
    exact = [float(CF.lower_bound_single_straggler(int(a), F(b))) for a, b in zip(ps, ls)]
    assert np.allclose(out["lower_bound"], exact, rtol=1e-14)
    assert list(out["cut_binds"]) == [CF.single_straggler_terms(int(a), F(b)).binding == "cut"
                                      for a, b in zip(ps, ls)]
    out3 = sweep_straggler_server(np.array([16, 256]), 4, 2)
    assert np.allclose(out3["lower_bound"], [float(CF.lower_bound_straggler_server(x, 4, 2)) for x in (16, 256)])
