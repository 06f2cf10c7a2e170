"""An obligation's polynomial split: the same claim, case by case, with every denominator cleared.

A closed-form obligation (a rational function of p, k, ℓ, … with if-then-else on regimes) is
nonlinear real arithmetic with division; Z3's nlsat decides it, cvc5 often does not within
minutes. Its split is a set of obligations that together imply it, each polynomial:

- integers relaxed to reals (p, k as real numbers ≥ their bounds): a claim proved for every real
  value holds for every integer one (only a claim whose integers are its parameters, entering
  through +, −, ·, comparisons and to_real, is split: not a flow's indices, not mod);
- one *case* per consistent truth assignment of the if-then-else conditions (each branch taken);
- in each case every atom a ⋈ b (⋈ ∈ =, ≠, ≤, <, ≥, >), with a − b = N/D built by the field rules
  (x/y = Nx·Dy / (Dx·Ny), …), becomes N·D ⋈ 0 (N ⋈ 0 for = and ≠), exact where D ≠ 0 because
  D² > 0, or N ⋈ 0 where every denominator met in the case is positive there; the case's side
  conditions state that (nonzero, or positive), so the cleared atoms mean what the original ones
  mean;
- in every cleared atom the factors positive on the range (g, k, s_nv, q − 1, …: sympy's
  factorization, Z3's quick check) are divided out (N ⋈ 0 ⇔ N/f ⋈ 0 where f > 0): clearing
  multiplies by every denominator, and the degree this adds (up to 13 in servers' q = 2
  placement) is what defeated cvc5; every part then assumes those factors positive and one
  *positivity* part proves it from the range;
- regimes in the hypotheses (a near-optimality statement under ν ≤ Theorem 3) are cases too, and
  the cover then also names, per regime, the points where a cleared hypothesis fails (a point of
  the range is in its own regime's case, since there every hypothesis holds); where every
  denominator of every regime is positive on the range (the positivity part proves it), every
  case clears without squaring and those points are named by the very formulas the case assumes
  (exact everywhere on the range, not only in the case), so the cover is the regimes' case
  analysis, which cvc5 decides at once, where squared denominators in six variables defeated it;
- one *cover* obligation: under the (relaxed) assumptions some case holds, its assumptions and
  conditions cleared as the case's part states them, so no point of the range is left out (an assumption with division, such as ν ≤ Theorem 3, is cleared too: the
  cover proves its denominators nonzero from the assumptions without division).

Every part is proved by Z3 (prove-all) as well as the original, and cvc5 re-checks the parts
(verifier.parametric.recheck): the statement is written once (the original), the split derived
from it mechanically. Why it implies the original: a point of the range lies in some case (cover);
there the divided-out factors are positive (positivity) and its denominators nonzero (side),
so each cleared atom has the original atom's truth value and the branches taken are the
original's: the case's claim is the original claim there.
"""
from __future__ import annotations

import itertools
from fractions import Fraction
from typing import TYPE_CHECKING

import z3

from verifier.parametric.obligations import Obligation

if TYPE_CHECKING:
    from verifier.parametric.arith import Z3Term

MAX_CONDITIONS = 6        # at most 2^6 cases per obligation; a claim with more regimes is not split


class NotPolynomial(Exception):
    """The term has an operator the split does not translate (int div/mod, quantifiers, ...)."""


_CMP = {z3.Z3_OP_EQ: lambda a, b: a == b, z3.Z3_OP_DISTINCT: lambda a, b: a != b,
        z3.Z3_OP_LE: lambda a, b: a <= b, z3.Z3_OP_LT: lambda a, b: a < b,
        z3.Z3_OP_GE: lambda a, b: a >= b, z3.Z3_OP_GT: lambda a, b: a > b}
_BOOL = {z3.Z3_OP_AND: lambda xs: z3.And(*xs), z3.Z3_OP_OR: lambda xs: z3.Or(*xs),
         z3.Z3_OP_NOT: lambda xs: z3.Not(xs[0]), z3.Z3_OP_IMPLIES: lambda xs: z3.Implies(*xs),
         z3.Z3_OP_IFF: lambda xs: xs[0] == xs[1]}


