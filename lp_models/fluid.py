"""Fluid LP: the optimal AllReduce rate on any bandwidth vector (data infinitely divisible, α = 0).

The model (derived; docs/lp_models.md "Fluid LP"): a fraction x_r of the data has GPU r as its
reduction root. For that data every other node sends r its contribution (reduce fan-in) and r
sends the sum back to every other node (broadcast fan-out): single-level reduce and broadcast
trees. Per unit of data a node of class c then loads its send port (and, symmetrically, its
receive port) with

    Σ_d (n_d − δ_cd)·x_d·w_cd   (its contributions to the other roots / their broadcasts)
  + x_c·Σ_d (n_d − δ_cd)·w_cd   (its own broadcast fan-out / reduce fan-in)

where n_d is the size of class d and w_cd the time one byte between a c-node and a d-node
costs on the c-node's port:
  shared    (a port's bandwidth splits among flows; what the lower bounds assume): w_cd = ℓ_c;
  exclusive (the paper's rule, one flow per NIC direction at the slower end's speed): the
            traffic on pair (i, j) costs max(ℓ_i, ℓ_j) on i's send and j's receive port.
Minimize T subject to every port load ≤ (ports per node)·T and Σ_d n_d x_d = 1.

Why single-level trees lose nothing (derived, docs/lp_models.md): in the shared model the LP
meets the closed-form lower bound (bounds.closed_form), which holds for every algorithm; in the
exclusive model with one straggler every tree scheme moves 2(p−1) messages per unit of data and
its cost depends only on how many of them touch the straggler, which stars can set freely; the
LP then meets bounds.closed_form.exclusive_single_straggler_optimum (tests/lp_models/test_lp_fluid.py).
With several stragglers the exclusive LP is the best *star* scheme only: on servers at ℓ = 2, 3/2,
1, 1 (g = 8) deeper trees reach 2/7 n/B against its 25/84 (tests/lp_models/test_lp_fluid.py), so it is no
lower bound on exclusive-port schedules there.

GPUs with equal slowdown are interchangeable, so the LP is solved on equivalence classes (one
variable and two rows per class): p = 10 000 is as small as p = 3. `reduce_classes=False`
builds one class per GPU (the full model) so the two can be checked against each other.

Several GPUs per server (g > 1): the nodes are servers with g NICs each (capacity g per
direction), every server first reduces internally over NVLink and exchanges only its partial
sum over the NICs; NVLink carries 2(g−1)/g bytes per GPU per unit of data (reduce-scatter and
all-gather inside the server, derived) at speed B_nvlink/B, a row T ≥ 2(g−1)/(g·s_nv). A server
whose GPUs have different ℓ pools its NICs over NVLink (`pooled_ell`, derived).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from bounds.closed_form import pooling_nvlink_time
from optcc.cluster import Cluster
from optcc.errors import OptccError
from lp_models.fluid_exact import MAX_CLASSES, solve_exact
from lp_models.result import OPTIMAL, SolveResult

CAPACITY_MODELS = ("shared", "exclusive")
LP_SOLVERS = {"glop": "GLOP", "pdlp": "PDLP", "highs": "HIGHS", "clp": "CLP", "scip": "SCIP"}
DEFAULT_LP_SOLVER = "glop"
EXACT = "exact"                       # lp_models.fluid_exact: vertex enumeration in Fractions
NUMERICAL_TROUBLE = ("ABNORMAL", "NOT_SOLVED", "FEASIBLE")   # a float solver's give-up: solved exactly instead


@dataclass(frozen=True)
class NodeClass:
    """Interchangeable nodes (GPUs, or servers when g > 1) with one slowdown."""

    name: str
    members: tuple[int, ...]   # ranks (g = 1) or server indices (g > 1)
    ell: Fraction
    ports: int                 # NICs per node

    @property
    def count(self) -> int:
        return len(self.members)


@dataclass
class FluidLPResult(SolveResult):
    """A fluid-LP solve: T (objective), root shares, duals and the rows that bind."""

    capacity: str = "shared"
    level: str = "gpu"                                   # "gpu" (g = 1) or "server"
    classes: list = field(default_factory=list)          # NodeClass list
    root_share: dict = field(default_factory=dict)       # class name -> x per member
    duals: dict = field(default_factory=dict)            # row name -> dual value (≥ 0, per unit of T)
    binding: list = field(default_factory=list)          # rows with zero slack (the capacities that bind)
    rows: dict = field(default_factory=dict)             # row name -> (coefficients over classes, constant, capacity)
    exact_objective: Fraction | None = None              # T as a Fraction where solved exactly (fluid_exact)

    def certificate_bound(self) -> float:
        """Lower bound on T implied by the duals alone (weak duality), for a reader to check.

        For π ≥ 0 with Σ π_row·capacity_row = 1: T ≥ min_d (Σ_row π_row·A_row,d)/n_d + Σ π_row·b_row.
        Equal to the objective when the duals are optimal.
        """
        if not self.duals:
            raise ValueError("this solve has no dual values (solver without duals, or not optimal)")
        norm = sum(self.duals[r] * self.rows[r][2] for r in self.rows)
        if norm <= 0:
            raise ValueError("dual values are all zero")
        pi = {r: self.duals[r] / norm for r in self.rows}
        per_class = []
        for j, c in enumerate(self.classes):
            per_class.append(sum(pi[r] * self.rows[r][0][j] for r in self.rows) / c.count)
        return min(per_class) + sum(pi[r] * self.rows[r][1] for r in self.rows)

    def to_json(self) -> dict:
        out = self.summary()
        out.update({
            "capacity": self.capacity,
            "level": self.level,
            "classes": [{"name": c.name, "count": c.count, "ell": str(c.ell), "ports": c.ports,
                         "root_share_per_member": self.root_share.get(c.name)} for c in self.classes],
            "binding": self.binding,
            "duals": self.duals,
        })
        return out


def node_classes(cluster: Cluster, reduce_classes: bool = True) -> tuple[str, list[NodeClass]]:
    """Group GPUs (g = 1) or servers (g > 1) by slowdown; one class per node when not reducing."""
    if cluster.g == 1:
        level, ells, ports = "gpu", list(cluster.slowdown), 1
        noun = "rank"
    else:
        level, ports, noun = "server", cluster.g, "server"
        ells = []
        for s in range(cluster.servers):
            ells.append(pooled_ell(cluster.slowdown[s * cluster.g:(s + 1) * cluster.g]))
    if not reduce_classes:
        return level, [NodeClass(f"{noun} {i} (ℓ={e})", (i,), e, ports) for i, e in enumerate(ells)]
    groups: dict[Fraction, list[int]] = {}
    for i, e in enumerate(ells):
        groups.setdefault(e, []).append(i)
    classes = []
    for e in sorted(groups, reverse=True):
        members = tuple(groups[e])
        label = _ranges(members)
        classes.append(NodeClass(f"{noun}s {label} (ℓ={e})" if len(members) > 1 else f"{noun} {label} (ℓ={e})",
                                 members, e, ports))
    return level, classes


def pooled_ell(ells) -> Fraction:
    """A server's NICs pooled over NVLink (derived, docs/failures.md): its g NICs act as g NICs at
    the harmonic mean ℓ_eff = g/Σ 1/ℓ_i, the same total bandwidth b_j the lower bound uses."""
    ells = list(ells)
    return len(ells) / sum(1 / Fraction(x) for x in ells)


def _ranges(xs) -> str:
    out, start, prev = [], xs[0], xs[0]
    for x in list(xs[1:]) + [None]:
        if x is not None and x == prev + 1:
            prev = x
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if x is not None:
            start = prev = x
    return ",".join(out)


def load_matrix(classes: list[NodeClass], capacity: str) -> np.ndarray:
    """A[c, d]: time per unit of data a c-node's port spends per unit of x_d (see module doc)."""
    if capacity not in CAPACITY_MODELS:
        raise OptccError("capacity", f"expected one of {CAPACITY_MODELS}, got {capacity!r}")
    m = len(classes)
    ell = np.array([float(c.ell) for c in classes])
    cnt = np.array([c.count for c in classes], dtype=float)
    if capacity == "shared":
        w = np.repeat(ell[:, None], m, axis=1)
    else:
        w = np.maximum(ell[:, None], ell[None, :])
    others = cnt[None, :] - np.eye(m)             # n_d − δ_cd
    a = others * w                                 # contributions to the other roots
    a[np.diag_indices(m)] += (others * w).sum(axis=1)   # own fan-in / fan-out
    return a


