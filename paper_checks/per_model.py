"""The paper's "within 2–6%" and O(1/p) claims under each latency preset (optcc.latency).

For each preset (alpha, simai, nccl) and grid point: OptCC at auto k (optcc.segments, closed
forms of optcc.model_time), NCCLNoFailure (the fault-free ring, g = 1, or the flat ring, g > 1,
under the same latency model: model_time "ring", k = 1) and the lower bound plus one o + Li + L
(derived: a flow's last byte must leave the bottleneck port, which it held for o, and land L
later, Li after its data was ready). A point where that bound alone is over the claim's
tolerance FAILs, *refuted by the bound*: no schedule can meet the claim there (listed in
`refuted_by_bound`). The row's `verdict` is the simai one (the paper ran SimAI); `verdicts` holds all.
"""
from __future__ import annotations

import logging
import time
from fractions import Fraction

from bounds.closed_form import lower_bound
from optcc.cluster import Cluster
from optcc.latency import PRESET_NAMES
from optcc.latency import units as latency_units
from optcc.model_time import model_time
from optcc.segments import K_MAX, auto_segments
from paper_checks import event_checks as E
from paper_checks import settings as S

log = logging.getLogger("paper_checks")      # the full fit's progress, a point at a time (the CLI prints it)

PASS, FAIL, UNDECIDED = "PASS", "FAIL", E.UNDECIDED
VERDICT_MODEL = "simai"          # the paper's evaluation ran SimAI


def cluster(p: int, g: int, ells, model: str) -> Cluster:
    """ℓ (one straggler, or the straggler server's g GPUs) or a tuple (ℓ1, ℓ2, …) on ranks 0, 1, …
    (g = 1) or on servers 0, 1, … (g > 1, all g GPUs of server i at ℓ_i: optcc_model.rails_cluster),
    at the settings' NIC bandwidth (event_checks.cluster builds it)."""
    return E.cluster(p, g, ells, model)


def nccl_time(p: int, g: int, model: str, n: int) -> Fraction:
    c = Cluster.build(p, g, bandwidth=S.NIC_BANDWIDTH, nvlink_bandwidth=S.NVLINK_BANDWIDTH, latency_model=model)
    return model_time("ring", c, 1, n).time


def optcc_time(p: int, g: int, ells, model: str, n: int, k_max: int = K_MAX) -> tuple[Fraction, int, bool]:
    """(model time n/B, auto k ≤ k_max, valid) of OptCC at this point."""
    k, t = auto_segments("optcc", cluster(p, g, ells, model), n, k_max)
    return t.time, k, t.valid


def bound_time(p: int, g: int, ells, model: str, n: int) -> Fraction:
    c = cluster(p, g, ells, model)
    o, li, lat = latency_units(c, n)
    return lower_bound(c) + o + li + lat