class _Clear:
    """Translate terms under one case (a truth value per if-then-else condition): real terms to
    (numerator, denominator) pairs of polynomials, formulas to cleared formulas; every
    denominator met is recorded in `nonzero`."""

    def __init__(self, case: dict[int, bool], positive: bool = False):
        self.case, self.positive = case, positive
        self.nonzero: list[Z3Term] = []
        self.memo: dict[int, tuple[Z3Term, Z3Term]] = {}

    def frac(self, e: Z3Term) -> tuple[Z3Term, Z3Term]:
        key = e.get_id()
        if key not in self.memo:
            self.memo[key] = self._frac(e)
        return self.memo[key]

    def _frac(self, e: Z3Term) -> tuple[Z3Term, Z3Term]:
        one = z3.RealVal(1)
        if z3.is_rational_value(e) or z3.is_int_value(e):
            return z3.RealVal(e.as_fraction() if z3.is_rational_value(e) else e.as_long()), one
        if z3.is_const(e) and e.sort() in (z3.IntSort(), z3.RealSort()):
            return z3.Real(e.decl().name()), one          # an integer relaxed to a real
        k = e.decl().kind()
        if k == z3.Z3_OP_ITE:
            c = e.arg(0).get_id()
            if c not in self.case:
                raise NotPolynomial("an if-then-else condition outside the case")
            return self.frac(e.arg(1) if self.case[c] else e.arg(2))
        if k == z3.Z3_OP_TO_REAL:
            return self.frac(e.arg(0))
        args = [self.frac(a) for a in e.children()]
        if k == z3.Z3_OP_ADD or k == z3.Z3_OP_SUB:
            n, d = args[0]
            for n2, d2 in args[1:]:
                a, b = _mul(n, d2), _mul(n2, d)
                n, d = (a + b if k == z3.Z3_OP_ADD else a - b), _mul(d, d2)
            return n, d
        if k == z3.Z3_OP_UMINUS:
            return -args[0][0], args[0][1]
        if k == z3.Z3_OP_MUL:
            n, d = args[0]
            for n2, d2 in args[1:]:
                n, d = _mul(n, n2), _mul(d, d2)
            return n, d
        if k == z3.Z3_OP_DIV:
            (n1, d1), (n2, d2) = args
            self.nonzero.append(n2)
            return _mul(n1, d2), _mul(d1, n2)
        raise NotPolynomial(f"operator {e.decl().name()}")

    def formula(self, e: Z3Term) -> Z3Term:
        if z3.is_true(e) or z3.is_false(e):
            return e
        k = e.decl().kind()
        if k in _BOOL:
            return _BOOL[k]([self.formula(a) for a in e.children()])
        if k == z3.Z3_OP_ITE:
            c = e.arg(0).get_id()
            if c not in self.case:
                raise NotPolynomial("an if-then-else condition outside the case")
            return self.formula(e.arg(1) if self.case[c] else e.arg(2))
        if k in _CMP and e.num_args() != 2:
            raise NotPolynomial(f"{e.decl().name()} of {e.num_args()} terms")
        if k in _CMP and not z3.is_bool(e.arg(0)):
            (n1, d1), (n2, d2) = self.frac(e.arg(0)), self.frac(e.arg(1))
            if _is_one(d1) and _is_one(d2):               # no division: the atom as it is
                return _CMP[k](n1, n2)
            n, d = _mul(n1, d2) - _mul(n2, d1), _mul(d1, d2)
            zero = z3.RealVal(0)
            lhs = n if k in (z3.Z3_OP_EQ, z3.Z3_OP_DISTINCT) or self.positive else _mul(n, d)
            return _CMP[k](lhs, zero)
        if k == z3.Z3_OP_EQ:                              # Boolean equality
            return self.formula(e.arg(0)) == self.formula(e.arg(1))
        raise NotPolynomial(f"formula {e.decl().name()}")


def _and(xs: list[Z3Term]) -> Z3Term:
    """And of xs, true for none (z3.And() of nothing prints as an undeclared symbol)."""
    return z3.And(*xs) if xs else z3.BoolVal(True)


def _mul(a: Z3Term, b: Z3Term) -> Z3Term:
    """a·b, without a factor 1 (the pairs' denominators are 1 wherever no division occurs) and
    0 for a factor 0."""
    if _is_zero(a) or _is_zero(b):
        return z3.RealVal(0)
    return b if _is_one(a) else a if _is_one(b) else a * b


def _is_zero(e: Z3Term) -> bool:
    return bool(z3.is_rational_value(e) and e.as_fraction() == 0 or z3.is_int_value(e) and e.as_long() == 0)


