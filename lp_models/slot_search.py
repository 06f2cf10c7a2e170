"""CP-SAT: an optimal AllReduce schedule from scratch for a tiny cluster (p ≤ 4, a few pieces).

Which flows exist is decided too. Search space (stated, so the optimum is read right): the
data is cut into P equal pieces; each piece is reduced along an in-tree to a root of the
solver's choosing (every non-root sends its partial sum once, "add", to a parent of its
choosing, after all its children's partial sums have landed) and then broadcast along an
out-tree ("copy": a node forwards the full sum once it holds it). Flows use whole ports (the
paper's exclusive rule, rate 1): one no-overlap per NIC direction over all pieces. Trees
follow from the timing (a parent sends strictly after its children have landed), so no
cycle can be chosen. Minimize the makespan; the time limit and the optimality gap are reported,
and a solve stopped by its limit says so (status FEASIBLE, gap > 0), never passing as optimal.

Durations are integers on the grid 1/(P·D) n/B, D the lcm of the slowdowns' denominators.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.schedule import Flow, Schedule
from lp_models.result import run_cp_sat, SolveResult

MAX_P = 6
DEFAULT_PIECES = 2
DEFAULT_TIME_LIMIT_S = 30.0


@dataclass
class SearchResult(SolveResult):
    """`objective`: best makespan found (n/B); `schedule`: that schedule (None if none found)."""

    schedule: Schedule | None = None
    pieces: int = 0
    objective_exact: Fraction | None = None


def optimal_tree_schedule(cluster: Cluster, pieces: int = DEFAULT_PIECES,
                          time_limit_s: float = DEFAULT_TIME_LIMIT_S, workers: int = 2) -> SearchResult:
    """Search reduce/broadcast trees and their timing for `pieces` equal pieces (see module doc)."""
    from ortools.sat.python import cp_model

    p = cluster.p
    if cluster.g != 1:
        raise OptccError("g", "the from-scratch search covers one GPU per server (g = 1)")
    if p > MAX_P:
        raise OptccError("p", f"the from-scratch search is for tiny clusters (p ≤ {MAX_P}), got p = {p}")
    if isinstance(pieces, bool) or not isinstance(pieces, int) or not 1 <= pieces <= 8:
        raise OptccError("ilp.pieces", f"expected 1..8 pieces, got {pieces!r}")
    ell = cluster.slowdown
    den = math.lcm(*(x.denominator for x in ell))
    scale = pieces * den                                   # grid unit: 1/(P·D) n/B
    dur = [[int(max(ell[i], ell[j]) * den) if i != j else 0 for j in range(p)] for i in range(p)]
    horizon = pieces * 2 * (p - 1) * max(max(r) for r in dur)      # everything in sequence fits
    m = cp_model.CpModel()
    send_iv = [[] for _ in range(p)]
    recv_iv = [[] for _ in range(p)]
    makespan = m.NewIntVar(0, horizon, "makespan")
    var = []   # per piece: dict of the decision variables, to read the schedule back
    for q in range(pieces):
        root = [m.NewBoolVar(f"root{q}_{r}") for r in range(p)]
        m.AddExactlyOne(root)
        rs = [m.NewIntVar(0, horizon, f"rs{q}_{i}") for i in range(p)]        # reduce-send start
        full = [m.NewIntVar(0, horizon, f"full{q}_{i}") for i in range(p)]    # holds the full sum
        par = {}
        bpar = {}
        bs = {}
        for i in range(p):
            for j in range(p):
                if i == j:
                    continue
                par[i, j] = m.NewBoolVar(f"par{q}_{i}_{j}")
                iv = m.NewOptionalFixedSizeIntervalVar(rs[i], dur[i][j], par[i, j], f"red{q}_{i}_{j}")
                send_iv[i].append(iv)
                recv_iv[j].append(iv)
                bpar[i, j] = m.NewBoolVar(f"bpar{q}_{i}_{j}")                  # i copies to j
                bs[i, j] = m.NewIntVar(0, horizon, f"bs{q}_{i}_{j}")
                biv = m.NewOptionalFixedSizeIntervalVar(bs[i, j], dur[i][j], bpar[i, j], f"bc{q}_{i}_{j}")
                send_iv[i].append(biv)
                recv_iv[j].append(biv)
        for i in range(p):
            others = [j for j in range(p) if j != i]
            # a non-root sends its partial sum to exactly one parent; the root sends none
            m.Add(sum(par[i, j] for j in others) + root[i] == 1)
            # a non-root receives the full sum exactly once; the root receives none
            m.Add(sum(bpar[j, i] for j in others) + root[i] == 1)
            for c in others:
                # a parent sends after its child's partial sum has landed
                m.Add(rs[i] >= rs[c] + dur[c][i]).OnlyEnforceIf(par[c, i])
                # the root holds the full sum once every child's partial sum has landed
                m.Add(full[i] >= rs[c] + dur[c][i]).OnlyEnforceIf([par[c, i], root[i]])
                # a copy leaves j only once j holds the full sum; it gives i the full sum on landing
                m.Add(bs[c, i] >= full[c]).OnlyEnforceIf(bpar[c, i])
                m.Add(full[i] == bs[c, i] + dur[c][i]).OnlyEnforceIf(bpar[c, i])
            m.Add(makespan >= full[i])
        var.append((root, rs, par, bpar, bs))
    for i in range(p):
        m.AddNoOverlap(send_iv[i])
        m.AddNoOverlap(recv_iv[i])
    m.Minimize(makespan)
    solver, code, seconds = run_cp_sat(m, time_limit_s, workers)
    res = SearchResult(status=solver.StatusName(code), objective=None, solver="cp-sat", seconds=seconds,
                       time_limit_s=time_limit_s, pieces=pieces)
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return res
    best = Fraction(int(solver.ObjectiveValue()), scale)
    res.objective_exact = best
    res.objective = float(best)
    res.best_bound = float(Fraction(int(math.ceil(solver.BestObjectiveBound() - 1e-9)), scale))
    flows = []
    for q, (root, rs, par, bpar, bs) in enumerate(var):
        for (i, j), b in par.items():
            if solver.Value(b):
                flows.append(Flow(i, j, q, "add", Fraction(solver.Value(rs[i]), scale)))
        for (i, j), b in bpar.items():
            if solver.Value(b):
                flows.append(Flow(i, j, q, "copy", Fraction(solver.Value(bs[i, j]), scale)))
    flows.sort(key=lambda f: (f.start, f.piece, f.src, f.dst))
    meta = {"algorithm": "cp_sat_trees", "capacity": "exclusive", "pieces": pieces,
            "solver_status": res.status, "gap": res.gap, "time_limit_s": time_limit_s}
    res.schedule = Schedule(cluster, [Fraction(1, pieces)] * pieces, flows, meta=meta)
    return res