def grid_under(model: str, g: int, ps, ells_list, limit_percent: float, rounding_pp: float, n: int,
               k_max: int = K_MAX, bandwidth=S.NIC_BANDWIDTH, event: bool = True) -> dict:
    """Overheads over NCCLNoFailure's event time at every point (paper_checks.event_checks: the
    event time where OptCC's schedules are small enough, else its closed-form upper bound), the
    points refuted by the bound, the undecided points and the verdict: FAIL if a point FAILs (by
    event time or refuted by the bound), else `undecided` if one is undecided, else PASS."""
    per, bound, refuted, invalid, points = {}, {}, [], [], {}
    tol = (limit_percent + rounding_pp) / 100
    for ells in ells_list:
        key_ell = ",".join(str(e) for e in ells) if isinstance(ells, tuple) else str(ells)
        for p in ps:
            key = f"{key_ell}@{p}"
            deep = E.DEEP_FLOW_CAP if model == VERDICT_MODEL and bandwidth == S.NIC_BANDWIDTH else None
            pt = E.point(p, g, ells, model, n, tol, bandwidth, k_max, event=event and p <= E.P_EVENT_MAX,
                         deep_cap=deep)
            points[key] = pt
            per[key] = (pt["overhead"], pt["k"])
            bound[key] = pt["bound_overhead"]
            if pt["decided_by"] == E.REFUTED_BY_BOUND:
                refuted.append(key)
            if not pt["closed_form_valid"]:
                invalid.append(key)
            if deep:               # the verdict column: also its verdict at each fixed k (no search)
                pt["fixed_k"] = {str(k): E.fixed_k(p, g, ells, model, n, tol, k, bandwidth) for k in E.FIXED_K}
    fails = [key for key, pt in points.items() if pt["verdict"] == FAIL]
    undecided = [key for key, pt in points.items() if pt["verdict"] == UNDECIDED]
    pool = fails or [key for key, pt in points.items() if pt["overhead"] is not None]
    worst_key = max(pool, key=lambda key: points[key]["overhead"]) if pool else None
    worst = points[worst_key]["overhead"] if worst_key else None
    verdict = FAIL if fails else (UNDECIDED if undecided else PASS)
    at_lat = {str(f): _worst({pt["at_latency"][str(f)]["verdict"] for pt in points.values()}) for f in E.LATENCY_FACTORS}
    by_disc = {d: _worst({pt["disciplines"][d]["verdict"] for pt in points.values()})
               for d in (E.DISCIPLINE,) + E.OTHER_DISCIPLINES}
    at_k = {}
    for k in E.FIXED_K if any("fixed_k" in pt for pt in points.values()) else ():
        vs = {pt["fixed_k"][str(k)]["verdict"] for pt in points.values()}
        at_k[str(k)] = FAIL if FAIL in vs else (UNDECIDED if UNDECIDED in vs else PASS)
    return {"verdict_by_discipline": by_disc, "discipline": E.DISCIPLINE,
            "verdict_at_latency": at_lat, "fragile": E.flips(verdict, at_lat.values()),
            "fragile_points": [key for key, pt in points.items() if pt["fragile"]],
            "verdict_at_fixed_k": at_k, "optcc_overhead_and_k": per, "bound_overhead_vs_nccl": bound, "refuted_by_bound": refuted,
            "not_modelled": invalid, "worst_key": worst_key, "worst": worst, "verdict": verdict,
            "undecided": undecided, "failed": fails, "points": points, "bandwidth_gbps": E.gbps(bandwidth),
            "decided_by": {key: pt["decided_by"] for key, pt in points.items()}}


def _worst(verdicts: set) -> str:
    """A row's verdict from its points': FAIL if one FAILs, else undecided if one is, else PASS."""
    return FAIL if FAIL in verdicts else (UNDECIDED if UNDECIDED in verdicts else PASS)


def all_models(g: int, ps, ells_list, limit_percent: float, rounding_pp: float, n: int = S.MESSAGE_BYTES,
               k_max: int = K_MAX, bandwidth=S.NIC_BANDWIDTH, event: bool = True) -> dict:
    return {m: grid_under(m, g, ps, ells_list, limit_percent, rounding_pp, n, k_max, bandwidth, event)
            for m in PRESET_NAMES}


# 100 GB/s (issue 24): closed-form upper bounds against NCCLNoFailure's exact event time, so a point
# there PASSes or is undecided, FAILing only where the lower bound alone is over the tolerance (event
# searches at both bandwidths cost twice the CPU).
EVENT_AT_100 = False


def gap_under(model: str, p: int, g: int, ell, n: int = S.MESSAGE_BYTES, bandwidth=S.NIC_BANDWIDTH,
              rounding_pp: float = 0.5) -> dict:
    """fig10-gap-p16 under one model: OptCC's gap to NCCLNoFailure (event time, or its upper bound
    where the schedules are too large) and the bound's; the verdict (FAIL only by event time)."""
    pt = E.point(p, g, ell, model, n, 1.0, bandwidth, event=bandwidth == S.NIC_BANDWIDTH or EVENT_AT_100)
    gap, bgap = pt["overhead"], pt["bound_overhead"]
    diff = 100 * (gap - bgap)
    exact = pt["decided_by"] == "event time" and pt["event_complete"]
    verdict = PASS if abs(diff) <= rounding_pp else (FAIL if exact else UNDECIDED)
    at_lat = {}
    for f, a in pt["at_latency"].items():       # OptCC at the point's k (E._at_latencies), the bound's gap there
        if a["overhead"] is None:
            at_lat[f] = UNDECIDED
        else:
            ok = abs(100 * (a["overhead"] - a["bound_overhead"])) <= rounding_pp
            at_lat[f] = PASS if ok else (FAIL if exact else UNDECIDED)
    return {"optcc_gap": gap, "k": pt["k"], "bound_gap": bgap, "difference_pp": diff, "valid": pt["closed_form_valid"],
            "decided_by": pt["decided_by"], "verdict": verdict, "point": pt, "bandwidth_gbps": E.gbps(bandwidth),
            "verdict_at_latency": at_lat, "fragile": E.flips(verdict, at_lat.values())}


