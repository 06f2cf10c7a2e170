"""prove_all: every obligation of one construction's families, for all sizes, in one Z3 run."""
from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from typing import Any

import z3

from optcc.errors import OptccError
from verifier.parametric import generic as G
from verifier.parametric import lemmas
from verifier.parametric import local as L
from verifier.parametric import streaming_order as SO
from verifier.parametric.obligations import TIMEOUT_MS, Obligation, discharge

PROPERTIES = ("lemmas", "well_formed", "sum", "ports", "causality", "finish", "duration", "bound", "local",
              "streaming_order")
# servers also proves its instance (the q ≥ 3 OptCC families or the q = 2 swap) as property "instance",
# and its finish time in closed form for q ≤ 2 as "finish_q_le_2"
REPORTED = PROPERTIES + ("instance", "finish_q_le_2")
ALGOS = ("ring", "optcc", "servers")


def obligations(algo: str, families: Any = None) -> tuple[str, list[Obligation]]:
    """(for_all text, [Obligation]) for `algo`; `families` replaces its families (mutants; for
    "servers" a `Lift` replaces the lift's formulas, a `Placement` the closed-form placement
    times, a tuple the q = 2 swap families)."""
    common = lemmas.product_lemmas() + [lemmas.box_lemma()] + lemmas.arc_lemmas()
    if algo == "ring":
        from optcc.algorithms.ring import families as ring_families
        from verifier.parametric import ring as R
        fams = families or ring_families.FAMILIES
        C = R.generator_model(fams)
        obs = (common + [R.piece_lemma()] + R.span_lemmas(C) + G.well_formed(C) + G.sum_property(C, R.chain(fams))
               + G.ports(C) + G.causality(C) + R.finish(C) + R.bound(C) + L.obligations(C) + SO.obligations())
        return R.FOR_ALL, obs
    if algo == "optcc":
        from optcc.algorithms.single import families as optcc_families
        from verifier.parametric import optcc as O
        fams = families or optcc_families.FAMILIES
        return O.FOR_ALL, common + O.obligations(fams) + L.obligations(O.generator_model(fams)) + SO.obligations()
    if algo == "servers":
        from optcc.algorithms.servers.families import Lift, Placement
        from verifier.parametric import servers as SV
        lift = families if isinstance(families, Lift) else None
        placement = families if isinstance(families, Placement) else None
        two = families if isinstance(families, tuple) else None
        return SV.FOR_ALL, lemmas.product_lemmas() + [lemmas.box_lemma()] + SV.obligations(lift, two, placement)
    raise OptccError("algo", f"unknown construction {algo!r} (known: {', '.join(ALGOS)})")


def obligations_digest(obs: Sequence[Obligation]) -> str:
    """sha256 of exactly what is proved: every obligation's property, name, assumptions, side
    conditions, premise and goal (Z3 s-expressions)."""
    h = hashlib.sha256()
    for ob in obs:
        parts = [ob.prop, ob.name, z3.And(*ob.assumptions).sexpr(), z3.And(*ob.side).sexpr(),
                 z3.And(*ob.premise).sexpr(), z3.BoolVal(True).sexpr() if ob.goal is True else ob.goal.sexpr()]
        h.update("\0".join(parts).encode() + b"\1")
    return h.hexdigest()


def prove_all(algo: str, families: Any = None, timeout_ms: int = TIMEOUT_MS, fail_fast: bool = False) -> dict[str, Any]:
    """Discharge every obligation; JSON-ready result (no NaN): proved, for_all, properties
    (each proved | refuted | unknown), obligations (count), seconds, failures (with
    counterexamples). `fail_fast`: stop at the first obligation not proved (mutation tests)."""
    t0 = time.perf_counter()
    for_all, obs = obligations(algo, families)
    results: list[dict[str, Any]] = []
    for ob in obs:
        results.append(discharge(ob, timeout_ms))
        if fail_fast and results[-1]["status"] != "proved":
            break
    props: dict[str, str] = {}
    for name in REPORTED:
        mine = [r["status"] for r in results if r["property"] == name]
        if not mine:
            continue
        props[name] = ("refuted" if "refuted" in mine else "unknown" if "unknown" in mine else "proved")
    return {"algo": algo, "proved": all(v == "proved" for v in props.values()), "for_all": for_all,
            "properties": props, "obligations": len(results),
            "seconds": round(time.perf_counter() - t0, 3),
            "failures": [r for r in results if r["status"] != "proved"],
            "premise_never_holds": [{"property": r["property"], "obligation": r["obligation"]}
                                    for r in results if r.get("premise") == "never holds"],
            "obligations_sha256": obligations_digest(obs),
            "z3_version": z3.get_version_string()}
