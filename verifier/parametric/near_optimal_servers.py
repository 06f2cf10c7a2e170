"""Near-optimality of multi-GPU OptCC with one straggler server (optcc_servers), for every size.

T is the servers finish time (derived, optcc/algorithms/servers/build.py, optcc_server_slot_time):
- q = 2: T = max(ℓ/g + W/k, W), W = ν = 2(g−1)/(g·s_nv), read from families.servers.PLACEMENT,
  the closed form that prove-all's property finish_q_le_2 proves is the schedule's finish;
- q ≥ 3: T = T_1(q)/g + 3c, T_1 = optcc_slot_time on q nodes (verifier.parametric.optcc.closed_form),
  c = (g−1)δ/(g·s_nv), δ the instance's shard; valid when s_nv ≥ g − 1 and W ≤ T_1/g (assumed
  here). That this closed form is the schedule's finish is checked per instance (tests), not proved.
Bounds (units of n/B): Theorem 3 (paper) B3 = max(2ℓ(p−g)/(g(ℓ(p−g)+g)), ℓ/g) at p = q·g; the
server-level fluid LP optimum max(B3, ν) (lp_models.duals, certified for every size); the
exclusive single-straggler optimum on q servers at 1/g of the data, T_ex(q)/g (derived,
bounds.closed_form.exclusive_single_straggler_optimum).

Statements (derived here; Z3, nonlinear real arithmetic over real q, g, k (k = 1 or k ≥ 2) and ℓ,
so for every integer; the control over integers g, k):
- B3(q·g) = B1(q)/g for q ≥ 2 (Theorem 3 is Theorem 1 on the servers, scaled), and B3 = ℓ/g at q = 2.
- q = 2: max(B3, ν) ≤ T ≤ (1 + 1/k)·max(B3, ν), tight at ν = ℓ/g; so T ≤ (1 + 1/k)·B3 when ν ≤ B3.
- q ≥ 3, s_nv ≥ g − 1 (the formula T_1/g + 3c; W ≤ T_1/g is not needed for the ratio):
  ℓ ≥ 2: T ≤ (1 + 1/k + 3/(2k(q−1)))·B3, tight at ℓ = 2, s_nv = g − 1 (with W ≤ T_1/g);
  ℓ < 2: T_1 ≤ (1 + 2/k)·T_ex(q) and 3c ≤ 3/(k(q−1))·T_ex(q)/g, so
  T ≤ (1 + 2/k + 3/(k(q−1)))·T_ex(q)/g; and T_ex(q)/g ≥ B3.
- Control (false, must be refuted): q = 2: T ≤ (1 + 1/k)·B3 for every NVLink speed. Z3's point
  is re-evaluated with the project's Fractions (optcc_server_slot_time, Theorem 3) and by timing
  the generated schedule.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import z3

from optcc.algorithms.families import Params
from optcc.algorithms.servers import families as S
from verifier.parametric import near_optimal as NO
from verifier.parametric.arith import Z3Arith
from verifier.parametric.obligations import TIMEOUT_MS, Obligation, discharge
from verifier.parametric.servers import ServerParams

if TYPE_CHECKING:
    from verifier.parametric.arith import Z3Term

FOR_ALL = ("all q ≥ 2 servers, g ≥ 2, k ≥ 1, ℓ ≥ 1, s_nv > 0 (proved over the reals); q = 2: T is the "
           "proved finish; q ≥ 3: T is optcc_server_slot_time's closed form (s_nv ≥ g − 1, W ≤ T_1/g), "
           "equal to the schedule per instance")
PROPERTY = "near_optimal"


def params(integers: bool = False) -> tuple[ServerParams, list[Z3Term]]:
    q = z3.Real("q")
    g, k = z3.Ints("g k") if integers else z3.Reals("g k")
    ell, s_nv = z3.Reals("ell s_nv")
    P = ServerParams(q, g, k, ell, z3.IntVal(0), s_nv)
    return P, [q >= 2, g >= 2, k >= 1, z3.Or(k == 1, k >= 2), ell >= 1, s_nv > 0]


def _r(x: Z3Term) -> Z3Term:
    return z3.ToReal(x) if x.is_int() else x


def nvlink_work(P: ServerParams) -> Z3Term:
    """ν = W = 2(g−1)/(g·s_nv): the LP's NVLink row (lp_models.duals)."""
    g = _r(P.g)
    return 2 * (g - 1) / (g * P.s_nv)


def theorem3(P: ServerParams) -> Z3Term:
    """Theorem 3 (paper) at p = q·g."""
    g, ell = _r(P.g), P.ell
    n = P.q * g - g
    vol = 2 * ell * n / (g * (ell * n + g))
    return z3.If(vol >= ell / g, vol, ell / g)


def _single(P: ServerParams) -> Params:
    return Params(P.q, _r(P.k), P.ell, 0)


def two_server_time(P: ServerParams) -> Z3Term:
    """q = 2: families.servers.PLACEMENT.finish (the proved finish)."""
    return S.PLACEMENT.finish(Z3Arith(), _r(P.g), _r(P.k), P.ell, P.s_nv)


