"""Near-optimality of single-straggler OptCC for every p: ratio obligations over its closed form.

T(p, k, ℓ) is `optcc_slot_time` (derived, optcc/algorithms/single/build.py): for p ≥ 3 the
formula `verifier.parametric.optcc.closed_form`, which the `finish` obligations prove equal to
the families' finish time; for p = 2 (one exchange) T = ℓ. Quantified range: all integers
p ≥ 2, k ≥ 1 and real ℓ ≥ 1 (the straggler rank does not enter T). Bounds (units of n/B):
Theorem 1 (paper) B1 = max(ℓ, 2ℓ(p−1)/(ℓ(p−1)+1)); the exclusive-port optimum (derived,
bounds.closed_form.exclusive_single_straggler_optimum, proved an LP optimum for every p in
lp_models.duals) T_ex = max(ℓ, 2ℓ(p−1)/(ℓ(p−2)+2)).

Statements (derived here; each a Z3 obligation in nonlinear real arithmetic, for all real p ≥ 2,
k ≥ 1, ℓ ≥ 1 and so for all integers; the control over integers p, k):
- ℓ ≥ 2, p ≥ 3: T = ℓ(1 + 1/k) − (ℓ−2)(p−2)/(k(p−1)) exactly, so T ≤ (1 + 1/k)·B1
  (equality at ℓ = 2; B1 = ℓ for ℓ ≥ 2); p = 2: T = ℓ = B1.
- ℓ < 2, k ≥ 2, p ≥ 3: T = T_ex·(1 + (ℓ(p−1) + 2(2−ℓ))/(kℓ(p−1) + (k−1)(2−ℓ))) exactly
  (p = 2: T = ℓ = T_ex), so T ≤ (1 + 2/k)·T_ex; the same bound also holds at k = 1 (T = (4p−6+ℓ)/(p−1)).
- T_ex ≥ B1 for every p ≥ 2, ℓ ≥ 1 (so the exclusive statement is the stronger one).
- Control (false, must be refuted): T ≤ (1 + 2/k)·B1 for ℓ < 2, k ≥ 2. Z3 returns a point,
  which `control_point_check` re-evaluates exactly with the project's own Fractions
  (optcc_slot_time, lower_bound_single_straggler) and, where it is small, by timing the
  generated schedule.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import z3

from optcc.algorithms.families import Params
from verifier.parametric.obligations import TIMEOUT_MS, Obligation, discharge
from verifier.parametric.optcc import closed_form

if TYPE_CHECKING:
    from verifier.parametric.arith import Z3Term

FOR_ALL = ("all p ≥ 2, k ≥ 1, ℓ ≥ 1 (proved over the reals, so for every integer p, k; "
           "T = optcc_slot_time's closed form)")
PROPERTY = "near_optimal"


def params(integers: bool = False) -> tuple[Params, list[Z3Term]]:
    """p, k real by default: every statement is proved for all real p ≥ 2, k ≥ 1 (so for every
    integer), which keeps the query in nonlinear real arithmetic, where Z3's nlsat is complete;
    `integers` for the control, whose counterexample must be a real instance."""
    p, k = z3.Ints("p k") if integers else z3.Reals("p k")
    ell = z3.Real("ell")
    return Params(p, k, ell, 0), [p >= 2, k >= 1, ell >= 1]


def slot_time(P: Params) -> Z3Term:
    """optcc_slot_time (derived) as a Z3 term: ℓ at p = 2, the construction's closed form above."""
    H, k = _real(P.p - 1), _real(P.k)
    return z3.If(P.p == 2, P.ell, closed_form(H, k, P.ell))


def _real(x: Z3Term) -> Z3Term:
    return z3.ToReal(x) if x.is_int() else x


def theorem1(P: Params) -> Z3Term:
    """Theorem 1 (paper): max(ℓ, 2ℓ(p−1)/(ℓ(p−1)+1))."""
    H, ell = _real(P.p - 1), P.ell
    vol = 2 * ell * H / (ell * H + 1)
    return z3.If(ell >= vol, ell, vol)


def exclusive_optimum(P: Params) -> Z3Term:
    """T_ex (derived, bounds.closed_form.exclusive_single_straggler_optimum)."""
    H, ell = _real(P.p - 1), P.ell
    vol = 2 * ell * H / (ell * (H - 1) + 2)
    return z3.If(ell >= vol, ell, vol)


def _ob(name: str, extra: Callable[[Params], list[Z3Term]], goal: Callable[[Params], Z3Term],
        integers: bool = False) -> Obligation:
    P, assume = params(integers)
    return Obligation(PROPERTY, name, assume + extra(P), goal(P), [], P)