def o1p_overheads(model: str, ell, ps, n: int = S.MESSAGE_BYTES, bandwidth=S.NIC_BANDWIDTH,
                  full: bool = False) -> tuple:
    """OptCC (one straggler, g = 1) over the fault-free ring's event time under one model, per p:
    (overheads, ks, decided_by, lower ends, at) — event time where the schedules are small enough, else
    the closed-form upper bound; the lower end is the event time, or the lower bound + o + Li + L
    (event_checks.bound_time) where only the upper bound is known; `at`: per latency factor
    (event_checks.LATENCY_FACTORS) the overheads at each p's k (upper ends) and the bound's.
    `full`: every p searched by event time with schedules of up to event_checks.FIT_FLOW_CAP flows
    (minutes and about 10 GB at p = 1024; `optcc paper-checks --full-fit`)."""
    out, ks, how, low = [], [], [], []
    at: dict = {str(f): ([], []) for f in E.LATENCY_FACTORS}   # per factor: (upper ends, lower ends)
    event = full or all(p <= E.P_EVENT_MAX for p in ps)   # a fit is decided only with every p event-timed
    for p in ps:
        t0 = time.process_time()
        pt = E.point(p, 1, ell, model, n, 10.0, bandwidth, event=event, cap=E.FIT_FLOW_CAP if full else E.FLOW_CAP)
        if full:
            done = "complete" if pt["event_complete"] else "incomplete: the closed form stands"
            log.info("O(1/p) fit, %s, ℓ = %s, p = %d: event search at k = %s (%s, %d timings), %.1f s CPU",
                     model, ell, p, pt["event_k"], done, pt["event_evaluated"], time.process_time() - t0)
        exact = pt["event_complete"] and pt["event_overhead"] is not None
        out.append(pt["event_overhead"] if exact else pt["closed_form_overhead"])
        ks.append(pt["event_k"] if exact else pt["k_closed_form"])
        how.append("event time" if exact else "upper bound")
        low.append(pt["event_overhead"] if exact else pt["bound_overhead"])
        for f, (hi_f, lo_f) in at.items():     # the point's k at the scaled latency (E._at_latencies)
            a = pt["at_latency"][f]
            hi_f.append(a["overhead"])
            lo_f.append(a["bound_overhead"])
    return out, ks, how, low, at


def _pct(x) -> str:
    return f"{100 * float(x):.2f}%"


def _model_text(m: str, r: dict) -> str:
    text = f"{m}: {r['verdict']}"
    if r.get("worst") is not None and r.get("worst_key"):
        how = r.get("decided_by", {}).get(r["worst_key"], "")
        k = "" if how == E.REFUTED_BY_BOUND else f", k = {r['optcc_overhead_and_k'][r['worst_key']][1]}"
        text += f" (worst {_pct(r['worst'])} at {r['worst_key']}{k}" + (f", {how}" if how else "") + ")"
    if r.get("refuted_by_bound"):
        text += f", refuted by the bound {', '.join(r['refuted_by_bound'])}"
    if r.get("verdict_at_fixed_k"):
        text += " (with k fixed: " + ", ".join(f"k = {k} {v}" for k, v in r["verdict_at_fixed_k"].items()) + ")"
    if r.get("undecided"):
        text += f", undecided {', '.join(r['undecided'])} (only an upper bound over the tolerance)"
    if r.get("fragile"):
        text += f", fragile ({fragile_text(r['verdict'], r['verdict_at_latency'])})"
    if r.get("summary"):
        text += f" ({r['summary']})"
    return text