def solve_fluid_lp(cluster: Cluster, capacity: str = "shared", solver: str = DEFAULT_LP_SOLVER,
                   reduce_classes: bool = True, time_limit_s: float | None = None) -> FluidLPResult:
    """Solve the fluid LP on `cluster` under the `capacity` model; objective T in units of n/B."""
    if solver not in LP_SOLVERS and solver != EXACT:
        raise OptccError("solver", f"unknown LP solver {solver!r} (known: {', '.join(LP_SOLVERS)}, {EXACT})")
    from ortools.linear_solver import pywraplp

    level, classes = node_classes(cluster, reduce_classes)
    a = load_matrix(classes, capacity)
    if solver == EXACT:
        return _exact(cluster, capacity, level, classes, a, EXACT, time.perf_counter())
    t_start = time.perf_counter()
    lp = pywraplp.Solver.CreateSolver(LP_SOLVERS[solver])
    if lp is None:
        raise OptccError("solver", f"OR-Tools was built without {LP_SOLVERS[solver]}")
    if time_limit_s is not None:
        lp.SetTimeLimit(int(time_limit_s * 1000))
    inf = lp.infinity()
    x = [lp.NumVar(0.0, inf, f"x[{c.name}]") for c in classes]
    t_var = lp.NumVar(0.0, inf, "T")
    total = lp.Constraint(1.0, 1.0, "one_root_per_byte")
    for xv, c in zip(x, classes):
        total.SetCoefficient(xv, c.count)
    rows: dict[str, tuple] = {}
    constraints = {}
    for i, c in enumerate(classes):
        for direction in ("send", "recv"):
            name = f"nic_{direction}[{c.name}]"
            row = lp.Constraint(-inf, 0.0, name)
            for j, xv in enumerate(x):
                if a[i, j]:
                    row.SetCoefficient(xv, float(a[i, j]))
            row.SetCoefficient(t_var, -float(c.ports))
            constraints[name] = row
            rows[name] = (list(a[i]), 0.0, float(c.ports))
    if level == "server":
        # T ≥ 2(g−1)/(g·s_nv); with a mixed server its pooling row (1 + (g−2)·w_max)/s_nv
        # (bounds.closed_form.pooling_nvlink_time, derived), equal to it for uniform servers.
        nv = float(pooling_nvlink_time(cluster))
        name = "nvlink[every server]"
        row = lp.Constraint(nv, inf, name)        # T ≥ 2(g−1)/(g·s_nv)
        row.SetCoefficient(t_var, 1.0)
        constraints[name] = row
        rows[name] = ([0.0] * len(classes), nv, 1.0)
    lp.Minimize(t_var)
    code = lp.Solve()
    seconds = time.perf_counter() - t_start
    status = _STATUS.get(code, f"STATUS_{code}")
    if status in NUMERICAL_TROUBLE and len(classes) <= MAX_CLASSES and time_limit_s is None:
        return _exact(cluster, capacity, level, classes, a, f"{EXACT} ({solver} returned {status})", t_start)
    res = FluidLPResult(status=status, objective=t_var.solution_value() if status == OPTIMAL else None,
                        solver=solver, seconds=seconds, time_limit_s=time_limit_s,
                        capacity=capacity, level=level, classes=classes, rows=rows)
    if status == OPTIMAL:
        res.best_bound = res.objective
        res.root_share = {c.name: xv.solution_value() for c, xv in zip(classes, x)}
        try:
            duals = {name: abs(row.dual_value()) for name, row in constraints.items()}
        except Exception:       # MIP solvers (SCIP) give no duals
            duals = {}
        if duals and any(duals.values()):
            res.duals = duals
        t = res.objective
        for name, row in constraints.items():
            coefs, const, cap = rows[name]
            lhs = sum(cf * xv.solution_value() for cf, xv in zip(coefs, x)) + const
            slack = cap * t - lhs
            if abs(slack) <= 1e-9 * max(1.0, t):
                res.binding.append(name)
    return res


