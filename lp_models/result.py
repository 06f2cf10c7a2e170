"""What every solve returns: status, objective, solver, seconds, and the solution it found.

Models know nothing of the command line; the CLI prints these objects.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

OPTIMAL = "OPTIMAL"


@dataclass
class SolveResult:
    """One solve. `objective` is in units of n/B; `optimal` is False whenever the solver stopped
    short (time limit, numerical trouble): callers must check it, nothing is silently rounded."""

    status: str
    objective: float | None
    solver: str
    seconds: float
    best_bound: float | None = None       # proven lower bound (CP-SAT), equal to objective when optimal
    time_limit_s: float | None = None

    @property
    def optimal(self) -> bool:
        return self.status == OPTIMAL

    @property
    def gap(self) -> float | None:
        """Relative optimality gap (objective − bound)/objective; 0 when optimal."""
        if self.objective is None or self.best_bound is None:
            return None
        if self.objective == 0:
            return 0.0
        return max(0.0, (self.objective - self.best_bound) / abs(self.objective))

    def summary(self) -> dict:
        obj = self.objective
        return {
            "status": self.status,
            "objective": None if obj is None or not math.isfinite(obj) else obj,
            "solver": self.solver,
            "seconds": self.seconds,
            "best_bound": self.best_bound,
            "gap": self.gap,
            "time_limit_s": self.time_limit_s,
        }


def run_cp_sat(model, time_limit_s: float, workers: int):
    """Solve a CP-SAT model under a time limit; returns (solver, status code, seconds)."""
    import time

    from ortools.sat.python import cp_model

    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = float(time_limit_s)
    solver.parameters.num_workers = workers
    t0 = time.perf_counter()
    code = solver.Solve(model)
    return solver, code, time.perf_counter() - t0
