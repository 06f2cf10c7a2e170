"""The headline inequality, proved for all p and ℓ by reduction to polynomials + Z3, and the
proof's ability to fail (deliberately wrong constants must be refuted with a real counterexample)."""
import sympy as sp

from bounds import proofs as P
from bounds import symbolic as S

p, g, ell = S.p, S.g, S.ell


def test_headline_proved_for_all_p_and_ell():
    results = P.prove_all(P.headline_claims())
    assert len(results) == 2 and all(r.proved for r in results), [r.describe() for r in results]
    # the reduction really is polynomial: numerator and denominator are polynomials in p, ℓ
    for r in results:
        assert r.claim.numerator.is_polynomial(p, ell) and r.claim.denominator.is_polynomial(p, ell)


def test_server_headline_proved():
    results = P.prove_all(P.server_headline_claims())
    assert all(r.proved for r in results), [r.describe() for r in results]


def test_headline_is_tight_at_ell_two():
    """1/(p−1) cannot be lowered: at ℓ = 2 the cut term gives exactly T0·(1 + 1/(p−1))."""
    assert sp.simplify(S.THEOREM_1.cut.expr.subs(ell, 2) / S.T0_G1 - 1 - 1 / (p - 1)) == 0


def test_wrong_constants_are_refuted():
    for wrong in [1 / p, sp.Rational(99, 100) / (p - 1)]:
        results = P.prove_all(P.headline_claims(wrong))
        refuted = [r for r in results if not r.proved]
        assert refuted and refuted[0].counterexample is not None
        cex = refuted[0].counterexample
        assert cex["p"] >= 2 and 1 <= cex["ell"] <= 2
        value = (S.THEOREM_1.expr / S.T0_G1 - 1 - wrong).subs({p: cex["p"], ell: cex["ell"]})
        assert value > 0  # the counterexample really breaks the wrong claim
    results = P.prove_all(P.server_headline_claims(1 / (p - g)))
    assert not all(r.proved for r in results)


def test_wrong_ell_range_is_refuted():
    claims = P.overhead_claims(S.THEOREM_1, S.T0_G1, 1 / (p - 1),
                               [p >= 2, ell >= 1, ell <= sp.Rational(21, 10)], "ell up to 2.1")
    assert not all(P.prove(c).proved for c in claims)


def test_overhead_beyond_two_never_vanishes():
    assert P.prove(P.beyond_two_claim()).proved


def test_cut_binds_above_crossing_point():
    star = S.crossing_point(S.THEOREM_1)
    claim = P.Claim("cut >= volume for ell >= ell*", S.THEOREM_1.cut.expr - S.THEOREM_1.volume.expr,
                    ">=", [p >= 2, ell >= star])
    assert P.prove(claim).proved
    below = P.Claim("cut <= volume for 1 <= ell <= ell*", S.THEOREM_1.cut.expr - S.THEOREM_1.volume.expr,
                    "<=", [p >= 2, ell >= 1, ell <= star])
    assert P.prove(below).proved