def obligations() -> list[Obligation]:
    """The true ratio statements (module docstring), each over the whole range."""
    def H(P: Params) -> Z3Term:
        return _real(P.p - 1)

    def k(P: Params) -> Z3Term:
        return _real(P.k)
    return [
        _ob("ℓ ≥ 2, p ≥ 3: T = ℓ(1 + 1/k) − (ℓ−2)(p−2)/(k(p−1))",
            lambda P: [P.ell >= 2, P.p >= 3],
            lambda P: slot_time(P) == P.ell * (1 + 1 / k(P)) - (P.ell - 2) * (H(P) - 1) / (k(P) * H(P))),
        _ob("ℓ ≥ 2: T ≤ (1 + 1/k)·Theorem 1", lambda P: [P.ell >= 2],
            lambda P: slot_time(P) <= (1 + 1 / k(P)) * theorem1(P)),
        _ob("ℓ = 2: T = (1 + 1/k)·Theorem 1 (the factor is tight)", lambda P: [P.ell == 2, P.p >= 3],
            lambda P: slot_time(P) == (1 + 1 / k(P)) * theorem1(P)),
        _ob("ℓ < 2, k ≥ 2, p ≥ 3: T = T_ex·(1 + (ℓ(p−1) + 2(2−ℓ))/(kℓ(p−1) + (k−1)(2−ℓ)))",
            lambda P: [P.ell < 2, P.k >= 2, P.p >= 3],
            lambda P: slot_time(P) == exclusive_optimum(P) * (1 + (P.ell * H(P) + 2 * (2 - P.ell))
                                                              / (k(P) * P.ell * H(P) + (k(P) - 1) * (2 - P.ell)))),
        _ob("ℓ < 2, k ≥ 2: T ≤ (1 + 2/k)·T_ex", lambda P: [P.ell < 2, P.k >= 2],
            lambda P: slot_time(P) <= (1 + 2 / k(P)) * exclusive_optimum(P)),
        _ob("ℓ < 2, k = 1: T ≤ 3·T_ex (= (1 + 2/k)·T_ex)", lambda P: [P.ell < 2, P.k == 1],
            lambda P: slot_time(P) <= 3 * exclusive_optimum(P)),
        _ob("T_ex ≥ Theorem 1", lambda P: [], lambda P: exclusive_optimum(P) >= theorem1(P)),
        _ob("T ≥ T_ex (OptCC never beats the exclusive-port optimum)", lambda P: [],
            lambda P: slot_time(P) >= exclusive_optimum(P)),
    ]


# The inequality statements that are attained somewhere in their range (derived: ℓ = 2 for the
# first, ℓ ≥ ℓ* where T_ex = ℓ = Theorem 1 for the second, p = 2 for the third). The other two,
# (1 + 2/k)·T_ex and 3·T_ex for ℓ < 2, are corollaries with slack: the equality statement above
# them is the exact ratio.
TIGHT = ("ℓ ≥ 2: T ≤ (1 + 1/k)·Theorem 1", "T_ex ≥ Theorem 1",
         "T ≥ T_ex (OptCC never beats the exclusive-port optimum)")


def tightness_controls(obs: list[Obligation] | None = None) -> list[Obligation]:
    """For each TIGHT statement, its false control one step stronger: the same inequality strict.
    It must be refuted (the constant cannot be improved), so a constant weakened under the old
    name leaves its control proved and the report fails."""
    out = []
    for ob in obs if obs is not None else obligations():
        if ob.name not in TIGHT:
            continue
        g = ob.goal
        strict = g.arg(0) < g.arg(1) if z3.is_le(g) else g.arg(0) > g.arg(1)
        out.append(Obligation(ob.prop, f"CONTROL (false, strict): {ob.name}", ob.assumptions, strict, [], ob.params))
    return out


def control() -> Obligation:
    """The false statement "T ≤ (1 + 2/k)·Theorem 1 for ℓ < 2, k ≥ 2" (must be refuted)."""
    return _ob("CONTROL (false): ℓ < 2, k ≥ 2: T ≤ (1 + 2/k)·Theorem 1", lambda P: [P.ell < 2, P.k >= 2],
               lambda P: slot_time(P) <= (1 + 2 / z3.ToReal(P.k)) * theorem1(P), integers=True)