def _is_one(e: Z3Term) -> bool:
    return bool(z3.is_rational_value(e) and e.as_fraction() == 1 or z3.is_int_value(e) and e.as_long() == 1)


def _conditions(terms: list[Z3Term]) -> list[Z3Term]:
    """The if-then-else conditions of non-Boolean terms, innermost first, each once."""
    out: dict[int, Z3Term] = {}
    seen: set[int] = set()

    def walk(e: Z3Term) -> None:
        if e.get_id() in seen:
            return
        seen.add(e.get_id())
        for c in e.children():
            walk(c)
        if z3.is_app_of(e, z3.Z3_OP_ITE) and not z3.is_bool(e):
            out.setdefault(e.arg(0).get_id(), e.arg(0))
    for t in terms:
        walk(t)
    return list(out.values())


def _has_division(e: Z3Term, seen: set[int] | None = None) -> bool:
    seen = set() if seen is None else seen
    if e.get_id() in seen:
        return False
    seen.add(e.get_id())
    return z3.is_div(e) or any(_has_division(c, seen) for c in e.children())


def _integers(terms: list[Z3Term]) -> set[str]:
    """Names of the integer variables in terms."""
    out: set[str] = set()
    seen: set[int] = set()

    def walk(e: Z3Term) -> None:
        if e.get_id() in seen:
            return
        seen.add(e.get_id())
        if z3.is_const(e) and e.sort() == z3.IntSort() and not z3.is_int_value(e):
            out.add(e.decl().name())
        for c in e.children():
            walk(c)
    for t in terms:
        walk(t)
    return out


def _claim(ob: Obligation) -> Z3Term:
    goal = z3.BoolVal(True) if ob.goal is True else ob.goal
    return z3.And(*ob.side, goal) if ob.side else goal


def polynomial_split(ob: Obligation) -> list[Obligation]:
    """The obligation's split (module docstring): cases, then the cover; [] unless it is a closed
    form: a claim with real division whose only integers are its parameters (no flow index),
    entering through +, −, ·, comparisons and to_real only (so they relax to reals)."""
    claim = _claim(ob)
    hyps = list(ob.assumptions) + list(ob.premise)
    if not _has_division(claim):
        return []
    params = {str(t) for t in (ob.params or ()) if isinstance(t, z3.ExprRef)}
    if not _integers([claim, *hyps]) <= params:
        return []            # a flow's indices: integrality matters there, and the claim is not a closed form
    try:
        return _split(ob, claim, hyps)
    except NotPolynomial:
        return []


