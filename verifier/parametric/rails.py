"""The rails composition theorem (verifier.rails_composition, conditions R1-R4) as Z3 obligations
for every q ≥ 2 servers and g ≥ 2 GPUs per server.

One piece c of rail l, server s, its rail GPU ("home") s·g + l; values are integer coefficients
of one arbitrary input x_{s0, j0} (every value is a linear combination of the inputs, so
checking every coefficient is checking the value). Machine-checked here:
- timing (reals): under R1 (no NIC flow of c writes a GPU j ≠ l) and R3 (every NVLink flow is
  an add into home landing by the rail's first touch ft, or a copy out of home starting at or
  after its last landing lw), the add from GPU j starts before anything writes (s·g + j, c), so
  it carries x_{s, j}; only the adds land at home by ft, the rail's landings come after it; a
  copy reads home after every landing there; the rail's relabelling t ↦ (t − D)/w keeps every
  start-versus-landing order and scales every NIC duration by 1/w;
- values (the step of each induction): home's value after the terms of GPUs j < n is
  [s = s0 ∧ j0 < n], so after all g the server sum's coefficient [s = s0]; the rail, an
  AllReduce of the values its nodes hold at their first touch (R2), leaves Σ_{s < q} [s = s0]
  = 1 at every home (invariant over s); every other GPU gets that value by its one copy.
Argued, not machine-checked: that the g − 1 commuting adds may be summed in index order (one
add from each GPU j ≠ l, R3); that a rail is linear in the values its nodes hold at their first
touch and `prove_allreduce` of the relabelled rail establishes R2 (the per-instance verifier's
semantics); that rails_composition's checks establish R1, R3 and R4 on the schedule.
Controls (false, refuted): rails overlap (a NIC flow of another rail writes GPU j), a bracket
misses a GPU, an all-gather copy starts before the last landing, an all-gather adds.
"""
from __future__ import annotations

import functools
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import z3

from verifier.parametric.obligations import TIMEOUT_MS, Obligation, discharge

if TYPE_CHECKING:
    from verifier.parametric.arith import Z3Term

FOR_ALL = "all q ≥ 2 servers, g ≥ 2 GPUs per server, every rail l < g, server s < q and input x_{s0, j0}"
PROPERTY = "composition"


def _params() -> tuple[tuple[Z3Term, ...], list[Z3Term]]:
    q, g, l, s, s0, j0 = z3.Ints("q g l s s0 j0")
    return (q, g, l, s, s0, j0), [q >= 2, g >= 2, l >= 0, l < g, s >= 0, s < q, s0 >= 0, s0 < q, j0 >= 0, j0 < g]


def _ob(name: str, assume: Iterable[Z3Term], goal: Z3Term, premise: Iterable[Z3Term] = ()) -> Obligation:
    _, base = _params()
    return Obligation(PROPERTY, f"rails: {name}", base + list(assume), goal, [], None, [], list(premise))


def _inp(s: Z3Term, j: Z3Term, s0: Z3Term, j0: Z3Term) -> Z3Term:
    return z3.If(z3.And(s == s0, j == j0), 1, 0)


def timing_obligations(r1: bool = True, ag_after_lw: bool = True) -> list[Obligation]:
    """`r1`, `ag_after_lw` False: the controls (a write to GPU j by another rail's NIC flow; a
    copy not constrained to start at or after lw)."""
    a_st, a_d, ft, lw, w_st, w_d, r_st, r_d, c_st = z3.Reals("add_start add_dur ft lw write_start write_dur "
                                                             "rail_start rail_dur copy_start")
    add = [a_d > 0, a_st + a_d <= ft]                          # R3: the add lands by the first touch
    rail = [r_st >= ft, r_d > 0, r_st + r_d <= lw]             # a rail flow on home starts after ft (it touches home)
    copy_w = [w_st >= lw, w_d > 0] if r1 else [w_d > 0]        # R1 + R3: writes to GPU j ≠ l are copies
    out = [
        _ob("the add from GPU j ≠ l starts before anything writes (s·g + j, c), so it carries x_{s, j}",
            add + rail + copy_w, a_st < w_st + w_d),
        _ob("only the adds land at home by the first touch: every rail landing there comes after ft",
            add + rail, z3.And(a_st + a_d <= ft, r_st + r_d > ft)),
    ]
    copy = [c_st >= lw] if ag_after_lw else []
    out.append(_ob("an all-gather copy reads home after every landing there (adds and rail flows)",
                   add + rail + copy, z3.And(c_st >= a_st + a_d, c_st >= r_st + r_d)))
    t1, d1, t2, D, w, x, m, rate = z3.Reals("t1 d1 t2 D w x m rate")
    out.append(_ob("the rail's relabelling t ↦ (t − D)/w keeps start-versus-landing order and scales a NIC "
                   "duration x·m/rate by 1/w", [w > 0, x > 0, m >= 1, rate > 0, d1 > 0],
                   z3.And((t1 + d1 <= t2) == ((t1 - D) / w + d1 / w <= (t2 - D) / w),
                          (x / w) * m / rate == (x * m / rate) / w)))
    return out


