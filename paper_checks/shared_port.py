"""The shared-port LP schedule beside OptCC in the g > 1 "within 6%" rows: what a schedule can reach
when a NIC splits its bandwidth among concurrent flows (as SimAI's NICs do), a different port
rule from OptCC's one flow per NIC direction. Its own column and `details.shared_port`, never
OptCC's verdict.

Per grid point, under the simai preset at settings.NIC_BANDWIDTH: `lp_shared` for g > 1
(lp_models.to_schedule.lp_server_schedule), event-timed exactly (optcc.event_timer on its array
form, arrays_servers.lifted_event_arrays) over NCCLNoFailure's event time
(event_checks.nccl_event). k (cost rule, derived): K_FIRST; where that is over the tolerance,
also K_SECOND if its flow estimate is ≤ FLOW_CAP; the better of the two. Under simai (o = 0)
the latency adds at most four hops whatever k (tests/lp_models/test_lp_server_schedule.py), so the event
time falls with k as the fill/drain slot and the NVLink lead and tail shrink (≈ (1 + 1/k)·T_LP +
2(g−1)/(k·g·s_nv)); the cap keeps the table's cost (docs/paper_checks.md).

Verdict by event_checks' rule: FAIL, refuted by the bound, where the lower bound alone is over
the tolerance (it holds for every schedule, this one included); PASS where the event time is
within it; else `undecided` (a fixed-k event time is not a complete search, so it never FAILs by
it); `undecided` with no time where a point is not computed (p over the row's p_max, or a grid
beyond int64).
"""
from __future__ import annotations

from paper_checks import event_checks as E
from paper_checks import settings as S

MODEL = "simai"
K_FIRST, K_SECOND = 64, 128       # cost rule (module docstring)
FLOW_CAP = 2_500_000              # flows of one schedule at K_SECOND (estimate; ≈ 1 s of event timing per 10⁶)
# p_max per row (cost rule): the largest p event-timed; ≈ 1 s of CPU per 10⁶ flows, and a row's
# points at p_max cost ≈ 0.1 s (q = 4), 0.4 s (q = 8), 1.6 s (q = 16) at k = 64 (docs/paper_checks.md)
P_MAX = {"fig21-within-6pct-a-g8": 128, "within-6pct-fig22": 64, "within-6pct-fig10": 32}
PORT_RULE = "shared ports (a NIC's bandwidth splits among concurrent flows), lp_shared"


def flow_estimate(p: int, g: int, k: int) -> int:
    """Upper bound on lp_server_schedule's flows with every server a root (derived: each of the
    q(q−1) ordered server pairs carries 2 NIC flows per segment and root, lifted g times; each
    server runs an RS and an AG batch of g(g−1) NVLink flows per touched piece)."""
    q = p // g
    return 2 * k * q * (q - 1) * g + 2 * q * (k * q) * (g - 1) * g


def event_overhead(p: int, g: int, ells, k: int, n: int = S.MESSAGE_BYTES) -> tuple[float, int] | None:
    """(event time / NCCLNoFailure's − 1, flows) of lp_shared at k under simai; None where the
    grid is beyond int64."""
    from lp_models.to_schedule import lp_server_plan
    from optcc.algorithms.servers.arrays import lifted_event_arrays
    from optcc.event_timer import Prepared
    from optcc.latency import units as latency_units
    c = E.cluster(p, g, ells, MODEL)
    plan, _ = lp_server_plan(c, k, "shared")
    fa = lifted_event_arrays(c, plan)
    flows = len(fa)
    try:
        t = Prepared.from_arrays(c, fa).event_time(*latency_units(c, n))
    except OverflowError:
        return None
    return float(t / E.nccl_event(p, g, MODEL, n) - 1), flows


