"""Property "sum": every rank's final value of every piece is exactly Σ_r input_r of that piece.

For each final expression E = Σ c_r·x_r (x_r a symbolic real, rank r's input for the piece) we
ask Z3 whether  ∃x: E(x) ≠ Σ_r x_r;  `unsat` is the proof. Work is shared three ways:
- pieces whose operation sequence is identical up to renaming ranks (verifier.events
  .piece_signature) are executed once;
- expressions are hash-consed (verifier.linear), so each distinct one is built once;
- Z3 sees one query per distinct expression up to a permutation of the ranks (its multiset of
  coefficients), because permuting the variables of a query does not change its answer.
"""
from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING, Any

import z3

from verifier.events import piece_signature
from verifier.linear import ExpressionTable, execute_signature
from verifier.provenance import first_wrong_write, run_piece

if TYPE_CHECKING:
    from collections.abc import Iterable

    from optcc.schedule import Schedule
    from optcc.timing import IntegerTimes

ClassKey = tuple[tuple[int, int], ...]     # sorted (coefficient, count) pairs: verifier.linear.ExpressionTable.class_key


class SumChecker:
    def __init__(self, schedule: Schedule, grid: IntegerTimes, events: list[list[tuple[int, int, int]]]) -> None:
        self.schedule = schedule
        self.grid = grid
        self.events = events
        self.p = schedule.cluster.p
        self.stats: dict[str, int] = {}

    def check(self) -> tuple[bool, dict[str, Any] | None]:
        """Return (ok, counterexample or None)."""
        p = self.p
        groups: dict[tuple[tuple[int, ...], ...], list[int]] = {}
        for k, ev in enumerate(self.events):
            groups.setdefault(piece_signature(self.schedule, ev), []).append(k)
        table = ExpressionTable()
        class_ok: dict[ClassKey, bool] = {}
        bad_pieces: list[int] = []
        for sig, members in groups.items():
            finals = execute_signature(sig, table)
            keys = {table.class_key(i, p) for i in finals.values()}
            if len(finals) < p:                      # ranks that never touch the piece keep x_r
                keys.add(table.class_key(table.unit(0), p) if p > 1 else ((1, 1),))
            ok = True
            for key in keys:
                if key not in class_ok:
                    class_ok[key] = _prove_class(key, p)
                ok = ok and class_ok[key]
            if not ok:
                bad_pieces.append(min(members))
        self.stats = {"pieces": len(self.events), "piece_groups": len(groups),
                      "expressions": len(table.coefs), "z3_queries": len(class_ok)}
        if not bad_pieces:
            return True, None
        return False, self._counterexample(min(bad_pieces))

    def _counterexample(self, piece: int) -> dict[str, Any]:
        s = self.schedule
        p = self.p
        finals = run_piece(s, self.events[piece])
        for rank in range(p):
            v = finals.get(rank)
            coefs = v.coefs if v is not None else {rank: 1}
            if any(coefs.get(r, 0) != 1 for r in range(p)):
                break
        else:                                        # unreachable: the group check said wrong
            raise AssertionError(f"piece {piece}: Z3 refuted a class but every rank is correct")
        inputs, expected, actual = _model(coefs, p, piece)
        wrong = {r: {"expected": 1, "actual": coefs.get(r, 0)} for r in range(p) if coefs.get(r, 0) != 1}
        missing = [r for r, d in wrong.items() if d["actual"] == 0]
        extra = [r for r, d in wrong.items() if d["actual"] != 0]
        plain = not s.local_ops and all(f.coef == 1 for f in s.flows)
        culprit = first_wrong_write(v, plain, missing) if v is not None else None
        last = v.writer if v is not None else None
        parts: list[str] = []
        if missing:
            parts.append(f"it is missing the inputs of ranks {_short(missing)}")
        if extra:
            parts.append("wrong coefficient for ranks " + _short(
                [f"{r} (×{wrong[r]['actual']})" for r in extra]))
        message = (f"rank {rank} ends with a wrong value of piece {piece}: " + "; ".join(parts)
                   + f". With inputs x[r] = r + 1 (one moved if needed) the sum is {expected}, rank {rank} holds {actual}.")
        cx: dict[str, Any] = {
            "property": "sum",
            "rank": rank,
            "piece": piece,
            "inputs": inputs,
            "expected_value": str(expected),
            "actual_value": str(actual),
            "expected_coefficients": "1 for every rank 0.." + str(p - 1),
            "actual_coefficients": {str(r): c for r, c in sorted(coefs.items())},
            "wrong_coefficients": {str(r): d for r, d in wrong.items()},
            "missing_ranks": missing,
        }
        if culprit is not None:
            cx["first_wrong"] = _describe_writer(s, self.grid, culprit)
            message += " First wrong value written by " + cx["first_wrong"]["text"] + "."
        if last is not None:
            cx["last_write"] = _describe_writer(s, self.grid, last)
            if culprit is None:
                message += " Its final value was written by " + cx["last_write"]["text"] + "."
        else:
            message += f" No flow ever writes piece {piece} on rank {rank}."
        cx["message"] = message
        return cx


