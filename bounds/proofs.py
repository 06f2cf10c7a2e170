"""Exact proofs of the bounds' headline inequalities: sympy reduces, Z3 decides.

A claim "f(x) ≤ 0 for all x satisfying the hypotheses" with f rational is reduced by sympy to
polynomials: f = N/D, and f ≤ 0 ⟺ (D ≠ 0 and N·D ≤ 0). Z3's nonlinear real arithmetic (nlsat,
a complete decision procedure for polynomial real arithmetic) then checks that the hypotheses
together with the negation are unsatisfiable. An unsat answer is a proof for all real values
in the region (which contains every integer p ≥ 2); a sat answer comes with a counterexample,
which is re-evaluated exactly with sympy before it is reported.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field

import sympy as sp
import z3

from bounds import symbolic as S

_OPS = {"<=": lambda a: a <= 0, "<": lambda a: a < 0, ">=": lambda a: a >= 0, ">": lambda a: a > 0}


@dataclass
class Claim:
    """`expr op 0` for every point satisfying `hypotheses` (sympy relationals)."""

    name: str
    expr: sp.Expr
    op: str
    hypotheses: list
    numerator: sp.Expr = field(init=False)
    denominator: sp.Expr = field(init=False)

    def __post_init__(self):
        num, den = sp.fraction(sp.cancel(sp.together(self.expr)))
        self.numerator, self.denominator = sp.expand(num), sp.expand(den)

    @property
    def polynomial_form(self) -> str:
        return f"({self.numerator})·({self.denominator}) {self.op} 0 and {self.denominator} ≠ 0"


@dataclass
class ProofResult:
    claim: Claim
    proved: bool
    counterexample: dict | None  # symbol name -> value (exact where Z3 gives a rational)
    z3_answer: str

    def describe(self) -> str:
        if self.proved:
            return f"PROVED {self.claim.name}: {self.claim.polynomial_form} (Z3: {self.z3_answer})"
        return f"REFUTED {self.claim.name}: counterexample {self.counterexample} (Z3: {self.z3_answer})"


def to_z3(expr: sp.Expr, env: dict):
    """Translate a sympy polynomial (or relational) into a Z3 real expression."""
    if isinstance(expr, sp.Symbol):
        return env[expr]
    if isinstance(expr, sp.Integer):
        return z3.RealVal(int(expr))
    if isinstance(expr, sp.Rational):
        return z3.Q(int(expr.p), int(expr.q))
    if isinstance(expr, sp.Add):
        return z3.Sum([to_z3(a, env) for a in expr.args])
    if isinstance(expr, sp.Mul):
        out = to_z3(expr.args[0], env)
        for a in expr.args[1:]:
            out = out * to_z3(a, env)
        return out
    if isinstance(expr, sp.Pow) and expr.exp.is_Integer and expr.exp >= 0:
        base = to_z3(expr.base, env)
        out = z3.RealVal(1)
        for _ in range(int(expr.exp)):
            out = out * base
        return out
    rel = {sp.LessThan: lambda a, b: a <= b, sp.StrictLessThan: lambda a, b: a < b,
           sp.GreaterThan: lambda a, b: a >= b, sp.StrictGreaterThan: lambda a, b: a > b,
           sp.Equality: lambda a, b: a == b}
    for cls, make in rel.items():
        if isinstance(expr, cls):
            return make(to_z3(expr.lhs, env), to_z3(expr.rhs, env))
    raise TypeError(f"not a polynomial expression: {expr!r} ({type(expr).__name__})")


def z3_query(claim: Claim):
    """(symbols, env, hypotheses, goal): the claim exactly as `prove` decides it, Z3 terms over
    reals (also what a second solver re-checks: verifier.parametric.recheck)."""
    symbols = sorted(claim.expr.free_symbols | set().union(*(h.free_symbols for h in claim.hypotheses)),
                     key=lambda s: s.name)
    env = {s: z3.Real(s.name) for s in symbols}
    hyps = [env[sym] > 0 for sym in symbols if sym.is_positive]  # a sympy "positive" symbol is > 0 in Z3 too
    for h in claim.hypotheses:
        if h is sp.true:
            raise ValueError(f"hypothesis of {claim.name} evaluated to True; build it with evaluate=False")
        hyps.append(_hypothesis_to_z3(h, env))
    n, d = to_z3(claim.numerator, env), to_z3(claim.denominator, env)
    return symbols, env, hyps, z3.And(d != 0, _OPS[claim.op](n * d))


def prove(claim: Claim, timeout_ms: int = 20000) -> ProofResult:
    """Decide the claim with Z3 (nonlinear real arithmetic) over all reals in the hypotheses."""
    symbols, env, hyps, goal = z3_query(claim)
    solver = z3.SolverFor("QF_NRA")
    solver.set("timeout", timeout_ms)
    solver.add(*hyps)
    solver.add(z3.Not(goal))
    answer = solver.check()
    if answer == z3.unsat:
        return ProofResult(claim, True, None, "unsat")
    if answer == z3.sat:
        model = solver.model()
        cex = {s.name: _value(model.eval(env[s], model_completion=True)) for s in symbols}
        _confirm_counterexample(claim, cex)
        return ProofResult(claim, False, cex, "sat")
    return ProofResult(claim, False, None, str(answer))


def satisfiable(hypotheses: list, timeout_ms: int = 20000) -> bool:
    """True iff Z3 finds a real point satisfying every hypothesis (a region a claim is proved on
    is not empty); positive symbols are > 0 as in `prove`."""
    syms = sorted(set().union(*(h.free_symbols for h in hypotheses)), key=lambda s: s.name)
    env = {s: z3.Real(s.name) for s in syms}
    solver = z3.SolverFor("QF_NRA")
    solver.set("timeout", timeout_ms)
    solver.add(*[env[s] > 0 for s in syms if s.is_positive])
    solver.add(*[_hypothesis_to_z3(h, env) for h in hypotheses])
    return solver.check() == z3.sat


def _hypothesis_to_z3(h, env):
    """`lhs op rhs` with rational sides → (N·D op 0 and D ≠ 0), where lhs − rhs = N/D."""
    ops = {sp.LessThan: "<=", sp.StrictLessThan: "<", sp.GreaterThan: ">=", sp.StrictGreaterThan: ">"}
    op = next((o for cls, o in ops.items() if isinstance(h, cls)), None)
    if op is None:
        return to_z3(h, env)
    num, den = _reduced(h.lhs - h.rhs)
    n, d = to_z3(num, env), to_z3(den, env)
    return z3.And(d != 0, _OPS[op](n * d))


@functools.lru_cache(maxsize=4096)
def _reduced(expr):
    """(N, D) expanded with expr = N/D; cached, since many claims share their hypotheses."""
    num, den = sp.fraction(sp.cancel(sp.together(expr)))
    return sp.expand(num), sp.expand(den)


def _value(v):
    if z3.is_rational_value(v):
        return sp.Rational(v.numerator_as_long(), v.denominator_as_long())
    return sp.Float(v.approx(30).as_decimal(30).rstrip("?"), 30)


def _confirm_counterexample(claim: Claim, cex: dict) -> None:
    """A sat model must really violate the claim; checked exactly (or to 30 digits if algebraic)."""
    subs = {s: cex[s.name] for s in claim.expr.free_symbols}
    value = sp.nsimplify(claim.expr.subs(subs)) if all(isinstance(v, sp.Rational) for v in subs.values()) \
        else claim.expr.subs(subs).evalf(30)
    if _OPS[claim.op](value) is sp.true or _OPS[claim.op](value) is True:
        if not all(isinstance(v, sp.Rational) for v in subs.values()):
            return  # an algebraic point at a boundary: the 30-digit value cannot decide equality
        raise AssertionError(f"Z3 counterexample {cex} does not violate {claim.name}")


# ---- the paper's headline and its g analogue --------------------------------------------
def overhead_claims(bound: S.Bound, t0: sp.Expr, constant: sp.Expr, hypotheses: list,
                    name: str) -> list[Claim]:
    """max{cut, volume}/T0 − 1 ≤ constant ⟺ each term/T0 − 1 − constant ≤ 0: one claim per term."""
    return [Claim(f"{name} [{t.kind} term]", t.expr / t0 - 1 - constant, "<=", hypotheses)
            for t in bound.terms()]


HEADLINE_HYPOTHESES = [S.p >= 2, S.ell >= 1, S.ell <= 2]
SERVER_HYPOTHESES = [sp.Ge(S.g, 1, evaluate=False), S.p >= 2 * S.g, S.ell >= 1, S.ell <= 2]


def headline_claims(constant: sp.Expr | None = None) -> list[Claim]:
    """Paper's headline (g = 1): for p ≥ 2, ℓ ∈ [1, 2], Theorem 1 / T0 − 1 ≤ 1/(p−1)."""
    c = 1 / (S.p - 1) if constant is None else constant
    return overhead_claims(S.THEOREM_1, S.T0_G1, c, HEADLINE_HYPOTHESES,
                           f"Thm1/T0 - 1 <= {c} for p >= 2, 1 <= ell <= 2")


def server_headline_claims(constant: sp.Expr | None = None) -> list[Claim]:
    """Derived g analogue: for p ≥ 2g, ℓ ∈ [1, 2], Theorem 3 / T0 − 1 ≤ g/(p−g) = 1/(q−1)."""
    c = S.g / (S.p - S.g) if constant is None else constant
    return overhead_claims(S.THEOREM_3, S.T0, c, SERVER_HYPOTHESES,
                           f"Thm3/T0 - 1 <= {c} for g >= 1, p >= 2g, 1 <= ell <= 2")


def beyond_two_claim() -> Claim:
    """Derived: for ℓ > 2 the overhead exceeds ℓ/2 − 1 > 0 at every p (it cannot vanish):
    cut/T0 − 1 − (ℓ/2 − 1) > 0, and the bound is at least its cut term."""
    return Claim("Thm1/T0 - 1 > ell/2 - 1 for p >= 2, ell > 2",
                 S.THEOREM_1.cut.expr / S.T0_G1 - 1 - (S.ell / 2 - 1), ">", [S.p >= 2, S.ell > 2])


def prove_all(claims: list[Claim]) -> list[ProofResult]:
    return [prove(c) for c in claims]
