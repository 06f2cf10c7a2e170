"""Every obligation's false control: the statement one step stronger, which must be refuted.

A proved statement could be true for a trivial reason (a goal that became a tautology, a bound
with slack after a constant was relaxed, a relation that is never used); its control, refuted
with a counterexample, shows it is not. One rule per shape of obligation, the first that applies
(RULES, in order):

- *strict*: a goal with non-strict inequalities (a ≤ b, a ≥ b, anywhere under ∧, ∨) gets every
  one strict: one integer step (a ≤ b − 1) or the attained real bound excluded. Refuted: some
  bound of the goal is attained, so none has slack. Finish bounds, port and causality windows
  (back to back), ranges, lower bounds.
- *premise*: a goal without such atoms whose obligation has a premise (same port, same value,
  chain positions j1 < j2), or any obligation whose premise never holds, is claimed without its
  premise. Refuted: the relation is what the goal needs (for a vacuous one: the goal is not
  true of every pair, so "never holds" carries it).
- *range*: otherwise (value equalities of the sum invariant, durations, a rank's enumeration,
  lemmas) the goal is claimed under the parameters' range only: every assumption on anything
  else (a flow's index domain, a chain position's segment, a node, a lemma's hypotheses) is
  dropped. Refuted: the goal is about those indices, not true of any term.
- *antecedent*: otherwise, a goal made of implications (a ⇒ b, under ∧) is claimed with every
  antecedent dropped. Refuted: each case's condition is what its conclusion needs (a lemma such
  as "a = 0 ⇒ a·b = 0", a size positive only where its regime holds).

Where the first rule's control holds (a bound with slack: a pair of flows never back to back),
the *premise* control is the fallback: the goal without its premise, refuted, shows the relation
is what the goal needs, so a goal replaced by True is caught, though a bound relaxed within its
slack is not (the pins catch that). Where that holds too, the *antecedent* control is the last
fallback. The *range* control is no fallback: for a bound, dropping a flow's index domain is refuted by indices outside it, whatever
the bound says.

An obligation with no refuted control fails `check_controls`; a statement for which no rule
gives a false twin must be changed or its control registered by hand.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import z3

from verifier.parametric.obligations import TIMEOUT_MS, Obligation, _discharge

_STRICT = {z3.Z3_OP_LE: lambda a, b: a < b, z3.Z3_OP_GE: lambda a, b: a > b}


def _strict(e: z3.ExprRef, positive: bool = True) -> tuple[z3.ExprRef, int]:
    """e with every non-strict inequality at positive polarity made strict; how many."""
    if not z3.is_app(e) or not z3.is_bool(e):
        return e, 0
    k = e.decl().kind()
    if positive and k in _STRICT and not z3.is_bool(e.arg(0)):
        return _STRICT[k](e.arg(0), e.arg(1)), 1
    if k in (z3.Z3_OP_AND, z3.Z3_OP_OR):
        kids = [_strict(c, positive) for c in e.children()]
        return (z3.And if k == z3.Z3_OP_AND else z3.Or)(*[c for c, _ in kids]), sum(n for _, n in kids)
    if k == z3.Z3_OP_IMPLIES:
        rhs, n = _strict(e.arg(1), positive)
        return z3.Implies(e.arg(0), rhs), n
    return e, 0


def _goal(ob: Obligation) -> z3.ExprRef:
    return z3.BoolVal(True) if ob.goal is True else ob.goal


def strict_rule(ob: Obligation) -> Obligation | None:
    goal, n = _strict(_goal(ob))
    if n == 0:
        return None
    return Obligation(ob.prop, f"CONTROL (strict): {ob.name}", list(ob.assumptions), goal, [],
                      ob.params, ob.flows, list(ob.premise))


def premise_rule(ob: Obligation) -> Obligation | None:
    if not ob.premise:
        return None
    return Obligation(ob.prop, f"CONTROL (without its premise): {ob.name}", list(ob.assumptions), _goal(ob), [],
                      ob.params, ob.flows)


def _names(e: z3.ExprRef) -> set[str]:
    out: set[str] = set()
    todo, seen = [e], set()
    while todo:
        x = todo.pop()
        if x.get_id() in seen:
            continue
        seen.add(x.get_id())
        if z3.is_const(x) and x.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            out.add(x.decl().name())
        todo.extend(x.children())
    return out


def range_rule(ob: Obligation) -> Obligation | None:
    params = {str(t) for t in (ob.params or ()) if isinstance(t, z3.ExprRef)}
    keep = [a for a in ob.assumptions if not isinstance(a, z3.ExprRef) or _names(a) <= params]
    if len(keep) == len(ob.assumptions):
        return None
    return Obligation(ob.prop, f"CONTROL (parameters' range only): {ob.name}", keep, _goal(ob), [],
                      ob.params, ob.flows, list(ob.premise))


def _without_antecedents(e: z3.ExprRef) -> tuple[z3.ExprRef, int]:
    """e with every implication at the top (under ∧) replaced by its conclusion; how many."""
    if not z3.is_app(e) or not z3.is_bool(e):
        return e, 0
    k = e.decl().kind()
    if k == z3.Z3_OP_IMPLIES:
        return _without_antecedents(e.arg(1))[0], 1
    if k == z3.Z3_OP_AND:
        kids = [_without_antecedents(c) for c in e.children()]
        return e.decl()(*[c for c, _ in kids]), sum(n for _, n in kids)
    return e, 0


def antecedent_rule(ob: Obligation) -> Obligation | None:
    goal, n = _without_antecedents(_goal(ob))
    if n == 0:
        return None
    return Obligation(ob.prop, f"CONTROL (without its antecedents): {ob.name}", list(ob.assumptions), goal, [],
                      ob.params, ob.flows, list(ob.premise))


RULES: tuple[tuple[str, Callable[[Obligation], Obligation | None]], ...] = (
    ("strict", strict_rule), ("premise", premise_rule), ("range", range_rule), ("antecedent", antecedent_rule))


def premise_never_holds(ob: Obligation, timeout_ms: int = TIMEOUT_MS) -> bool:
    """Z3 shows the premise unsatisfiable under the assumptions (the obligation holds vacuously)."""
    if not ob.premise:
        return False
    s = z3.Solver()
    s.set(timeout=timeout_ms)
    s.add(*ob.assumptions, *ob.premise)
    return bool(s.check() == z3.unsat)


def control(ob: Obligation, vacuous: bool = False) -> tuple[str, Obligation] | None:
    """(rule, control) of an obligation: the first rule that applies; for an obligation whose
    premise never holds (`vacuous`) the premise rule comes first (a stricter goal under a premise
    that never holds would hold vacuously too)."""
    rules = sorted(RULES, key=lambda r: r[0] != "premise") if vacuous else RULES
    for name, rule in rules:
        c = rule(ob)
        if c is not None:
            return name, c
    return None


def check_controls(obs: Sequence[Obligation], timeout_ms: int = TIMEOUT_MS,
                   small: Callable[[Any], list[z3.ExprRef]] | None = None) -> dict[str, Any]:
    """Discharge every obligation's control; each must be refuted by a counterexample (not by
    vacuity), or else its premise control, or else its antecedent control (the fallbacks). `small(params)`: extra bounds (small p, k) that keep the search short; a
    counterexample within them is one of the control itself. JSON-ready counts by rule and the
    controls not refuted."""
    t0 = time.perf_counter()
    by_rule: dict[str, int] = {}
    failed: list[dict[str, Any]] = []
    def refuted(c: Obligation) -> dict[str, Any]:
        if small is not None and ob.params is not None:
            c.assumptions = c.assumptions + small(ob.params)
        return _discharge(c, timeout_ms)

    for ob in obs:
        rc = control(ob, premise_never_holds(ob, timeout_ms))
        if rc is None:
            failed.append({"obligation": ob.name, "property": ob.prop, "rule": None, "status": "no control"})
            continue
        rule, c = rc
        fallbacks = [(FALLBACK, premise_rule(ob) if rule != "premise" else None),
                     (ANTECEDENT_FALLBACK, antecedent_rule(ob) if rule != "antecedent" else None)]
        by_rule[rule] = by_rule.get(rule, 0) + 1
        r = refuted(c)
        if _refuted(r):
            continue
        used = next((name for name, f in fallbacks if f is not None and _refuted(refuted(f))), None)
        if used is not None:
            by_rule[used] = by_rule.get(used, 0) + 1
            continue
        failed.append({"obligation": ob.name, "property": ob.prop, "rule": rule, "status": r["status"],
                       "why": r.get("why", "the stronger statement holds too")})
    return {"controls": len(obs), "by_rule": by_rule, "not_refuted": failed,
            "seconds": round(time.perf_counter() - t0, 3)}


FALLBACK = "premise, as fallback"    # by_rule: statements guarded by their premise control instead
ANTECEDENT_FALLBACK = "antecedent, as fallback"   # … by their antecedent control (the last fallback)


def _refuted(r: dict[str, Any]) -> bool:
    """Refuted by a counterexample, not by vacuity."""
    return bool(r["status"] == "refuted" and r.get("why") == "goal fails")
