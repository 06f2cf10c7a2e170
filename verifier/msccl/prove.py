"""Prove the four properties of an MSCCL AllReduce program, or give a counterexample.

  sum            every output chunk c on every rank is Σ_r x_r[c], each input once: Z3 shows
                 `E(x) != Σ x` unsatisfiable for each distinct final expression (as
                 verifier.sum_property does for schedules); and no race makes it timing-dependent
  deadlock_free  with unbounded and with one-message FIFO buffers every thread block finishes,
                 every message is received, each receive's cnt matches its send, and every
                 dependency waits on a step with hasdep="1"
  limits         steps per thread block (--max-steps), thread blocks per GPU, cnt, peers per
                 channel, elements the runtime stores (verifier.msccl.model.limit_violations)
  deterministic  every rank holds chunk c as the same summation tree (same additions in the
                 same order), so results are bitwise identical across ranks
Counterexamples name the rank, chunk, thread block and step (and the XML line).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import z3

from verifier.msccl.execute import describe, execute
from verifier.msccl.model import Program, limit_violations

if TYPE_CHECKING:
    from verifier.msccl.execute import Key, Run

ClassKey = tuple[tuple[int, ...], tuple[int, ...]]     # (expected inputs' coefficients, the others'), sorted

PROPERTIES = ("sum", "deadlock_free", "limits", "deterministic")


@dataclass
class MscclProof:
    proved: bool
    properties: dict[str, bool]
    counterexample: dict[str, Any] | None
    seconds: float
    counterexamples: dict[str, dict[str, Any]] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"proved": self.proved,
                "properties": {k: "proved" if v else "refuted" for k, v in self.properties.items()},
                "counterexample": self.counterexample, "counterexamples": self.counterexamples,
                "seconds": round(self.seconds, 4), "facts": self.facts, "z3_version": z3.get_version_string()}


def prove_program(prog: Program, max_steps: int = 64) -> MscclProof:
    t0 = time.perf_counter()
    failures: dict[str, dict[str, Any]] = {}
    queries: dict[ClassKey, bool] = {}
    for inplace in prog.modes():
        mode = "in-place" if inplace else "out-of-place"
        unbounded = execute(prog, inplace, None)
        bounded = execute(prog, inplace, 1)
        for name, cx in (("deadlock_free", _deadlock(unbounded, "unbounded buffers")),
                         ("deadlock_free", _deadlock(bounded, "one-message buffers")),
                         ("sum", _sum(prog, unbounded, inplace, queries)),
                         ("deterministic", _deterministic(prog, unbounded, inplace))):
            if cx is not None and name not in failures:
                cx = {"property": name, "mode": mode, **cx}
                failures[name] = cx
    if "deadlock_free" not in failures:
        cx = _unpublished_wait(prog)
        if cx is not None:
            failures["deadlock_free"] = cx
    violations = limit_violations(prog, max_steps)
    if violations:
        failures["limits"] = {"property": "limits", "max_steps": max_steps, "violations": violations[:20],
                              "message": violations[0]["message"]
                              + (f" (and {len(violations) - 1} more)" if len(violations) > 1 else "")}
    properties = {name: name not in failures for name in PROPERTIES}
    first = next((failures[n] for n in PROPERTIES if n in failures), None)
    facts = {"ranks": prog.ngpus, "thread_blocks": sum(len(g.tbs) for g in prog.gpus), "steps": prog.n_steps(),
             "chunks_per_loop": prog.nchunks, "proto": prog.proto, "channels": prog.nchannels,
             "modes": ["in-place" if m else "out-of-place" for m in prog.modes()], "max_steps": max_steps,
             "z3_queries": len(queries)}
    return MscclProof(proved=not failures, properties=properties, counterexample=first,
                      seconds=time.perf_counter() - t0, counterexamples=failures, facts=facts)


def _deadlock(run: Run, buffers: str) -> dict[str, Any] | None:
    if run.mismatch:
        m = run.mismatch
        return {"buffers": buffers, **m, "rank": m["receiver"]["rank"], "tb": m["receiver"]["tb"],
                "step": m["receiver"]["step"], "chunk": m["receiver"]["chunk"],
                "message": f"{m['receiver']['text']} receives {m['cnt']} chunk(s) but "
                f"the matching send, {m['sender']['text']}, sent {m['sent']}"}
    if run.blocked:
        b = run.blocked[0]
        return {"buffers": buffers, "blocked": run.blocked[:16], "rank": b["rank"], "tb": b["tb"], "step": b["step"],
                "chunk": b["chunk"],
                "message": f"deadlock with {buffers}: {len(run.blocked)} thread block(s) never finish; first: "
                           + b["text"]}
    if run.leftover:
        m = run.leftover[0]
        return {"buffers": buffers, "unreceived": run.leftover[:16], "rank": m["sender"]["rank"],
                "tb": m["sender"]["tb"], "step": m["sender"]["step"], "chunk": m["sender"]["chunk"],
                "message": f"{len(run.leftover)} message(s) never received; first: {m['sender']['text']} sends "
                           f"{m['chunks']} chunk(s) to rank {m['to_rank']} on channel {m['channel']}, "
                           "and no receive takes them"}
    return None


def _unpublished_wait(prog: Program) -> dict[str, Any] | None:
    """A wait on a step without hasdep="1", or on a number no step has (a `nop`'s), ends only when
    a later step of that thread block publishes: it waits longer than written, and forever if none
    does (../shared/MSCCL.md: a bug)."""
    for g in prog.gpus:
        for tb in g.tbs:
            for st in tb.steps:
                for dep_tb, k, line in st.waits:
                    target = g.tbs[dep_tb]
                    last = target.steps[-1].kernel if target.steps else -1
                    if k > last:
                        continue                    # never reached: the executor reports the deadlock
                    hit = target.by_number.get(k)
                    if hit is not None and hit.hasdep:
                        continue
                    where = {"tb": dep_tb, "step": hit.s if hit else k, "line": hit.line if hit else None}
                    why = ("which does not have hasdep=\"1\" and never publishes its completion" if hit else
                           "which is no step's number (the runtime numbers the real steps and the nops that carry a "
                           "dependency, so this is a nop or a fused reduction), so nothing publishes it")
                    return {"property": "deadlock_free", "kind": "unpublished_wait", "rank": g.id, "tb": tb.id,
                            "step": st.s, "chunk": describe(tb, st)["chunk"], "line": line, "target": where,
                            "message": f"rank {g.id} thread block {tb.id} step {st.s} waits (line {line}) for "
                                       f"thread block {dep_tb} step {k}"
                                       + (f" (line {hit.line})" if hit else "") + f", {why}; the wait ends only "
                                       "if a later step of that thread block publishes"}
    return None


def _sum(prog: Program, run: Run, inplace: bool, queries: dict[ClassKey, bool]) -> dict[str, Any] | None:
    if run.race:
        r = run.race
        return {"kind": "race", "rank": r["rank"], "chunk": r["chunk"], "buffer": r["buffer"],
                "tb": r["second"]["tb"], "step": r["second"]["step"], "first": r["first"], "second": r["second"],
                "message": f"race on rank {r['rank']} {r['buffer']}[{r['chunk']}] ({r['kind']}): "
                           f"{r['second']['text']} is not ordered after {r['first']['text']} by program order, "
                           "a message or a dependency, so the value depends on timing"}
    buf = "i" if inplace else "o"
    for c in range(prog.nchunks):
        for rank in range(prog.ngpus):
            v = run.cells.get((rank, buf, c))
            lin = run.values.linear(v) if v is not None else {("u", rank, buf, c): 1}
            key = _class_key(lin, c, prog.ngpus)
            if key not in queries:
                queries[key] = _prove(key)
            if not queries[key]:
                return _sum_counterexample(prog, run, rank, c, lin, buf)
    return None


def _class_key(lin: dict[Key, int], chunk: int, p: int) -> ClassKey:
    """The query up to renaming variables: coefficients of the p expected inputs, then of the others."""
    expected = tuple(sorted(lin.get(("x", r, chunk), 0) for r in range(p)))
    others = tuple(sorted(c for k, c in lin.items() if not (k[0] == "x" and k[2] == chunk)))
    return expected, others


def _prove(key: ClassKey) -> bool:
    """Z3: is Σ a_i x_i + Σ b_j y_j != Σ x_i unsatisfiable over the reals?"""
    expected, others = key
    xs = [z3.Real(f"x{i}") for i in range(len(expected))]
    ys = [z3.Real(f"y{j}") for j in range(len(others))]
    lhs = z3.Sum([a * x for a, x in zip(expected, xs)] + [b * y for b, y in zip(others, ys)])
    solver = z3.Solver()
    solver.add(lhs != z3.Sum(xs))
    return bool(solver.check() == z3.unsat)


def _sum_counterexample(prog: Program, run: Run, rank: int, c: int, lin: dict[Key, int], buf: str) -> dict[str, Any]:
    p = prog.ngpus
    coefs = {r: lin.get(("x", r, c), 0) for r in range(p)}
    missing = [r for r in range(p) if coefs[r] == 0]
    extra = [r for r in range(p) if coefs[r] > 1]
    foreign = sorted((f"x{k[1]}[{k[2]}]" if k[0] == "x" else f"undefined {k[2]}[{k[3]}] of rank {k[1]}")
                     for k in lin if not (k[0] == "x" and k[2] == c))
    xs = {r: z3.Int(f"x{r}") for r in range(p)}
    solver = z3.Solver()
    solver.add(z3.Sum([coefs[r] * xs[r] for r in range(p)]) != z3.Sum(list(xs.values())))
    solver.add(*[z3.And(x >= 1, x <= 2 * p + 1) for x in xs.values()], z3.Distinct(*xs.values()) if p > 1 else True)
    inputs: dict[str, int] = {}
    if not foreign and solver.check() == z3.sat:
        m = solver.model()
        inputs = {f"x{r}[{c}]": m.eval(xs[r], model_completion=True).as_long() for r in range(p)}
    parts: list[str] = []
    if missing:
        parts.append(f"it misses the inputs of ranks {missing}")
    if extra:
        parts.append(f"it adds ranks {extra} more than once")
    if foreign:
        parts.append(f"it contains {', '.join(foreign[:6])}")
    writer = run.writer.get((rank, buf, c))
    held = run.cells.get((rank, buf, c))
    message = (f"rank {rank} ends with a wrong chunk {c}: " + "; ".join(parts) + ". Its value is "
               + (run.values.render(held) if held is not None else "never written"))
    if inputs:
        total = sum(inputs.values())
        got = sum(coefs[r] * inputs[f"x{r}[{c}]"] for r in range(p))
        message += f". With inputs {inputs} the sum is {total}, rank {rank} holds {got}"
    message += f". Last written by {writer['text']}" if writer else f". No step writes {buf}[{c}] on rank {rank}"
    return {"kind": "wrong_sum", "rank": rank, "chunk": c, "tb": writer["tb"] if writer else None,
            "step": writer["step"] if writer else None, "coefficients": {str(r): k for r, k in coefs.items()},
            "missing_ranks": missing, "inputs": inputs, "last_write": writer, "message": message}


def _deterministic(prog: Program, run: Run, inplace: bool) -> dict[str, Any] | None:
    buf = "i" if inplace else "o"
    for c in range(prog.nchunks):
        trees = [run.cells.get((rank, buf, c)) for rank in range(prog.ngpus)]
        for rank in range(1, prog.ngpus):
            if trees[rank] != trees[0]:
                w0, w1 = run.writer.get((0, buf, c)), run.writer.get((rank, buf, c))
                t0, t1 = (run.values.render(t) if t is not None else "never written" for t in (trees[0], trees[rank]))
                return {"rank": rank, "chunk": c, "other_rank": 0, "tb": w1["tb"] if w1 else None,
                        "step": w1["step"] if w1 else None, "trees": {"0": t0, str(rank): t1},
                        "last_writes": {"0": w0, str(rank): w1},
                        "message": f"ranks 0 and {rank} add chunk {c} in different orders: rank 0 computes {t0}, "
                                   f"rank {rank} computes {t1} (last step "
                                   + (w1["text"] if w1 else "none") + "); floating-point results can differ "
                                   "bit for bit"}
    return None
