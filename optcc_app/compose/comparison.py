"""Everything `optcc compare` prints: lower bound, LP/ILP optima, OptCC, rings, LP schedules.

Small clusters (p ≤ MATERIALIZE_MAX_P) get real schedules, timed by optcc.timing and proved by
the verifier; larger ones get the algorithms' closed forms (derived from the constructions and
tested equal to the generated schedules' slot times), reported with proved = None.
The rows are the records of optcc.algorithms.registry marked `compare`, in table order: OptCC
(whatever the table chooses: single straggler, m ≥ 2 stragglers, every GPU slow (all_slow), one
straggler server, or optcc_rails for other g > 1 slow sets); the ring (g = 1) or, for g > 1,
the flat ring with and without the straggler (NCCLNoFailure); the hierarchical ring (g > 1);
R2CCL (the g = 1 schedule or the node-level one for g > 1); then any other record marked
`compare` under its own name. The LP schedules come last, built from the LPs solved here
(lp_models.to_schedule, the records lp_shared and lp_exclusive of lp_models.algorithms).
A row that has no number says why (time null, source "not available").
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
            materialize_max_p: int = MATERIALIZE_MAX_P, progress=None) -> dict:
    """The comparison as a JSON-ready dict (keys as in issue #5). `progress(message)`, if given,
    hears of each row as it is done (the LPs, then every algorithm's row, built, timed, proved)."""
    check_segments(segments)
    if cluster.p <= materialize_max_p:             # schedules get built: bound their size first
        check_work(cluster, segments)
    started = time.perf_counter()
    done: set = set()

    def say(what: str, rows=None) -> None:
        """One line for `what` (rows None), else one per row of `rows` not reported yet."""
        if progress is None:
            return
        new = [r for r in rows if r not in done] if rows is not None else [None]
        done.update(new)
        for name in new:
            label = what if name is None else f"{what} {name}"
            a = out["algorithms"].get(name) if name is not None else None
            tail = "" if a is None else (f": {a['time']:.4f} n/B" if a.get("time") is not None else ": not available")
            if a is not None and a.get("proved") is not None:
                tail += ", proved" if a["proved"] else ", NOT proved"
            progress(f"{label}{tail} ({time.perf_counter() - started:.1f} s)")
    out: dict = {"algorithms": {}}
    t0 = fault_free_optimum(cluster.p, cluster.g)
    try:
        lb = lower_bound(cluster)
    except OptccError:
        lb = None
    notes: list[str] = []
    shared = solve_fluid_lp(cluster, "shared", solver)
    exclusive = solve_fluid_lp(cluster, "exclusive", solver)
    say(f"fluid LPs solved (shared {shared.objective}, exclusive {exclusive.objective})")
    for res in (shared, exclusive):
        if not res.optimal:
            notes.append(f"{res.capacity} LP: {res.status} ({res.solver}), no optimum reported")
    out.update({
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
    })
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
        say("ILP done", list(out["algorithms"]))

    small = cluster.p <= materialize_max_p
    from optcc.algorithms.registry import table
    for record in table():                  # every record that has a row of its own, in table order
        if record.compare:
            add = _ROWS.get(record.name, _add_record)
            add(out, record, cluster, segments, small, t0, lb, prove, notes)
            say("row", list(out["algorithms"]))
    if cluster.g == 1 and small:
        from lp_models.to_schedule import lp_schedule
        for capacity, res in (("shared", shared), ("exclusive", exclusive)):
            if res.optimal:
                _add_schedule(out, f"lp_schedule_{capacity}", lp_schedule(cluster, segments, capacity, lp=res),
                              t0, lb, prove, notes)
                say("row", list(out["algorithms"]))
    out["seconds"] = time.perf_counter() - started
    return out


def _unavailable(out: dict, name: str, reason: str) -> None:
    """A row that says why there is no number (time and ratios null)."""
    out["algorithms"][name] = row(None, None, None, proved=None, source=f"not available: {reason}")


def _add_record(out, record, cluster, segments, small, t0, lb, prove, notes) -> None:
    """A record without a presentation of its own: its schedule (small p) or its slot_time, under
    its name; a refusal (accepts, or the build's OptccError) is a row saying why."""
    from optcc.algorithms import build_schedule
    k = segments if record.segmented else 1
    ok, why = record.accepts(cluster)
    if not ok:
        _unavailable(out, record.name, why)
        return
    try:
        if small:
            _add_schedule(out, record.name, build_schedule(record.name, cluster, k), t0, lb, prove, notes)
        else:
            out["algorithms"][record.name] = _entry(record.slot_time(cluster, k), t0, lb, None, "closed form")
    except OptccError as exc:
        _unavailable(out, record.name, str(exc))


def _add_optcc(out, record, cluster, segments, small, t0, lb, prove, notes) -> None:
    from optcc.algorithms import build_schedule
    from optcc.algorithms.registry import served
    chosen = served(record.name, cluster)
    which = chosen.name
    try:
        if small:
            _add_schedule(out, "optcc", build_schedule(record.name, cluster, segments), t0, lb, prove, notes)
            out["algorithms"]["optcc"]["source"] = f"schedule ({which})"
        else:
            out["algorithms"]["optcc"] = _entry(chosen.slot_time(cluster, segments), t0, lb, None,
                                                f"closed form ({which})")
    except OptccError as exc:
        _unavailable(out, "optcc", f"{which}: {exc}")
        notes.append(f"optcc: {which} refused this cluster: {exc}")


def _add_ring(out, record, cluster, segments, small, t0, lb, prove, notes) -> None:
    """The "ring" record (k = 1) with the stragglers on it (PXN) and without failures; its
    closed form is ℓ_max·2(p−1)/(p·g). g = 1: the ring, the fault-free one as a closed form;
    g > 1: the flat ring over all p GPUs, with and without the straggler (NCCLNoFailure is the
    fault-free one, PAPER.md's derived reading)."""
    algos = out["algorithms"]
    fault_free = Cluster.build(cluster.p, cluster.g, bandwidth=cluster.bandwidth,
                               nvlink_bandwidth=cluster.nvlink_bandwidth, overhead=cluster.overhead)
    if cluster.g == 1:
        if small:
            _add_schedule(out, "ring_pxn", record.build(cluster, 1), t0, lb, prove, notes)
        else:
            algos["ring_pxn"] = _entry(record.slot_time(cluster, 1), t0, lb, None, "closed form")
        algos["ring_no_failure"] = _entry(record.slot_time(fault_free, 1), t0, lb, None,
                                          "closed form (no straggler)")
        return
    _add_row(out, "ring_pxn", record, cluster, small, t0, lb, prove, notes, "flat ring, straggler on it")
    _add_row(out, "ring_no_failure", record, fault_free, small, t0, lb, prove, notes,
             "flat ring, no straggler (NCCLNoFailure)")


def _add_hierarchical(out, record, cluster, segments, small, t0, lb, prove, notes) -> None:
    """g > 1 only (at g = 1 it is the ring)."""
    if record.accepts(cluster)[0]:
        _add_row(out, "hierarchical_ring", record, cluster, small, t0, lb, prove, notes, "hierarchical ring")


def _add_row(out, name, record, on, small, t0, lb, prove, notes, what) -> None:
    """One k = 1 row of `record` on cluster `on`: its schedule (small p) or closed form."""
    try:
        if small:
            _add_schedule(out, name, record.build(on, 1), t0, lb, prove, notes)
            out["algorithms"][name]["source"] = f"schedule ({what})"
        else:
            out["algorithms"][name] = _entry(record.slot_time(on, 1), t0, lb, None, f"closed form ({what})")
    except OptccError as exc:
        _unavailable(out, name, f"{what}: {exc}")


def _add_r2ccl(out, record, cluster, segments, small, t0, lb, prove, notes) -> None:
    """R2CCL (K = 4 chunks): g = 1 with one degraded node, or g > 1 with one degraded server
    (node level). Small p: the record's Schedule (S = max(8, p) broadcast sub-pieces, its chain
    fill (N−2)·Y/(K·S) stays below Y/K); larger p: the S → ∞ cost model (PAPER.md's formula
    with the (1 + 1/K) factor), labelled "model"."""
    from optcc.algorithms import baselines as BL
    from optcc.algorithms.baselines.record import R2CCL_CHUNKS
    try:
        if small:
            s = max(8, cluster.p)
            _add_schedule(out, "r2ccl", record.build(cluster, 1), t0, lb, prove, notes)
            out["algorithms"]["r2ccl"]["source"] = f"schedule (K = {R2CCL_CHUNKS}, S = {s})"
        else:
            closed = BL.r2ccl_slot_time if cluster.g == 1 else BL.r2ccl_server_slot_time
            out["algorithms"]["r2ccl"] = _entry(closed(cluster, R2CCL_CHUNKS, None), t0, lb, None,
                                                f"model (K = {R2CCL_CHUNKS}, S → ∞)")
    except OptccError as exc:
        _unavailable(out, "r2ccl", str(exc))


_ROWS = {"optcc": _add_optcc, "ring": _add_ring, "hierarchical_ring": _add_hierarchical, "r2ccl": _add_r2ccl}
# how compare shows these records (row names and sources of issue #5); any other record with
# compare=True gets _add_record


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