def shard(P: ServerParams) -> Z3Term:
    """δ of the q-node instance: families.optcc.shard_size over real q."""
    from optcc.algorithms.single import families as F
    return F.shard_size(Z3Arith(), _single(P))


def fill(P: ServerParams) -> Z3Term:
    """c = (g−1)δ/(g·s_nv): one NVLink batch of a shard."""
    g = _r(P.g)
    return (g - 1) * shard(P) / (g * P.s_nv)


def t_ex(P: ServerParams) -> Z3Term:
    return NO.exclusive_optimum(_single(P))


def servers_time(P: ServerParams) -> Z3Term:
    """q ≥ 3: T_1(q)/g + 3c (optcc_server_slot_time's closed form)."""
    return NO.slot_time(_single(P)) / _r(P.g) + 3 * fill(P)


def valid(P: ServerParams) -> list[Z3Term]:
    """optcc_server_slot_time's conditions for q ≥ 3: s_nv ≥ g − 1 and W ≤ T_1/g."""
    g = _r(P.g)
    return [P.s_nv >= g - 1, nvlink_work(P) <= NO.slot_time(_single(P)) / g]


def _ob(name: str, extra: Callable[[ServerParams], list[Z3Term]], goal: Callable[[ServerParams], Z3Term],
        integers: bool = False) -> Obligation:
    P, assume = params(integers)
    return Obligation(PROPERTY, f"servers: {name}", assume + extra(P), goal(P), [], P)


def _max(a: Z3Term, b: Z3Term) -> Z3Term:
    return z3.If(a >= b, a, b)


def obligations() -> list[Obligation]:
    def H(P: ServerParams) -> Z3Term:
        return P.q - 1

    def k(P: ServerParams) -> Z3Term:
        return _r(P.k)

    def lp(P: ServerParams) -> Z3Term:
        return _max(theorem3(P), nvlink_work(P))
    return [
        _ob("Theorem 3 at p = q·g is Theorem 1 at p = q divided by g", lambda P: [],
            lambda P: theorem3(P) == NO.theorem1(_single(P)) / _r(P.g)),
        _ob("q = 2: Theorem 3 = ℓ/g", lambda P: [P.q == 2], lambda P: theorem3(P) == P.ell / _r(P.g)),
        _ob("q = 2: T ≥ max(Theorem 3, ν) (the server LP optimum)", lambda P: [P.q == 2],
            lambda P: two_server_time(P) >= lp(P)),
        _ob("q = 2: T ≤ (1 + 1/k)·max(Theorem 3, ν)", lambda P: [P.q == 2],
            lambda P: two_server_time(P) <= (1 + 1 / k(P)) * lp(P)),
        _ob("q = 2: T = (1 + 1/k)·max(Theorem 3, ν) at ν = ℓ/g (the factor is tight)",
            lambda P: [P.q == 2, nvlink_work(P) == P.ell / _r(P.g)],
            lambda P: two_server_time(P) == (1 + 1 / k(P)) * lp(P)),
        _ob("q = 2, ν ≤ Theorem 3: T ≤ (1 + 1/k)·Theorem 3", lambda P: [P.q == 2, nvlink_work(P) <= theorem3(P)],
            lambda P: two_server_time(P) <= (1 + 1 / k(P)) * theorem3(P)),
        _ob("q ≥ 3, ℓ ≥ 2, s_nv ≥ g − 1: T ≤ (1 + 1/k + 3/(2k(q−1)))·Theorem 3",
            lambda P: [P.q >= 3, P.ell >= 2, P.s_nv >= _r(P.g) - 1],
            lambda P: servers_time(P) <= (1 + 1 / k(P) + 3 / (2 * k(P) * H(P))) * theorem3(P)),
        _ob("q ≥ 3, ℓ = 2, s_nv = g − 1: T = (1 + 1/k + 3/(2k(q−1)))·Theorem 3 (tight)",
            lambda P: [P.q >= 3, P.ell == 2, P.s_nv == _r(P.g) - 1] + valid(P),
            lambda P: servers_time(P) == (1 + 1 / k(P) + 3 / (2 * k(P) * H(P))) * theorem3(P)),
        _ob("q ≥ 3, ℓ < 2: T_1(q) ≤ (1 + 2/k)·T_ex(q)", lambda P: [P.q >= 3, P.ell < 2],
            lambda P: NO.slot_time(_single(P)) <= (1 + 2 / k(P)) * t_ex(P)),
        _ob("q ≥ 3, ℓ < 2, s_nv ≥ g − 1: the NVLink fill and drain 3c ≤ 3/(k(q−1))·T_ex(q)/g",
            lambda P: [P.q >= 3, P.ell < 2, P.s_nv >= _r(P.g) - 1],
            lambda P: 3 * fill(P) <= 3 / (k(P) * H(P)) * t_ex(P) / _r(P.g)),
        _ob("q ≥ 3, ℓ < 2, s_nv ≥ g − 1: T ≤ (1 + 2/k + 3/(k(q−1)))·T_ex(q)/g (by the two above)",
            lambda P: [P.q >= 3, P.ell < 2, P.s_nv >= _r(P.g) - 1,
                       NO.slot_time(_single(P)) <= (1 + 2 / k(P)) * t_ex(P),
                       3 * fill(P) <= 3 / (k(P) * H(P)) * t_ex(P) / _r(P.g)],
            lambda P: servers_time(P) <= (1 + 2 / k(P) + 3 / (k(P) * H(P))) * t_ex(P) / _r(P.g)),
        _ob("T_ex(q)/g ≥ Theorem 3", lambda P: [],
            lambda P: NO.exclusive_optimum(_single(P)) / _r(P.g) >= theorem3(P)),
    ]