def _prove_class(key: ClassKey, p: int) -> bool:
    """Z3: is Σ c_i x_i ≠ Σ x_i unsatisfiable over the reals? (key = sorted (coef, count) pairs)."""
    xs = [z3.Real(f"x{i}") for i in range(p)]
    terms: list[Any] = []      # z3 terms
    i = 0
    for coef, count in key:
        for _ in range(count):
            if coef == 1:
                terms.append(xs[i])
            elif coef:
                terms.append(z3.RealVal(coef) * xs[i])
            i += 1
    solver = z3.Solver()
    lhs = z3.Sum(terms) if terms else z3.RealVal(0)
    solver.add(lhs != z3.Sum(xs))
    return bool(solver.check() == z3.unsat)


def _model(coefs: dict[int, int], p: int, piece: int) -> tuple[dict[str, str], Fraction, Fraction]:
    """Concrete inputs x_r = r + 1 (distinct small positive integers) that expose the error.

    Linear time, no solver: Σ c_r x_r − Σ x_r is linear in each x_r; when it happens to vanish
    at x_r = r + 1, moving one x_r0 with c_r0 ≠ 1 to the unused value p + 1 changes it by
    (c_r0 − 1)(p − r0) ≠ 0. (Asking Z3 for distinct inputs took minutes at p = 800.)
    """
    vals = {r: Fraction(r + 1) for r in range(p)}
    if sum(((coefs.get(r, 0) - 1) * vals[r] for r in range(p)), Fraction(0)) == 0:
        r0 = next(r for r in range(p) if coefs.get(r, 0) != 1)
        vals[r0] = Fraction(p + 1)
    expected = sum(vals.values(), Fraction(0))
    actual = sum((c * vals[r] for r, c in coefs.items()), Fraction(0))
    assert actual != expected
    return {f"x[{r}] (rank {r}, piece {piece})": str(v) for r, v in vals.items()}, expected, actual


def _short(items: Iterable[object], limit: int = 12) -> str:
    texts = [str(x) for x in items]
    return ", ".join(texts[:limit]) + (f", … ({len(texts)} in all)" if len(texts) > limit else "")


def _describe_writer(schedule: Schedule, grid: IntegerTimes, writer: tuple[str, int]) -> dict[str, Any]:
    kind, i = writer
    if kind == "flow":
        f = schedule.flows[i]
        start, end = grid.to_fraction(grid.starts[i]), grid.to_fraction(grid.ends[i])
        return {"flow": i, "src": f.src, "dst": f.dst, "piece": f.piece, "op": f.op, "coef": f.coef,
                "start": str(start), "end": str(end),
                "text": f"flows[{i}] {f.src}->{f.dst} piece {f.piece} {f.op}"
                        + (f" ×{f.coef}" if f.coef != 1 else "") + f" start {start} lands {end}"}
    op = schedule.local_ops[i]
    return {"local_op": i, "rank": op.rank, "piece": op.piece, "coef": op.coef, "time": str(op.time),
            "text": f"local_ops[{i}] rank {op.rank} piece {op.piece} ×{op.coef} at {op.time}"}
