"""Re-check prove-all's obligations with a second solver, cvc5 (PyPI `cvc5`, the `proofs` extra).

Each obligation is exported as SMT-LIB2 exactly as Z3 discharges it (Z3's own printer of the
solver state: the assumptions, the premise and the negated claim — side conditions and goal
together), and cvc5 must answer `unsat`; the assumptions alone are exported too and must be
`sat` (non-vacuity). cvc5 reads the text, not Z3's objects, so an obligation both solvers decide
is decided twice, by independent code. Nonlinear real queries use cvc5's cylindrical algebraic
coverings (`nl-cov`). A closed-form obligation (rational functions of the parameters with regimes)
is re-checked through its polynomial split (`verifier.parametric.polynomial.parts`):
the cases with denominators cleared and their cover, which together imply the obligation; Z3
proves every part in the same run (so both solvers decide the same text), and cvc5 decides them
where division defeats it on the original. prove-all without `--recheck` proves the originals
only: the parts are the second solver's route, not a second statement.

Proof objects (`proofs_dir`): for every claim cvc5 refutes, it also produces a proof in its own
Cooperating Proof Calculus (CPC, the format the Ethos checker reads) and re-checks it with its
proof checker (`check-proofs`) before answering; the proof is written to a file. The checker is
cvc5's own: no independent checker (Ethos, or Carcara for Alethe) installs from PyPI. A step
the proof leaves unjustified (rule `trust`, or `hole` in Alethe, where cvc5 leaves 53 of the
ring's 62 proofs with holes) is counted.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import z3

from optcc.errors import OptccError
from verifier.parametric.polynomial import parts as split_parts
from verifier.parametric.obligations import TIMEOUT_MS as DEFAULT_TIMEOUT_MS   # the time Z3 gets, per query

PROOF_FORMAT = "cpc"    # measured: cvc5's own calculus leaves no step unjustified on the ring's claims, Alethe 53 of 62

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

    from verifier.parametric.arith import Z3Term
    from verifier.parametric.obligations import Obligation


def _script(constraints: Iterable[Z3Term]) -> str:
    s = z3.Solver()
    s.add(*constraints)
    smt2: str = s.to_smt2()
    return "(set-logic ALL)\n" + smt2


def claim_obligation(claim: Any, prop: str = "lower_bound_lp") -> Obligation:
    """A bounds.proofs Claim (an LP certificate's) as an obligation: its query exactly as
    bounds.proofs.prove decides it (bounds.proofs.z3_query)."""
    from bounds.proofs import z3_query
    from verifier.parametric.obligations import Obligation
    _, _, hyps, goal = z3_query(claim)
    return Obligation(prop, claim.name, hyps, goal)


def queries(ob: Obligation) -> list[tuple[str, str, str]]:
    """(what, expected answer, SMT-LIB2 script) of one obligation."""
    claim = z3.And(*ob.side, ob.goal) if ob.side else ob.goal
    if claim is True:
        claim = z3.BoolVal(True)
    return [("non-vacuity", "sat", _script(ob.assumptions)),
            ("claim", "unsat", _script(list(ob.assumptions) + list(ob.premise) + [z3.Not(claim)]))]


def _cvc5() -> Any:
    try:
        import cvc5
    except ImportError as e:
        raise OptccError("recheck", "cvc5 is not installed: pip install cvc5 (or the project's 'proofs' extra)") from e
    return cvc5


def run_cvc5(script: str, timeout_ms: int = DEFAULT_TIMEOUT_MS, nl_cov: bool = True,
             proof: bool = False) -> tuple[str, str | None]:
    """cvc5's answer ("sat" | "unsat" | "unknown") on an SMT-LIB2 script, in this process, and
    with `proof` the checked proof of an unsat answer (else None)."""
    cvc5 = _cvc5()
    tm = cvc5.TermManager()
    solver = cvc5.Solver(tm)
    solver.setOption("tlimit", str(timeout_ms))
    if nl_cov:
        solver.setOption("nl-cov", "true")
    if proof:
        solver.setOption("produce-proofs", "true")
        solver.setOption("check-proofs", "true")
        solver.setOption("proof-format-mode", PROOF_FORMAT)
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
    text = None
    if proof and answer == "unsat":
        parts = [solver.proofToString(pf) for pf in solver.getProof()]
        text = "\n".join(x.decode() if isinstance(x, bytes) else x for x in parts)
    return answer, text


def _serve(conn: Connection) -> None:
    """The worker's loop: one query in, its answer out, until the pipe closes."""
    while True:
        try:
            script, timeout_ms, nl_cov, proof = conn.recv()
        except EOFError:
            return
        try:
            conn.send(run_cvc5(script, timeout_ms, nl_cov=nl_cov, proof=proof))
        except Exception as e:  # noqa: BLE001 - reported as the answer
            conn.send((f"error: {e}", None))


class Cvc5:
    """cvc5 in one forked worker process that answers queries in turn, killed at a query's time
    limit (cvc5's own limit does not interrupt every procedure) and started afresh for the next.
    One process for a whole run, not one per query: a fork per query (cvc5 imported in each
    child) cost about 0.1 s a query, more than most ring queries take to decide."""

    def __init__(self) -> None:
        self._proc: Any = None
        self._conn: Connection | None = None

    def __enter__(self) -> Cvc5:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._proc is not None:
            if self._proc.is_alive():
                self._proc.kill()
            self._proc.join()
            self._proc = None

    def _ask(self, script: str, timeout_ms: int, nl_cov: bool, proof: bool) -> tuple[str, str | None]:
        import multiprocessing as mp
        if self._proc is not None and not self._proc.is_alive():
            self.close()                              # died after its last answer: start afresh
        if self._conn is None:
            _cvc5()                                   # imported once here, so that the worker inherits it
            ctx = mp.get_context("fork")
            self._conn, child = ctx.Pipe()
            self._proc = ctx.Process(target=_serve, args=(child,), daemon=True)
            self._proc.start()
            child.close()
        assert self._conn is not None
        self._conn.send((script, timeout_ms, nl_cov, proof))
        if not self._conn.poll(timeout_ms / 1000 + 1):
            self.close()
            return ("unknown", None)
        try:
            answer: tuple[str, str | None] = self._conn.recv()
        except EOFError:
            self.close()
            return ("error: the cvc5 worker died", None)
        return answer

    def solve(self, script: str, timeout_ms: int = DEFAULT_TIMEOUT_MS, proof: bool = False) -> tuple[str, str | None]:
        """cvc5's answer (and proof, as run_cvc5), each try within the time limit: first its
        default nonlinear strategy, then `nl-cov` (the other way round for a query over the reals
        alone, where the coverings are complete)."""
        answer: tuple[str, str | None] = ("unknown", None)
        for nl_cov in ((True, False) if " Int)" not in script else (False, True)):
            answer = self._ask(script, timeout_ms, nl_cov, proof)
            if answer[0] in ("sat", "unsat"):
                return answer
        return answer


def solve(script: str, timeout_ms: int = DEFAULT_TIMEOUT_MS, proof: bool = False) -> tuple[str, str | None]:
    """One query decided as `Cvc5.solve` decides it, in a worker of its own."""
    with Cvc5() as worker:
        return worker.solve(script, timeout_ms, proof)


SLOWEST = 10   # queries whose times the result lists
HOLE_RULES = (":rule hole", ":rule trust")   # a step the proof does not justify (Alethe, CPC)


def _proof_file(directory: str, n: int, ob: Obligation, part: int | None = None) -> str:
    import os
    import re
    slug = re.sub(r"[^A-Za-z0-9]+", "-", f"{ob.prop}-{ob.name}").strip("-")[:60]
    return os.path.join(directory, f"{n:04d}{'' if part is None else f'.{part:02d}'}-{slug}.{PROOF_FORMAT}")


def _units(ob: Obligation, timeout_ms: int, unknown: list[dict[str, str]]) -> list[Obligation] | None:
    """The polynomial split cvc5 re-checks in place of `ob`, each part first proved by Z3 (so the
    statement cvc5 decides is one Z3 proves too); None when `ob` has none, or when Z3 does not
    prove a part (listed; cvc5 then gets the obligation as it is)."""
    from verifier.parametric.obligations import discharge
    if not split_parts(ob):
        return None
    for part in split_parts(ob):
        r = discharge(part, timeout_ms)
        if r["status"] != "proved":
            unknown.append({"obligation": part.name, "property": ob.prop, "query": "split",
                            "cvc5": f"not used: Z3 {r['status']} ({r.get('why', '')})"})
            return None
    return split_parts(ob)


def recheck(obs: Sequence[Obligation], timeout_ms: int = DEFAULT_TIMEOUT_MS,
            progress: Callable[[int, int], object] | None = None, proofs_dir: str | None = None) -> dict[str, Any]:
    """Every obligation's queries through cvc5 (`solve`), a closed form's through its polynomial
    split (`split`: how many; Z3 proves each part here, `parts_proved_by_z3`): counts of agreement,
    disagreement and timeouts, with the obligations (or parts) that did not agree and the `SLOWEST`
    queries' times (where a re-check spends its time); with `proofs_dir`, every refuted claim's
    checked proof written there and counted (files, bytes, steps cvc5 left as holes)."""
    from optcc.files import write_text_atomic
    t0 = time.perf_counter()
    agree = 0
    disagree: list[dict[str, str]] = []
    unknown: list[dict[str, str]] = []
    written, size, holes = 0, 0, []

    asked, split, z3_parts = 0, 0, 0
    took: list[tuple[float, str, str]] = []
    with Cvc5() as worker:
        for n, ob in enumerate(obs):
            units = _units(ob, timeout_ms, unknown)
            split += units is not None
            z3_parts += len(units or ())
            for u, unit, what, want, script in [(u, x, *q) for u, x in enumerate(units or [ob]) for q in queries(x)]:
                asked += 1
                t = time.perf_counter()
                got, text = worker.solve(script, timeout_ms, proof=proofs_dir is not None and what == "claim")
                took.append((time.perf_counter() - t, unit.name, what))
                if got == want:
                    agree += 1
                    if text is not None and proofs_dir is not None:
                        path = _proof_file(proofs_dir, n, unit, u if units else None)
                        write_text_atomic(path, text, "--proofs")
                        written += 1
                        size += len(text.encode())
                        if any(h in text for h in HOLE_RULES):
                            holes.append(path)
                elif got == "unknown" or got.startswith("error"):
                    unknown.append({"obligation": unit.name, "property": ob.prop, "query": what, "cvc5": got})
                else:
                    disagree.append({"obligation": unit.name, "property": ob.prop, "query": what, "cvc5": got})
            if progress is not None:
                progress(n + 1, len(obs))
    out = {"solver": "cvc5", "obligations": len(obs), "split": split, "parts_proved_by_z3": z3_parts,
           "queries": asked, "agree": agree,
           "disagree": disagree, "unknown": unknown, "seconds": round(time.perf_counter() - t0, 3),
           "slowest": [{"obligation": name, "query": what, "seconds": round(dt, 3)}
                       for dt, name, what in sorted(took, key=lambda x: -x[0])[:SLOWEST]]}
    if proofs_dir is not None:
        out["proofs"] = {"dir": proofs_dir, "written": written, "bytes": size, "with_holes": holes,
                         "checker": "cvc5 check-proofs", "format": PROOF_FORMAT}
    return out