def control_point_check(p: int, k: int, ell: Fraction | int | str) -> dict[str, Any]:
    """Re-evaluate the control's counterexample with the project's exact Fractions; where the
    schedule is small, also time the generated schedule (optcc.timing.slot_time)."""
    from bounds.closed_form import exclusive_single_straggler_optimum, lower_bound_single_straggler
    from optcc.algorithms.single.build import optcc_allreduce, optcc_slot_time
    from optcc.cluster import Cluster

    ell = Fraction(ell)
    cluster = Cluster.build(p, stragglers={0: ell})
    t = optcc_slot_time(cluster, k)
    b1 = lower_bound_single_straggler(p, ell)
    out: dict[str, Any] = {"p": p, "k": k, "ell": str(ell), "T": str(t), "theorem1": str(b1),
           "T_ex": str(exclusive_single_straggler_optimum(p, ell)),
           "bound_1_plus_2_over_k_theorem1": str((1 + Fraction(2, k)) * b1),
           "violates": t > (1 + Fraction(2, k)) * b1}
    if p * p * k <= 20000:
        from optcc.timing import slot_time as timed
        out["schedule_time"] = str(timed(optcc_allreduce(cluster, k)))
        out["violates"] = out["violates"] and Fraction(out["schedule_time"]) > (1 + Fraction(2, k)) * b1
    return out


def _small_control_point(ob: Obligation, timeout_ms: int) -> tuple[int, int, Fraction] | None:
    """A counterexample to the control (Z3 model of assumptions ∧ ¬goal), first among small p, k
    (for a readable check), else anywhere; None when Z3 finds none."""
    solver = z3.Solver()
    solver.set(timeout=timeout_ms)
    solver.add(*ob.assumptions, z3.Not(ob.goal))
    P = ob.params
    assert isinstance(P, Params)                # _ob states every obligation over Params
    for cap in (8, 16, 64, 256, None):
        solver.push()
        if cap is not None:
            solver.add(P.p <= cap, P.k <= 4 * cap)
        if solver.check() == z3.sat:
            m = solver.model()
            val = m.eval(P.ell, model_completion=True)
            if not z3.is_rational_value(val):       # an algebraic ℓ: look further for a rational one
                solver.pop()
                continue
            ell = Fraction(val.as_fraction().numerator, val.as_fraction().denominator)
            p: int = m.eval(P.p).as_long()
            k: int = m.eval(P.k).as_long()
            return p, k, ell
        solver.pop()
    return None


def near_optimal_report(timeout_ms: int = TIMEOUT_MS) -> dict[str, Any]:
    """JSON-ready: each obligation's result, the control's refutation and its exact check.
    `proved` is true iff every true statement is proved and the control is refuted at a point
    that the exact re-evaluation confirms."""
    t0 = time.perf_counter()
    results = [discharge(ob, timeout_ms) for ob in obligations()]
    ob = control()
    t1 = time.perf_counter()
    point = _small_control_point(ob, timeout_ms)
    check = control_point_check(*point) if point else None
    ctl_ok = bool(check and check["violates"])
    ctl = {"property": PROPERTY, "obligation": ob.name, "status": "refuted" if point else "unknown",
           "seconds": round(time.perf_counter() - t1, 4), "expected": "refuted", "as_expected": ctl_ok,
           "point": check}
    tight = [{**discharge(c, timeout_ms), "expected": "refuted"} for c in tightness_controls()]
    for t in tight:
        t["as_expected"] = t["status"] == "refuted" and t.get("why") == "goal fails"   # a counterexample, not vacuity
    ctl_ok = ctl_ok and all(t["as_expected"] for t in tight)
    status = ("refuted" if any(r["status"] == "refuted" for r in results)
              else "unknown" if any(r["status"] == "unknown" for r in results) else "proved")
    return {"for_all": FOR_ALL, "status": status if ctl_ok or status != "proved" else "refuted",
            "proved": status == "proved" and ctl_ok, "obligations": results, "control": ctl,
            "tightness": tight, "seconds": round(time.perf_counter() - t0, 3)}


def extend_prove_all(res: dict[str, Any], timeout_ms: int = TIMEOUT_MS) -> dict[str, Any]:
    """Add near-optimality to a `prove_all("optcc")` result: property `near_optimal`, the
    obligation count, failures, and the report under "near_optimal"."""
    return merge_report(res, near_optimal_report(timeout_ms))


def merge_report(res: dict[str, Any], rep: dict[str, Any]) -> dict[str, Any]:
    """`res` with a near-optimality report `rep` merged in (also used for servers)."""
    res = dict(res)
    res["properties"] = {**res["properties"], PROPERTY: rep["status"]}
    res["obligations"] += len(rep["obligations"]) + 1
    res["failures"] = res["failures"] + [r for r in rep["obligations"] if r["status"] != "proved"]
    if not rep["control"]["as_expected"]:
        res["failures"].append({**rep["control"], "why": "the false control was not refuted at a confirmed point"})
    res["obligations"] += len(rep.get("tightness", ()))
    res["failures"] += [{**t, "why": "its statement is not tight: the strict version holds too (a weakened constant?)"}
                        for t in rep.get("tightness", ()) if not t["as_expected"]]
    res["proved"] = res["proved"] and rep["proved"]
    res["seconds"] = round(res["seconds"] + rep["seconds"], 3)
    res[PROPERTY] = rep
    return res
