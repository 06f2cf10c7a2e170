"""Everything `optcc compare` prints: lower bound, LP/ILP optima, OptCC, rings, LP schedules.

Small clusters (p ≤ MATERIALIZE_MAX_P) get real schedules, timed by optcc.timing and proved by
the verifier; larger ones get the algorithms' closed forms (derived from the constructions and
tested equal to the generated schedules' slot times), reported with proved = None.
OptCC is whatever optcc.algorithms.registry chooses (single straggler, m ≥ 2 stragglers, every
GPU slow (all_slow), one straggler server, or optcc_rails for other g > 1 slow sets); rings are the ring (g = 1) or, for g > 1, the flat ring with and without the
straggler (NCCLNoFailure) and the hierarchical ring; R2CCL is the g = 1 schedule or the
node-level one for g > 1. A row that has no number says why (time null, source "not available").
Times are in units of n/B.
"""
from __future__ import annotations

import time
from fractions import Fraction

from bounds.closed_form import fault_free_optimum, lower_bound
from optcc_app.compose.rows import row
from lp_models.fluid import DEFAULT_LP_SOLVER, solve_fluid_lp
from optcc.algorithms import check_segments, check_work
from optcc.cluster import Cluster
from optcc.errors import OptccError

MATERIALIZE_MAX_P = 64
ILP_MAX_P = 4


def compare(cluster: Cluster, segments: int = 8, ilp: bool = False, solver: str = DEFAULT_LP_SOLVER,
            ilp_pieces: int = 2, ilp_time_limit_s: float = 30.0, prove: bool = True,
            materialize_max_p: int = MATERIALIZE_MAX_P) -> dict:
    """The comparison as a JSON-ready dict (keys as in issue #5)."""
    check_segments(segments)
    if cluster.p <= materialize_max_p:             # schedules get built: bound their size first
        check_work(cluster, segments)
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
    _add_optcc(out, cluster, segments, small, t0, lb, prove, notes)
    _add_rings(out, cluster, small, t0, lb, prove, notes)
    _add_r2ccl(out, cluster, small, t0, lb, prove, notes)
    if cluster.g == 1 and small:
        from lp_models.to_schedule import lp_schedule
        for capacity, res in (("shared", shared), ("exclusive", exclusive)):
            if res.optimal:
                _add_schedule(out, f"lp_schedule_{capacity}", lp_schedule(cluster, segments, capacity, lp=res),
                              t0, lb, prove, notes)
    out["seconds"] = time.perf_counter() - started
    return out


def _unavailable(out: dict, name: str, reason: str) -> None:
    """A row that says why there is no number (time and ratios null)."""
    out["algorithms"][name] = row(None, None, None, proved=None, source=f"not available: {reason}")


def _add_optcc(out, cluster, segments, small, t0, lb, prove, notes) -> None:
    from optcc.algorithms import build_schedule
    from optcc.algorithms.registry import choose
    chosen = choose(cluster)
    which = chosen.name
    try:
        if small:
            _add_schedule(out, "optcc", build_schedule("optcc", cluster, segments), t0, lb, prove, notes)
            out["algorithms"]["optcc"]["source"] = f"schedule ({which})"
        else:
            out["algorithms"]["optcc"] = _entry(chosen.slot_time(cluster, segments), t0, lb, None,
                                                f"closed form ({which})")
    except OptccError as exc:
        _unavailable(out, "optcc", f"{which}: {exc}")
        notes.append(f"optcc: {which} refused this cluster: {exc}")