def control() -> Obligation:
    """The false "q = 2: T ≤ (1 + 1/k)·Theorem 3 for every NVLink speed" (must be refuted)."""
    return _ob("CONTROL (false): q = 2: T ≤ (1 + 1/k)·Theorem 3 at every NVLink speed", lambda P: [P.q == 2],
               lambda P: two_server_time(P) <= (1 + 1 / _r(P.k)) * theorem3(P), integers=True)


def control_point_check(g: int, k: int, ell: Fraction | int | str, s_nv: Fraction | int | str) -> dict[str, Any]:
    """Re-evaluate the control's point with exact Fractions; time the generated schedule."""
    from bounds.closed_form import lower_bound_straggler_server
    from optcc.algorithms.servers.build import optcc_server_allreduce, optcc_server_slot_time
    from optcc.cluster import Cluster
    from optcc.timing import slot_time as timed

    ell, s_nv = Fraction(ell), Fraction(s_nv)
    slow = {r: ell for r in range(g, 2 * g)} if ell != 1 else None
    cluster = Cluster.build(2 * g, g, slow, bandwidth=1, nvlink_bandwidth=s_nv)
    t = optcc_server_slot_time(cluster, k)
    b3 = lower_bound_straggler_server(2 * g, g, ell)
    bound = (1 + Fraction(1, k)) * b3
    out: dict[str, Any] = {"q": 2, "g": g, "k": k, "ell": str(ell), "s_nv": str(s_nv), "T": str(t), "theorem3": str(b3),
           "bound_1_plus_1_over_k_theorem3": str(bound), "violates": t > bound}
    if g * g * k <= 4000:
        out["schedule_time"] = str(timed(optcc_server_allreduce(cluster, k)))
        out["violates"] = out["violates"] and Fraction(out["schedule_time"]) > bound
    return out


def _frac(m: Z3Term, term: Z3Term) -> Fraction | None:
    v = m.eval(term, model_completion=True)
    if not z3.is_rational_value(v):
        return None
    f = v.as_fraction()
    return Fraction(f.numerator, f.denominator)


def _control_point(ob: Obligation, timeout_ms: int) -> tuple[int, int, Fraction, Fraction] | None:
    """A counterexample (g, k, ℓ, s_nv) of the control, small g, k first; None if Z3 finds none."""
    solver = z3.Solver()
    solver.set(timeout=timeout_ms)
    solver.add(*ob.assumptions, z3.Not(ob.goal))
    P = ob.params
    assert isinstance(P, ServerParams)          # _ob states every obligation over ServerParams
    for cap in (8, 64, None):
        solver.push()
        if cap is not None:
            solver.add(P.g <= cap, P.k <= cap)
        if solver.check() == z3.sat:
            m = solver.model()
            ell, s_nv = _frac(m, P.ell), _frac(m, P.s_nv)
            if ell is not None and s_nv is not None:
                g: int = m.eval(P.g).as_long()
                k: int = m.eval(P.k).as_long()
                return g, k, ell, s_nv
        solver.pop()
    return None


def near_optimal_report(timeout_ms: int = TIMEOUT_MS) -> dict[str, Any]:
    """JSON-ready, as verifier.parametric.near_optimal.near_optimal_report."""
    t0 = time.perf_counter()
    results = [discharge(ob, timeout_ms) for ob in obligations()]
    ob = control()
    t1 = time.perf_counter()
    point = _control_point(ob, timeout_ms)
    check = control_point_check(*point) if point else None
    ctl_ok = bool(check and check["violates"])
    ctl = {"property": PROPERTY, "obligation": ob.name, "status": "refuted" if point else "unknown",
           "seconds": round(time.perf_counter() - t1, 4), "expected": "refuted", "as_expected": ctl_ok,
           "point": check}
    status = ("refuted" if any(r["status"] == "refuted" for r in results)
              else "unknown" if any(r["status"] == "unknown" for r in results) else "proved")
    return {"for_all": FOR_ALL, "status": status if ctl_ok or status != "proved" else "refuted",
            "proved": status == "proved" and ctl_ok, "obligations": results, "control": ctl,
            "seconds": round(time.perf_counter() - t0, 3)}


def extend_prove_all(res: dict[str, Any], timeout_ms: int = TIMEOUT_MS) -> dict[str, Any]:
    """Add near-optimality to a `prove_all("servers")` result (property near_optimal)."""
    return NO.merge_report(res, near_optimal_report(timeout_ms))