def point(p: int, g: int, ells, tol: float, n: int = S.MESSAGE_BYTES) -> dict:
    """One grid point (module docstring): overhead, k, flows, verdict, what decided it."""
    c = E.cluster(p, g, ells, MODEL)
    bound = float(E.bound_time(c, n) / E.nccl_event(p, g, MODEL, n) - 1)
    out = {"bound_overhead": bound, "overhead": None, "k": None, "flows": None, "tried_k": []}
    if bound > tol:
        out.update(verdict=E.FAIL, decided_by=E.REFUTED_BY_BOUND)
        return out
    best = None
    for k in (K_FIRST, K_SECOND):
        if k == K_SECOND and (best is not None and best[0] <= tol or flow_estimate(p, g, k) > FLOW_CAP):
            break
        out["tried_k"].append(k)
        r = event_overhead(p, g, ells, k, n)
        if r is not None and (best is None or r[0] < best[0]):
            best = (r[0], k, r[1])
    if best is None:
        out.update(verdict=E.UNDECIDED, decided_by="not computed (grid beyond int64)")
        return out
    out.update(overhead=best[0], k=best[1], flows=best[2], decided_by="event time",
               verdict=E.PASS if best[0] <= tol else E.UNDECIDED)
    return out


def grid(g: int, ps, ells_list, limit_percent: float, rounding_pp: float, p_max: int) -> dict:
    """details.shared_port of a row: every point of its grid (those with p > p_max: undecided, not
    computed, cost rule) and the row's verdict by per_model.grid_under's aggregation."""
    tol = (limit_percent + rounding_pp) / 100
    points = {}
    for ells in ells_list:
        key_ell = ",".join(str(e) for e in ells) if isinstance(ells, tuple) else str(ells)
        for p in ps:
            key = f"{key_ell}@{p}"
            if p > p_max:
                points[key] = {"bound_overhead": None, "overhead": None, "k": None, "flows": None, "tried_k": [],
                               "verdict": E.UNDECIDED, "decided_by": f"not computed (cost rule: p ≤ {p_max})"}
            else:
                points[key] = point(p, g, ells, tol)
    refuted = [key for key, pt in points.items() if pt["decided_by"] == E.REFUTED_BY_BOUND]
    timed = [key for key, pt in points.items() if pt["overhead"] is not None]
    worst_key = max(timed, key=lambda key: points[key]["overhead"]) if timed else None
    undecided = [key for key, pt in points.items() if pt["verdict"] == E.UNDECIDED]
    verdict = E.FAIL if refuted else (E.UNDECIDED if undecided else E.PASS)
    return {"port_rule": PORT_RULE, "latency_model": MODEL, "bandwidth_gbps": E.gbps(S.NIC_BANDWIDTH),
            "k_rule": f"k = {K_FIRST}; where over the tolerance also {K_SECOND} if its flow estimate ≤ {FLOW_CAP}; "
                      f"p ≤ {p_max}",
            "points": points, "verdict": verdict, "worst_key": worst_key,
            "worst": points[worst_key]["overhead"] if worst_key else None, "undecided": undecided,
            "refuted_by_bound": refuted}


def attach(row, g: int, ps, ells_list, rounding_pp: float, limit_percent: float = 6.0):
    """Put the shared-port column into a claims.Row's details at P_MAX[row.id] (the row's verdict
    is unchanged)."""
    row.details["shared_port"] = grid(g, ps, ells_list, limit_percent, rounding_pp, P_MAX[row.id])
    return row


def cell(r: dict | None) -> str:
    """The markdown table's cell (paper_checks.report): verdict, worst point, what was not computed."""
    if not r:
        return "–"
    text = f"**{r['verdict']}**"
    if r["refuted_by_bound"]:
        text += f" refuted by the bound at {', '.join(r['refuted_by_bound'])}; worst timed point"
    if r["worst_key"]:
        pt = r["points"][r["worst_key"]]
        text += f" {100 * r['worst']:.2f}% at {r['worst_key']} (k = {pt['k']})"
    timed = [f"{key} {100 * pt['overhead']:.2f}%" for key, pt in r["points"].items() if pt["overhead"] is not None]
    if len(timed) > 1:
        text += f"; per point: {', '.join(timed)}"
    over = [key for key in r["undecided"] if r["points"][key]["overhead"] is not None]
    missing = [key for key in r["undecided"] if r["points"][key]["overhead"] is None]
    if over:
        text += f"; over at fixed k: {', '.join(over)}"
    if missing:
        text += f"; not computed: {', '.join(missing)}"
    return text
