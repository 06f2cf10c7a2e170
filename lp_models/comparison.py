"""Everything `optcc compare` prints: lower bound, LP/ILP optima, OptCC, rings, LP schedules.

Small clusters (p ≤ MATERIALIZE_MAX_P) get real schedules, timed by optcc.timing and proved by
the verifier; larger ones get the algorithms' closed forms (derived from the constructions and
tested equal to the generated schedules' slot times for p ≤ 64), reported with proved = None.
Times are in units of n/B.
"""
from __future__ import annotations

import time
from fractions import Fraction

from bounds.closed_form import fault_free_optimum, lower_bound
from optcc.cluster import Cluster
from optcc.errors import OptccError
from lp_models.fluid import DEFAULT_LP_SOLVER, solve_fluid_lp

MATERIALIZE_MAX_P = 64
ILP_MAX_P = 4


def lp_optimum(cluster: Cluster, capacity: str = "shared", solver: str = DEFAULT_LP_SOLVER) -> float | None:
    """Fluid-LP optimum (n/B) for `cluster`, or None when the LP does not reach optimality.

    For `optcc demo` and other callers that want one number."""
    res = solve_fluid_lp(cluster, capacity, solver)
    return res.objective if res.optimal else None


def ring_pxn_time(cluster: Cluster) -> Fraction:
    """Derived (optcc.algorithms.ring docstring): the synchronous ring at the slowest link, ℓ_max·2(p−1)/p;
    g > 1: the flat ring over all p GPUs, ℓ_max·2(p−1)/(p·g) (optcc.algorithms.baselines)."""
    return max(cluster.slowdown) * Fraction(2 * (cluster.p - 1), cluster.p * cluster.g)


def ring_no_failure_time(cluster: Cluster) -> Fraction:
    """NCCL's ring on the same cluster without failures: 2(p−1)/(p·g) (paper T0 for g = 1)."""
    return Fraction(2 * (cluster.p - 1), cluster.p * cluster.g)


def compare(cluster: Cluster, segments: int = 8, ilp: bool = False, solver: str = DEFAULT_LP_SOLVER,
            ilp_pieces: int = 2, ilp_time_limit_s: float = 30.0, prove: bool = True,
            materialize_max_p: int = MATERIALIZE_MAX_P) -> dict:
    """The comparison as a JSON-ready dict (keys as in issue #5)."""
    if isinstance(segments, bool) or not isinstance(segments, int) or segments < 1:
        raise OptccError("--segments", f"expected a positive integer, got {segments!r}")
    started = time.perf_counter()
    t0 = fault_free_optimum(cluster.p, cluster.g)
    try:
        lb = lower_bound(cluster)
    except OptccError:
        lb = None
    notes: list[str] = []
    shared = solve_fluid_lp(cluster, "shared", solver)
    exclusive = solve_fluid_lp(cluster, "exclusive", solver)
    for res in (shared, exclusive):
        if not res.optimal:
            notes.append(f"{res.capacity} LP: {res.status} ({res.solver}), no optimum reported")
    out = {
        "cluster": cluster.describe(),
        "segments": segments,
        "lower_bound": None if lb is None else float(lb),
        "t0": float(t0),
        "lp_optimum": shared.objective,
        "lp_optimum_exclusive": exclusive.objective,
        "ilp_optimum": None,
        "lp": {"shared": shared.summary() | {"binding": shared.binding},
               "exclusive": exclusive.summary() | {"binding": exclusive.binding}},
        "algorithms": {},
        "notes": notes,
    }
    if ilp:
        if cluster.g != 1 or cluster.p > ILP_MAX_P:
            notes.append(f"ILP: skipped, the from-scratch search is for g = 1 and p ≤ {ILP_MAX_P}")
        else:
            from lp_models.slot_search import optimal_tree_schedule
            found = optimal_tree_schedule(cluster, ilp_pieces, ilp_time_limit_s)
            out["ilp"] = found.summary() | {"pieces": ilp_pieces}
            if found.optimal:
                out["ilp_optimum"] = found.objective
            else:
                notes.append(f"ILP: {found.status} after {found.seconds:.1f} s (limit {ilp_time_limit_s} s), "
                             f"best {found.objective}, bound {found.best_bound}: not reported as optimal")
            if found.schedule is not None:
                _add_schedule(out, "ilp_trees", found.schedule, t0, lb, prove, notes)

    small = cluster.p <= materialize_max_p
    algos = out["algorithms"]
    one_straggler = cluster.g == 1 and len(cluster.stragglers) == 1
    if one_straggler:
        try:
            from optcc.algorithms.optcc_single import optcc_allreduce, optcc_slot_time
        except ImportError:
            notes.append("optcc: optcc.algorithms.optcc_single is not installed")
        else:
            if small:
                _add_schedule(out, "optcc", optcc_allreduce(cluster, segments), t0, lb, prove, notes)
            else:
                algos["optcc"] = _entry(optcc_slot_time(cluster, segments), t0, lb, None, "closed form")
    else:
        notes.append("optcc: the single-straggler OptCC covers g = 1 with exactly one straggler")
    if cluster.g == 1 and small:
        from optcc.algorithms.ring import ring_allreduce
        _add_schedule(out, "ring_pxn", ring_allreduce(cluster, 1), t0, lb, prove, notes)
    else:
        algos["ring_pxn"] = _entry(ring_pxn_time(cluster), t0, lb, None, "closed form")
    algos["ring_no_failure"] = _entry(ring_no_failure_time(cluster), t0, lb, None, "closed form (no straggler)")
    if cluster.g == 1 and small:
        from lp_models.to_schedule import lp_schedule
        for capacity, res in (("shared", shared), ("exclusive", exclusive)):
            if res.optimal:
                _add_schedule(out, f"lp_schedule_{capacity}", lp_schedule(cluster, segments, capacity, lp=res),
                              t0, lb, prove, notes)
    out["seconds"] = time.perf_counter() - started
    return out


def _entry(time_units: Fraction, t0: Fraction, lb: Fraction | None, proved, source: str, **extra) -> dict:
    entry = {
        "time": float(time_units),
        "ratio_to_t0": float(time_units / t0),
        "ratio_to_lower_bound": None if lb is None else float(time_units / lb),
        "proved": proved,
        "source": source,
    }
    entry.update(extra)
    return entry


def _add_schedule(out: dict, name: str, schedule, t0, lb, prove: bool, notes: list) -> None:
    from optcc.timing import time_schedule

    rep = time_schedule(schedule)
    proved = None
    if prove:
        try:
            from verifier import prove_allreduce
        except ImportError:
            notes.append(f"{name}: verifier not installed, proved = null")
        else:
            proof = prove_allreduce(schedule)
            proved = bool(proof.proved)
            if not proved:
                notes.append(f"{name}: NOT proved: {proof.counterexample}")
    if rep.violation is not None:
        notes.append(f"{name}: capacity violated: {rep.violation.describe(schedule)}")
    out["algorithms"][name] = _entry(rep.slot_time, t0, lb, proved, "schedule",
                                     event_time=float(rep.event_time), capacity=rep.capacity,
                                     flows=len(schedule.flows))
