"""Re-check prove-all's obligations with a second solver, cvc5 (PyPI `cvc5`, the `proofs` extra).

Each obligation is exported as SMT-LIB2 exactly as Z3 discharges it (Z3's own printer of the
solver state: the assumptions, the premise and the negated claim — side conditions and goal
together), and cvc5 must answer `unsat`; the assumptions alone are exported too and must be
`sat` (non-vacuity). cvc5 reads the text, not Z3's objects, so an obligation both solvers decide
is decided twice, by independent code. Nonlinear real queries use cvc5's cylindrical algebraic
coverings (`nl-cov`).
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import z3

from optcc.errors import OptccError
from verifier.parametric.obligations import TIMEOUT_MS as DEFAULT_TIMEOUT_MS   # the time Z3 gets, per query

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

    from verifier.parametric.arith import Z3Term
    from verifier.parametric.obligations import Obligation


def _script(constraints: Iterable[Z3Term]) -> str:
    s = z3.Solver()
    s.add(*constraints)
    smt2: str = s.to_smt2()
    return "(set-logic ALL)\n" + smt2


def queries(ob: Obligation) -> list[tuple[str, str, str]]:
    """(what, expected answer, SMT-LIB2 script) of one obligation."""
    claim = z3.And(*ob.side, ob.goal) if ob.side else ob.goal
    if claim is True:
        claim = z3.BoolVal(True)
    return [("non-vacuity", "sat", _script(ob.assumptions)),
            ("claim", "unsat", _script(list(ob.assumptions) + list(ob.premise) + [z3.Not(claim)]))]


def run_cvc5(script: str, timeout_ms: int = DEFAULT_TIMEOUT_MS, nl_cov: bool = True) -> str:
    """cvc5's answer ("sat" | "unsat" | "unknown") on an SMT-LIB2 script."""
    try:
        import cvc5
    except ImportError as e:
        raise OptccError("recheck", "cvc5 is not installed: pip install cvc5 (or the project's 'proofs' extra)") from e
    tm = cvc5.TermManager()
    solver = cvc5.Solver(tm)
    solver.setOption("tlimit", str(timeout_ms))
    if nl_cov:
        solver.setOption("nl-cov", "true")
    parser = cvc5.InputParser(solver)
    parser.setStringInput(cvc5.InputLanguage.SMT_LIB_2_6, script, "obligation")
    sm = parser.getSymbolManager()
    answer = "unknown"
    while True:
        cmd = parser.nextCommand()
        if cmd.isNull():
            break
        out = cmd.invoke(solver, sm).strip()
        if out in ("sat", "unsat", "unknown"):
            answer = out
    return answer


def _child(conn: Connection, script: str, timeout_ms: int, nl_cov: bool) -> None:
    try:
        conn.send(run_cvc5(script, timeout_ms, nl_cov=nl_cov))
    except Exception as e:  # noqa: BLE001 - reported as the answer
        conn.send(f"error: {e}")
    conn.close()


def solve(script: str, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> str:
    """cvc5's answer, each try in a forked process killed at the time limit (cvc5's own limit does
    not interrupt every procedure): first its default nonlinear strategy, then `nl-cov`."""
    import multiprocessing as mp
    ctx = mp.get_context("fork")
    answer = "unknown"
    for nl_cov in (False, True):
        parent, child = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_child, args=(child, script, timeout_ms, nl_cov), daemon=True)
        proc.start()
        child.close()
        answer = parent.recv() if parent.poll(timeout_ms / 1000 + 1) else "unknown"
        if proc.is_alive():
            proc.kill()
        proc.join()
        parent.close()
        if answer in ("sat", "unsat"):
            return answer
    return answer


def recheck(obs: Sequence[Obligation], timeout_ms: int = DEFAULT_TIMEOUT_MS,
            progress: Callable[[int, int], object] | None = None) -> dict[str, Any]:
    """Every obligation's queries through cvc5 (`solve`): counts of agreement, disagreement and
    timeouts, with the obligations that did not agree."""
    t0 = time.perf_counter()
    agree = 0
    disagree: list[dict[str, str]] = []
    unknown: list[dict[str, str]] = []
    for n, ob in enumerate(obs):
        for what, want, script in queries(ob):
            got = solve(script, timeout_ms)
            if got == want:
                agree += 1
            elif got == "unknown" or got.startswith("error"):
                unknown.append({"obligation": ob.name, "property": ob.prop, "query": what, "cvc5": got})
            else:
                disagree.append({"obligation": ob.name, "property": ob.prop, "query": what, "cvc5": got})
        if progress is not None:
            progress(n + 1, len(obs))
    return {"solver": "cvc5", "queries": 2 * len(obs), "agree": agree, "disagree": disagree, "unknown": unknown,
            "seconds": round(time.perf_counter() - t0, 3)}