def _exact(cluster, capacity, level, classes, a, label, t_start) -> FluidLPResult:
    """The same LP solved exactly (lp_models.fluid_exact), as a FluidLPResult."""
    nv = pooling_nvlink_time(cluster) if level == "server" else None
    T, x, tight = solve_exact(classes, capacity, nv)
    rows = {}
    for i, c in enumerate(classes):
        for direction in ("send", "recv"):
            rows[f"nic_{direction}[{c.name}]"] = (list(a[i]), 0.0, float(c.ports))
    if nv is not None:
        rows["nvlink[every server]"] = ([0.0] * len(classes), float(nv), 1.0)
    res = FluidLPResult(status=OPTIMAL, objective=float(T), solver=label, seconds=time.perf_counter() - t_start,
                        capacity=capacity, level=level, classes=classes, rows=rows, exact_objective=T)
    res.best_bound = res.objective
    res.root_share = {c.name: float(v) for c, v in zip(classes, x)}
    for name in tight:
        if name.startswith("nic["):
            res.binding += [f"nic_send[{name[4:-1]}]", f"nic_recv[{name[4:-1]}]"]
        elif name.startswith("nvlink"):
            res.binding.append(name)
    return res


_STATUS = {0: "OPTIMAL", 1: "FEASIBLE", 2: "INFEASIBLE", 3: "UNBOUNDED", 4: "ABNORMAL",
           5: "MODEL_INVALID", 6: "NOT_SOLVED"}


def lp_optimum(cluster: Cluster, capacity: str = "shared", solver: str = DEFAULT_LP_SOLVER) -> float | None:
    """Fluid-LP optimum (n/B) for `cluster`, or None when the LP does not reach optimality.

    For `optcc demo` and other callers that want one number."""
    res = solve_fluid_lp(cluster, capacity, solver)
    return res.objective if res.optimal else None
