"""The paper's "within 2–6%" and O(1/p) claims under each latency preset (optcc.latency).

For each preset (alpha, simai, nccl) and grid point: OptCC at auto k (optcc.segments, closed
forms of optcc.model_time), NCCLNoFailure (the fault-free ring, g = 1, or the flat ring, g > 1,
under the same latency model: model_time "ring", k = 1) and the lower bound plus one o + Li + L
(derived: a flow's last byte must leave the bottleneck port, which it held for o, and land L
later, Li after its data was ready). A point where that bound alone is over the claim's
tolerance is *bound-limited*: no schedule can meet the claim there, so it is listed, not counted
against OptCC. The row's `verdict` is the simai one (the paper ran SimAI); `verdicts` holds all.
"""
from __future__ import annotations

from fractions import Fraction

from bounds.closed_form import lower_bound
from optcc.cluster import Cluster
from optcc.latency import PRESET_NAMES
from optcc.latency import units as latency_units
from optcc.model_time import model_time
from optcc.segments import K_MAX, auto_segments
from paper_checks import settings as S

PASS, FAIL = "PASS", "FAIL"
VERDICT_MODEL = "simai"          # the paper's evaluation ran SimAI


def cluster(p: int, g: int, ells, model: str) -> Cluster:
    """ℓ (one straggler, or the straggler server's g GPUs) or a tuple (ℓ1, ℓ2, …) on ranks 0, 1, …
    (g = 1) or on servers 0, 1, … (g > 1, all g GPUs of server i at ℓ_i: optcc_model.rails_cluster)."""
    if isinstance(ells, tuple) and g > 1:
        strag = {i * g + j: Fraction(e) for i, e in enumerate(ells) for j in range(g)}
    elif isinstance(ells, tuple):
        strag = {i: Fraction(e) for i, e in enumerate(ells)}
    else:
        strag = {i: Fraction(ells) for i in range(g)}
    return Cluster.build(p, g, strag, bandwidth=S.NIC_BANDWIDTH, nvlink_bandwidth=S.NVLINK_BANDWIDTH,
                         latency_model=model)


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
               k_max: int = K_MAX) -> dict:
    """Overheads over NCCLNoFailure at every point, the bound-limited points and the verdict
    (auto k ≤ k_max)."""
    per, bound, limited, invalid = {}, {}, [], []
    tol = (limit_percent + rounding_pp) / 100
    for ells in ells_list:
        key_ell = ",".join(str(e) for e in ells) if isinstance(ells, tuple) else str(ells)
        for p in ps:
            key = f"{key_ell}@{p}"
            ring = nccl_time(p, g, model, n)
            t, k, valid = optcc_time(p, g, ells, model, n, k_max)
            per[key] = (float(t / ring - 1), k)
            bound[key] = float(bound_time(p, g, ells, model, n) / ring - 1)
            if bound[key] > tol:
                limited.append(key)
            if not valid:
                invalid.append(key)
    counted = {key: v for key, v in per.items() if key not in limited}
    worst_key = max(counted, key=lambda key: counted[key][0]) if counted else None
    worst = counted[worst_key][0] if counted else None
    verdict = PASS if worst is not None and worst <= tol and not invalid else FAIL
    return {"optcc_overhead_and_k": per, "bound_overhead_vs_nccl": bound, "bound_limited": limited,
            "not_modelled": invalid, "worst_key": worst_key, "worst": worst, "verdict": verdict}


def all_models(g: int, ps, ells_list, limit_percent: float, rounding_pp: float, n: int = S.MESSAGE_BYTES,
               k_max: int = K_MAX) -> dict:
    return {m: grid_under(m, g, ps, ells_list, limit_percent, rounding_pp, n, k_max) for m in PRESET_NAMES}


def gap_under(model: str, p: int, g: int, ell, n: int = S.MESSAGE_BYTES) -> dict:
    """fig10-gap-p16 under one model: OptCC's and the bound's gap to NCCLNoFailure."""
    ring = nccl_time(p, g, model, n)
    t, k, valid = optcc_time(p, g, ell, model, n)
    gap, bgap = float(t / ring - 1), float(bound_time(p, g, ell, model, n) / ring - 1)
    return {"optcc_gap": gap, "k": k, "bound_gap": bgap, "difference_pp": 100 * (gap - bgap), "valid": valid}


def o1p_overheads(model: str, ell, ps, n: int = S.MESSAGE_BYTES) -> tuple[list[float], list[int]]:
    """OptCC (one straggler, g = 1, auto k) over the fault-free ring under one model, per p."""
    out, ks = [], []
    for p in ps:
        t, k, _ = optcc_time(p, 1, ell, model, n)
        out.append(float(t / nccl_time(p, 1, model, n) - 1))
        ks.append(k)
    return out, ks


def _pct(x) -> str:
    return f"{100 * float(x):.2f}%"


def attach(row, models: dict, value_of):
    """Give a claims.Row its per-preset verdicts; `verdict` and `our_value` become the simai ones.

    The issue-7 α-β numbers stay in `details` (their verdict and value under *_alpha_issue7)."""
    row.details["verdict_alpha_issue7"] = row.verdict
    row.details["our_value_alpha_issue7"] = row.our_value
    row.details["latency_models"] = models
    row.verdicts = {m: r["verdict"] for m, r in models.items()}
    row.verdict = row.verdicts[VERDICT_MODEL]
    row.our_value = value_of(models[VERDICT_MODEL])
    parts = []
    for m, r in models.items():
        text = f"{m}: {r['verdict']}"
        if r.get("worst") is not None:
            text += f" (worst {_pct(r['worst'])} at {r['worst_key']}, k = {r['optcc_overhead_and_k'][r['worst_key']][1]})"
        if r.get("bound_limited"):
            text += f", bound-limited {', '.join(r['bound_limited'])}"
        if r.get("summary"):
            text += f" ({r['summary']})"
        parts.append(text)
    row.ours = ("per latency model, auto k: " + "; ".join(parts) + ". Issue 7's α-β (α = 5 µs, best of "
                f"K_CANDIDATES): {row.ours}")
    row.model = ("closed-form model time (optcc.model_time) at auto k under each preset (paper_checks.per_model; "
                 "verdict = simai, the paper's simulator). " + row.model)
    return row


def attach_grid(row, g: int, ps, ells, rounding_pp: float, k_max: int = K_MAX):
    """`attach` for a "within 6% of NCCLNoFailure" row over its grid (auto k ≤ k_max)."""
    models = all_models(g, ps, ells, 6.0, rounding_pp, k_max=k_max)
    return attach(row, models, lambda r: None if r["worst"] is None else 100 * r["worst"])
