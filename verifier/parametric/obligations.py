"""One proof obligation (assumptions ⇒ goal, plus the mod side conditions) and its discharge.

`discharge` asks Z3 three things: are the assumptions satisfiable (non-vacuity: a proof from
contradictory assumptions proves nothing, so that counts as refuted), do they imply the side
conditions, do they imply the goal. An obligation with a premise (a relation such as "same
port" that may never hold) whose premise is unsatisfiable under its assumptions is proved
vacuously; its result says so (`"premise": "never holds"`) and prove-all counts them apart. A `sat` answer is a counterexample: the parameters
(p, k, ℓ, s) and the concrete flows of the families the obligation instantiated.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import z3

from optcc.algorithms.families import INT, Params

if TYPE_CHECKING:
    from optcc.algorithms.families import Family, Term
    from verifier.parametric.arith import Z3Term

TIMEOUT_MS = 20000
RETRY_FACTOR = 4      # policy: an obligation that timed out is tried once more with 4x the time (the
#                       timeout is wall time, and a loaded machine can starve a proof that takes ~1 s alone)


@dataclass
class Obligation:
    prop: str                     # the property it belongs to (sum, ports, ...)
    name: str                     # what it states, for people
    assumptions: list[Z3Term]
    goal: Z3Term
    side: list[Z3Term] = field(default_factory=list)
    params: tuple[Any, ...] | None = None  # z3 parameters (Params or a model's own NamedTuple), read back for a counterexample
    flows: list[tuple[Family, tuple[Term, ...]]] = field(default_factory=list)   # (Family, z3 index tuple): flows involved
    premise: list[Z3Term] = field(default_factory=list)  # a relation (same port, same value, j1 < j2)
    #  that may never hold: non-vacuity is checked on `assumptions`, the claim under both


def _value(model: Z3Term, term: Z3Term) -> int | Fraction | str:
    v = model.eval(term, model_completion=True)
    if z3.is_int_value(v):
        n: int = v.as_long()
        return n
    if z3.is_rational_value(v):
        f = v.as_fraction()
        return Fraction(f.numerator, f.denominator)
    return str(v)


def _concrete_flow(fam: Family, P: Any, idx: tuple[Any, ...]) -> dict[str, Any]:
    T = fam.terms(INT, P, *idx)
    return {"family": fam.name, "index": dict(zip(fam.index, idx)), "src": T.src, "dst": T.dst,
            "piece": list(T.piece), "op": fam.op, "start_slots": str(T.box + T.offset),
            "duration_slots": str(T.dur)}


def counterexample(ob: Obligation, model: Z3Term) -> dict[str, Any]:
    out: dict[str, Any] = {"obligation": ob.name}
    if ob.params is not None:
        named: Any = type(ob.params)            # a NamedTuple class: built from its fields
        P = named(*(_value(model, t) if isinstance(t, z3.ExprRef) else t for t in ob.params))
        if isinstance(P, Params):
            out.update({"p": P.p, "k": P.k, "ell": str(P.ell), "s": P.s})
        else:
            out.update({name: v if isinstance(v, int) else str(v) for name, v in P._asdict().items()})
        flows: list[dict[str, Any]] = []
        for fam, idx in ob.flows:
            cidx = tuple(_value(model, t) if isinstance(t, z3.ExprRef) else t for t in idx)
            try:
                flows.append(_concrete_flow(fam, P, cidx))
            except (ZeroDivisionError, TypeError, ValueError) as e:
                flows.append({"family": fam.name, "index": dict(zip(fam.index, cidx)), "error": str(e)})
        out["flows"] = flows
    return out


def discharge(ob: Obligation, timeout_ms: int = TIMEOUT_MS) -> dict[str, Any]:
    """{"status": proved|refuted|unknown, "seconds", "counterexample" (refuted), "why"}; an
    `unknown` from a timeout is retried once with RETRY_FACTOR times the time."""
    out = _discharge(ob, timeout_ms)
    why = out.get("why", "")
    if out["status"] == "unknown" and ("timeout" in why or "canceled" in why):
        again = _discharge(ob, timeout_ms * RETRY_FACTOR)
        again["seconds"] = round(again["seconds"] + out["seconds"], 4)
        return again
    return out


def _discharge(ob: Obligation, timeout_ms: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    solver = z3.Solver()
    solver.set(timeout=timeout_ms)
    solver.add(*ob.assumptions)

    def done(status: str, why: str | None = None, model: Z3Term = None) -> dict[str, Any]:
        out: dict[str, Any] = {"property": ob.prop, "obligation": ob.name, "status": status,
               "seconds": round(time.perf_counter() - t0, 4)}
        if why:
            out["why"] = why
        if model is not None:
            out["counterexample"] = counterexample(ob, model)
        return out

    r = solver.check()
    if r == z3.unsat:
        return done("refuted", "vacuous: the assumptions are unsatisfiable")
    if r == z3.unknown:
        return done("unknown", "non-vacuity check: " + solver.reason_unknown())
    solver.add(*ob.premise)
    vacuous = False
    if ob.premise:                     # the relation may never hold: then the goal holds vacuously
        r = solver.check()
        vacuous = r == z3.unsat
    for what, claim in (("side condition (mod range)", z3.And(*ob.side)), ("goal", ob.goal)):
        if what.startswith("side") and not ob.side:
            continue
        solver.push()
        solver.add(z3.Not(claim))
        r = solver.check()
        if r == z3.sat:
            model = solver.model()
            if isinstance(ob.params, Params):  # prefer a small counterexample when there is one
                solver.push()
                solver.add(ob.params.p <= 8, ob.params.k <= 3)
                if solver.check() == z3.sat:
                    model = solver.model()
                solver.pop()
            return done("refuted", what + " fails", model)
        if r == z3.unknown:
            return done("unknown", what + ": " + solver.reason_unknown())
        solver.pop()
    out = done("proved")
    if vacuous:
        out["premise"] = "never holds"
    return out