def value_obligations(skip: Z3Term = None, ag_adds: bool = False) -> list[Obligation]:
    """`skip` (an int term): the bracket misses GPU `skip`'s add (control); `ag_adds`: the
    all-gather adds to the receiver's value instead of copying (control)."""
    (q, g, l, s, s0, j0), _ = _params()
    n = z3.Int("n")
    acc = z3.Function("acc", z3.IntSort(), z3.IntSort(), z3.IntSort())      # home's value after GPUs j < n
    tot = z3.Function("tot", z3.IntSort(), z3.IntSort())                    # Σ over servers < n

    def inv(sv: Z3Term, nv: Z3Term) -> Z3Term:
        return acc(sv, nv) == z3.If(z3.And(sv == s0, j0 < nv), 1, 0)

    term = _inp(s, n, s0, j0)
    if skip is not None:
        term = z3.If(z3.And(n == skip, n != l), 0, term)
    out = [
        _ob("RS: before any term home's coefficient is 0 (the induction's base)", [acc(s, 0) == 0], inv(s, 0)),
        _ob("RS: adding GPU n's term (home's own input for n = l, the add from GPU n else) keeps the invariant",
            [n >= 0, n < g, inv(s, n), acc(s, n + 1) == acc(s, n) + term], inv(s, n + 1)),
        _ob("RS: after all g terms home holds the server sum's coefficient [s = s0]", [inv(s, g)],
            acc(s, g) == z3.If(s == s0, 1, 0)),
    ]
    u = z3.If(n == s0, 1, 0)                                                 # node n's value at its first touch

    def tinv(nv: Z3Term) -> Z3Term:
        return tot(nv) == z3.If(s0 < nv, 1, 0)
    out += [
        _ob("rail: Σ over no server is 0", [tot(0) == 0], tinv(0)),
        _ob("rail: adding server n's sum [n = s0] keeps Σ_{s < n} = [s0 < n]",
            [n >= 0, n < q, tinv(n), tot(n + 1) == tot(n) + u], tinv(n + 1)),
        _ob("rail: an AllReduce of the server sums leaves Σ_{s < q} = 1 at every home (the full sum)", [tinv(q)],
            tot(q) == 1),
    ]
    j, F = z3.Int("j"), z3.Int("F")
    before = _inp(s, j, s0, j0)                                              # GPU j ≠ l holds its input until its copy
    got = before + F if ag_adds else F
    out.append(_ob("AG: every GPU of the server ends with home's final value (home keeps it, GPU j ≠ l gets its "
                   "one copy)", [j >= 0, j < g, F == 1], z3.If(j == l, F, got) == 1))
    return out


def controls() -> list[Obligation]:
    """Each a false variant of one step; all must be refuted."""
    skipped = z3.Int("skipped")
    named = [("rails overlap: another rail's NIC flow writes GPU j at any time", timing_obligations(r1=False)[0]),
             ("an all-gather copy may start before the last landing", timing_obligations(ag_after_lw=False)[2]),
             ("a bracket misses one GPU's add", value_obligations(skip=skipped)[1]),
             ("the all-gather adds instead of copying", value_obligations(ag_adds=True)[-1])]
    return [Obligation(ob.prop, "CONTROL (false): " + name + ": " + ob.name, ob.assumptions, ob.goal, ob.side,
                       ob.params, ob.flows, ob.premise) for name, ob in named]


def obligations() -> list[Obligation]:
    return timing_obligations() + value_obligations()


@functools.lru_cache(maxsize=1)
def composition_theorem(timeout_ms: int = TIMEOUT_MS) -> dict[str, Any]:
    """JSON-ready: every obligation's status, every control's, and `status` "proved (Z3, all q, g)"
    iff all obligations are proved and all controls refuted (cached: it does not depend on the schedule)."""
    t0 = time.perf_counter()
    obs = [discharge(ob, timeout_ms) for ob in obligations()]
    ctl = [discharge(ob, timeout_ms) for ob in controls()]
    ok = (all(r["status"] == "proved" for r in obs)
          and all(r["status"] == "refuted" and r.get("why") == "goal fails" for r in ctl))
    strip = ("property", "obligation", "status")
    return {"status": "proved (Z3, all q, g)" if ok else "NOT proved", "proved": ok, "for_all": FOR_ALL,
            "obligations": [{k: r[k] for k in strip} for r in obs],
            "controls": [{k: r[k] for k in strip} for r in ctl],
            "argued": ["the g − 1 commuting adds summed in index order (one add from each GPU j ≠ l, R3)",
                       "a rail is linear in its nodes' values at their first touch, and prove_allreduce of the "
                       "relabelled rail establishes R2",
                       "rails_composition's per-instance checks establish R1, R3 and R4"],
            "seconds": round(time.perf_counter() - t0, 3)}