def _split(ob: Obligation, claim: Z3Term, hyps: list[Z3Term]) -> list[Obligation]:
    conds = _conditions([claim] + hyps)
    if len(conds) > MAX_CONDITIONS:
        raise NotPolynomial(f"{len(conds)} regimes")
    ranged = bool(_conditions(hyps))        # regimes in the hypotheses too (near-optimality under ν ≤ Thm 3)
    cover = _Clear({})                      # the range: assumptions without division as they are,
    relaxed = [cover.formula(h) for h in hyps if not _has_division(h) and not _conditions([h])]
    cleared = [] if ranged else [cover.formula(h) for h in hyps if _has_division(h)]   # the others cleared
    red = _Reduce(relaxed)
    cases = [dict(zip([c.get_id() for c in conds], values)) for values in itertools.product((True, False), repeat=len(conds))]
    dens = _range_denominators(cases, conds, claim, hyps, relaxed) if ranged else None
    parts: list[tuple[str, list[Z3Term], Z3Term, list[Z3Term]]] = []
    outside: list[Z3Term] = []              # with `ranged`: each regime's points where a hypothesis fails
    for case in cases:
        values = [case[c.get_id()] for c in conds]
        base = _Clear(case)
        premise = [base.formula(h) for h in hyps]
        here = [base.formula(c) if v else z3.Not(base.formula(c)) for c, v in zip(conds, values)]
        if ranged and dens is None:
            outside.append(_and(here + [z3.Not(_and(premise))]))
            cover.nonzero += base.nonzero
        if conds and _decided(premise + here) == "unsat":
            if dens is not None:                 # its points still fail a hypothesis, as the cases clear it
                clear = _Clear(case, True)
                outside.append(_and([red.formula(x) for x in _regime(clear, conds, values)]
                                    + [z3.Not(_and([red.formula(clear.formula(h)) for h in hyps]))]))
            continue
        base.formula(claim)                          # the denominators met in this case
        met = list(dict.fromkeys(base.nonzero))
        positive = dens is not None or bool(met) and _decided(premise + here + [z3.Or(*[d <= 0 for d in met])]) == "unsat"
        clear = _Clear(case, positive)          # the case's own premise and conditions cleared alike,
        premise = [red.formula(clear.formula(h)) for h in hyps]      # so the cover names what the part assumes
        here = [red.formula(x) for x in _regime(clear, conds, values)]
        goal = red.formula(clear.formula(claim))
        side = [red.formula(d > 0 if positive else d != 0) for d in met]
        if dens is not None:
            outside.append(_and(here + [z3.Not(_and(premise))]))
        what = ", ".join(f"{c}" if v else f"¬({c})" for c, v in zip(conds, values)) or "one case"
        parts.append((what, premise + here, goal, side))
    if not parts:
        raise NotPolynomial("no feasible case")
    positivity = [] if dens is None else [x for x in (red.formula(d > 0) for d in dens) if not _trivially_true(x)]
    names = sorted(red.dropped) + [str(x) for x in positivity]
    hypotheses = red.hypotheses
    covered = [_and(hyp + hypotheses) for _, hyp, _, _ in parts]
    out = [Obligation(ob.prop, f"{ob.name} [polynomial: {what}]", hyp + hypotheses, goal, side, None)
           for what, hyp, goal, side in parts]
    if names:
        out.append(Obligation(ob.prop, f"{ob.name} [polynomial: {', '.join(names)} positive on the range]",
                              relaxed, _and(hypotheses + positivity), [], None))
    if dens is not None:                    # the denominators and factors are proved positive by the part above
        out.append(Obligation(ob.prop, f"{ob.name} [polynomial: the cases cover the range]", relaxed + hypotheses,
                              z3.Or(*covered, *outside), [], None))
        return out
    out.append(Obligation(ob.prop, f"{ob.name} [polynomial: the cases cover the range]", relaxed,
                          z3.Or(*covered, *outside) if ranged else
                          z3.Implies(_and(cleared), z3.Or(*covered)) if cleared else z3.Or(*covered),
                          [d != 0 for d in dict.fromkeys(cover.nonzero)], None))
    return out


def _regime(clear: _Clear, conds: list[Z3Term], values: list[bool]) -> list[Z3Term]:
    """A case's regime: each condition cleared as `clear` clears it, or its negation."""
    return [clear.formula(c) if v else z3.Not(clear.formula(c)) for c, v in zip(conds, values)]


def _range_denominators(cases: list[dict[int, bool]], conds: list[Z3Term], claim: Z3Term, hyps: list[Z3Term],
                        relaxed: list[Z3Term]) -> list[Z3Term] | None:
    """Every denominator of every case (its conditions, hypotheses and claim), where Z3 quickly
    finds them all positive on the relaxed range; else None. Then every case clears every atom
    without squaring (N ⋈ 0 means what the atom means at every point of the range, not only in
    the case), so the cover names a regime's points outside its hypotheses by the same cleared
    formulas its case assumes, and the cover is the regimes' case analysis; one part proves the
    denominators positive from the range."""
    dens: dict[Z3Term, None] = {}
    for case in cases:
        c = _Clear(case)
        for e in conds + hyps + [claim]:
            c.formula(e)
        dens.update(dict.fromkeys(c.nonzero))
    if not dens or _decided(relaxed + [z3.Or(*[d <= 0 for d in dens])]) != "unsat":
        return None
    return list(dens)


def _trivially_true(e: Z3Term) -> bool:
    return bool(z3.is_true(z3.simplify(e)))


Poly = dict[tuple[tuple[str, int], ...], Fraction]      # monomial (variable, power)… -> coefficient