def fragile_text(verdict: str, at: dict) -> str:
    """'1.25λ: undecided' for each latency factor whose verdict differs from `verdict`."""
    return ", ".join(f"{float(Fraction(f)):g}λ: {v}" for f, v in at.items() if v != verdict and v in (PASS, FAIL))


def attach(row, models: dict, value_of, models_100: dict | None = None):
    """Give a claims.Row its per-preset verdicts; `verdict` and `our_value` become the simai ones
    (at settings.NIC_BANDWIDTH = 50 GB/s); `models_100`: the same at 100 GB/s (issue 24: the
    paper's axes imply about 100 GB/s per GPU), in details and `verdicts_by_bandwidth`.

    The issue-7 α-β numbers stay in `details` (their verdict and value under *_alpha_issue7)."""
    row.details["verdict_alpha_issue7"] = row.verdict
    row.details["our_value_alpha_issue7"] = row.our_value
    row.details["latency_models"] = models
    row.verdicts = {m: r["verdict"] for m, r in models.items()}
    row.verdicts_by_bandwidth = {E.gbps(S.NIC_BANDWIDTH): dict(row.verdicts)}
    row.details["fragile"] = {E.gbps(S.NIC_BANDWIDTH): {m: bool(r.get("fragile")) for m, r in models.items()}}
    row.verdict = row.verdicts[VERDICT_MODEL]
    row.our_value = value_of(models[VERDICT_MODEL])
    text = "; ".join(_model_text(m, r) for m, r in models.items())
    if models_100 is not None:
        row.details["latency_models_100GBps"] = models_100
        row.verdicts_by_bandwidth[E.gbps(2 * S.NIC_BANDWIDTH)] = {m: r["verdict"] for m, r in models_100.items()}
        row.details["fragile"][E.gbps(2 * S.NIC_BANDWIDTH)] = {m: bool(r.get("fragile")) for m, r in models_100.items()}
        text += ". At 100 GB/s: " + "; ".join(_model_text(m, r) for m, r in models_100.items())
    row.ours = ("per latency model, event times on both sides where OptCC's schedules are small enough (else "
                "OptCC's closed-form upper bound: PASS or undecided, never FAIL by it; a point whose lower bound alone is "
                "over the tolerance FAILs, refuted by the bound), 50 GB/s: " + text
                + ". Issue 7's α-β (α = 5 µs, best of K_CANDIDATES, closed forms): " + row.ours)
    row.discipline = (f"{E.DISCIPLINE} (each port one flow at a time in slot order: what the streaming runner "
                      f"does); each point also under {' and '.join(E.OTHER_DISCIPLINES)} at its k, and under "
                      f"{' and '.join(E.SEARCHED_DISCIPLINES)} at its own best k where over the tolerance at that k "
                      f"(verdict_by_discipline); NVLink streams below rate 1 (the rails', g > 1) at their stated "
                      f"rates, not shared max-min (optcc.timing's `nvlink`: the two differ by −0.6% to +15.2% at "
                      f"g = 8, 100 GB/s, docs/latency.md)")
    row.model = ("event model (optcc.timing, via optcc.event_timer) on both sides, k by an event-time search "
                 "(paper_checks.event_checks), else optcc.model_time's closed form as an upper bound, under each "
                 "preset (verdict = simai at 50 GB/s, the paper's simulator). " + row.model)
    return row


def attach_grid(row, g: int, ps, ells, rounding_pp: float, k_max: int = K_MAX):
    """`attach` for a "within 6% of NCCLNoFailure" row over its grid (auto k ≤ k_max), at 50 and 100 GB/s."""
    models = all_models(g, ps, ells, 6.0, rounding_pp, k_max=k_max)
    models_100 = all_models(g, ps, ells, 6.0, rounding_pp, k_max=k_max, bandwidth=2 * S.NIC_BANDWIDTH,
                            event=EVENT_AT_100)
    return attach(row, models, lambda r: None if r["worst"] is None else 100 * r["worst"], models_100)