def _add_rings(out, cluster, small, t0, lb, prove, notes) -> None:
    """g = 1: the ring with the stragglers on it (PXN) and without failures; their closed form
    is baselines.flat_ring_slot_time, ℓ_max·2(p−1)/(p·g), which is the ring's at g = 1.
    g > 1: the flat ring over all p GPUs with and without the straggler (NCCLNoFailure is the
    fault-free one, PAPER.md's derived reading) and the hierarchical ring."""
    from optcc.algorithms import baselines as BL
    algos = out["algorithms"]
    fault_free = Cluster.build(cluster.p, cluster.g, bandwidth=cluster.bandwidth,
                               nvlink_bandwidth=cluster.nvlink_bandwidth, alpha=cluster.alpha)
    if cluster.g == 1:
        if small:
            from optcc.algorithms.ring import ring_allreduce
            _add_schedule(out, "ring_pxn", ring_allreduce(cluster, 1), t0, lb, prove, notes)
        else:
            algos["ring_pxn"] = _entry(BL.flat_ring_slot_time(cluster), t0, lb, None, "closed form")
        algos["ring_no_failure"] = _entry(BL.flat_ring_slot_time(fault_free), t0, lb, None,
                                          "closed form (no straggler)")
        return
    rows = [("ring_pxn", cluster, BL.flat_ring_allreduce, BL.flat_ring_slot_time, "flat ring, straggler on it"),
            ("ring_no_failure", fault_free, BL.flat_ring_allreduce, BL.flat_ring_slot_time,
             "flat ring, no straggler (NCCLNoFailure)"),
            ("hierarchical_ring", cluster, BL.hierarchical_ring_allreduce, BL.hierarchical_ring_slot_time,
             "hierarchical ring")]
    for name, on, build, closed, what in rows:
        try:
            if small:
                _add_schedule(out, name, build(on), t0, lb, prove, notes)
                algos[name]["source"] = f"schedule ({what})"
            else:
                algos[name] = _entry(closed(on), t0, lb, None, f"closed form ({what})")
        except OptccError as exc:
            _unavailable(out, name, f"{what}: {exc}")


def _add_r2ccl(out, cluster, small, t0, lb, prove, notes) -> None:
    """R2CCL (K = 4 chunks): g = 1 with one degraded node, or g > 1 with one degraded server
    (node level, optcc.algorithms.baselines.r2ccl_server_allreduce). Small p: the Schedule with
    S = p broadcast sub-pieces (its chain fill (N−2)·Y/(K·S) stays below Y/K); larger p: the
    S → ∞ cost model (PAPER.md's formula with the (1 + 1/K) factor), labelled "model"."""
    from optcc.algorithms import baselines as BL
    try:
        if cluster.g == 1:
            build, closed = BL.r2ccl_allreduce, BL.r2ccl_slot_time
        else:
            build, closed = BL.r2ccl_server_allreduce, BL.r2ccl_server_slot_time
        if small:
            s = max(8, cluster.p)
            _add_schedule(out, "r2ccl", build(cluster, 4, s), t0, lb, prove, notes)
            out["algorithms"]["r2ccl"]["source"] = f"schedule (K = 4, S = {s})"
        else:
            out["algorithms"]["r2ccl"] = _entry(closed(cluster, 4, None), t0, lb, None, "model (K = 4, S → ∞)")
    except OptccError as exc:
        _unavailable(out, "r2ccl", str(exc))


def _entry(time_units: Fraction, t0: Fraction, lb: Fraction | None, proved, source: str, **extra) -> dict:
    return row(time_units, t0, lb, proved=proved, source=source, **extra)


def _add_schedule(out: dict, name: str, schedule, t0, lb, prove: bool, notes: list) -> None:
    from optcc_app.compose.timing_report import time_schedule

    rep = time_schedule(schedule)
    proved = None
    properties = None
    if prove:
        from verifier import prove_allreduce
        proof = prove_allreduce(schedule)
        proved = bool(proof.proved)
        properties = dict(proof.properties)
        if not proved:
            failed = [k for k, v in properties.items() if not v]
            message = (proof.counterexample or {}).get("message", proof.counterexample)
            notes.append(f"{name}: NOT proved ({', '.join(failed)} failed; "
                         f"{', '.join(k for k, v in properties.items() if v)} hold): {message}")
    if rep.violation is not None:
        notes.append(f"{name}: capacity violated: {rep.violation.describe(schedule)}")
    out["algorithms"][name] = _entry(rep.slot_time, t0, lb, proved, "schedule",
                                     event_time=float(rep.event_time), capacity=rep.capacity,
                                     flows=len(schedule.flows), properties=properties)