def _poly(e: Z3Term) -> Poly:
    """A cleared term (+, −, ·, rationals, variables) as its expanded monomials."""
    if z3.is_rational_value(e) or z3.is_int_value(e):
        c = Fraction(e.as_fraction() if z3.is_rational_value(e) else e.as_long())
        return {(): c} if c else {}
    if z3.is_const(e):
        return {((e.decl().name(), 1),): Fraction(1)}
    k, args = e.decl().kind(), [_poly(a) for a in e.children()]
    if k in (z3.Z3_OP_ADD, z3.Z3_OP_SUB):
        out = dict(args[0])
        for q in args[1:]:
            for m, c in q.items():
                out[m] = out.get(m, Fraction(0)) + (c if k == z3.Z3_OP_ADD else -c)
        return {m: c for m, c in out.items() if c}
    if k == z3.Z3_OP_UMINUS:
        return {m: -c for m, c in args[0].items()}
    if k == z3.Z3_OP_MUL:
        out = args[0]
        for q in args[1:]:
            prod: dict[tuple[tuple[str, int], ...], Fraction] = {}
            for m1, c1 in out.items():
                for m2, c2 in q.items():
                    powers = dict(m1)
                    for v, n in m2:
                        powers[v] = powers.get(v, 0) + n
                    m = tuple(sorted(powers.items()))
                    prod[m] = prod.get(m, Fraction(0)) + c1 * c2
            out = {m: c for m, c in prod.items() if c}
        return out
    raise NotPolynomial(f"operator {e.decl().name()}")


class _Reduce:
    """Divide every atom's polynomial by its factors (sympy's factorization) that are positive
    on the range: N ⋈ 0 ⇔ N/f ⋈ 0 where f > 0. The cleared atoms carry every denominator as a
    factor, so this lowers their degree (g, k, s_nv up to the fourth power, q − 1, …) to what the
    claim needs, which cvc5 decides where the cleared form defeats it. Where a factor is divided
    out, every part assumes it positive (`hypotheses`) and one more part proves that from the
    range."""

    def __init__(self, relaxed: list[Z3Term]):
        import sympy as sp
        self.sp, self.relaxed = sp, relaxed
        self.is_positive: dict[object, bool] = {}
        self.dropped: dict[str, Z3Term] = {}

    @property
    def hypotheses(self) -> list[Z3Term]:
        return [self.dropped[name] > 0 for name in sorted(self.dropped)]

    def _positive(self, f: object) -> bool:
        """Z3 quickly finds f positive on the range (shapes the split only: the positivity part
        proves it)."""
        if f not in self.is_positive:
            self.is_positive[f] = _decided(self.relaxed + [self._z3(f) <= 0]) == "unsat"
        return self.is_positive[f]

    def formula(self, e: Z3Term) -> Z3Term:
        if z3.is_true(e) or z3.is_false(e):
            return e
        k = e.decl().kind()
        if k in _BOOL:
            return _BOOL[k]([self.formula(a) for a in e.children()])
        if k in _CMP and e.num_args() == 2 and not z3.is_bool(e.arg(0)):
            sp = self.sp
            poly = _poly(e.arg(0) - e.arg(1))
            if not poly or all(not m for m in poly):
                return e
            expr = sp.Add(*[sp.Rational(c.numerator, c.denominator) * sp.Mul(*[sp.Symbol(v) ** n for v, n in m])
                            for m, c in poly.items()])
            c, factors = sp.factor_list(expr)
            out = [f for f, _ in factors if not f.is_number and self._positive(f)]
            if not out:
                return e
            for f in out:
                self.dropped.setdefault(str(f), self._z3(f))
            rest = sp.sign(c) * sp.Mul(*[f ** n for f, n in factors if f not in out])
            return _CMP[k](self._z3(rest), z3.RealVal(0))
        if k == z3.Z3_OP_EQ:
            return self.formula(e.arg(0)) == self.formula(e.arg(1))
        return e

    def _z3(self, f: object) -> Z3Term:
        from bounds.proofs import to_z3
        assert isinstance(f, self.sp.Expr)
        return to_z3(f, {v: z3.Real(v.name) for v in f.free_symbols})


def _decided(constraints: list[Z3Term]) -> str:
    """Z3's quick answer on constraints, to shape the split (a case that never arises is left out,
    denominators shown positive are cleared without squaring); what the split claims is proved
    afterwards like every obligation (the cover, the side conditions), so a wrong answer here
    can only make a part fail, never make one hold."""
    s = z3.Solver()
    s.set(timeout=2000)
    s.add(*constraints)
    return str(s.check())


def parts(ob: Obligation) -> list[Obligation]:
    """`polynomial_split(ob)` for a closed-form claim, else []: what the second solver re-checks in
    its place, Z3 proving every part in the same run. Computed once per obligation (kept on it)."""
    cached: list[Obligation] | None = ob.__dict__.get("_polynomial_parts")
    if cached is None:
        cached = ob.__dict__["_polynomial_parts"] = polynomial_split(ob)
    return cached
