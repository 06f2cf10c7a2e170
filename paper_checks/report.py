"""Run every paper check and render the result (table text or JSON-able dict)."""
from __future__ import annotations

from optcc.latency import PRESET_NAMES
from paper_checks import claims, settings
from paper_checks.event_checks import REFUTED_BY_BOUND
from paper_checks.per_model import VERDICT_MODEL, fragile_text
from paper_checks.shared_port import cell as shared_port_cell

VERDICTS = (claims.PASS, claims.FAIL, claims.OPEN, claims.UNDECIDED, claims.READING)


def run_paper_checks(figures_dir: str | None = None, progress=None, rows=None, full_fit: bool = False) -> dict:
    """The report (JSON-able). `progress`: called after each row (claims.all_checks); `rows`:
    already computed claims rows (the test session computes them once); `full_fit`: the O(1/p)
    OptCC fits timed by event time at every p (claims.check_o1p_optcc)."""
    rows = claims.all_checks(progress, full_fit) if rows is None else rows
    summary = {v: sum(r.verdict == v for r in rows) for v in VERDICTS}
    by_model = {m: {v: sum(r.verdicts.get(m, r.verdict) == v for r in rows) for v in VERDICTS}
                for m in PRESET_NAMES}
    by_bw = {bw: {m: {v: sum(r.verdicts_by_bandwidth.get(bw, {}).get(m, r.verdict) == v for r in rows)
                      for v in VERDICTS} for m in PRESET_NAMES} for bw in ("50", "100")}
    figures = []
    if figures_dir:
        from paper_checks.figures import draw_figures
        figures = draw_figures(figures_dir)
    fragile = [r.id for r in rows if r.details.get("fragile", {}).get("50", {}).get(VERDICT_MODEL)]
    return {"settings": {**settings.settings_json(), "full_fit": full_fit}, "rows": [r.to_json() for r in rows], "fragile": fragile,
            "summary": summary, "summary_by_latency_model": by_model,
            "summary_by_bandwidth_gbps": by_bw, "verdict_model": VERDICT_MODEL,
            "figures": figures}


def render_text(report: dict) -> str:
    lines = []
    for r in report["rows"]:
        lines.append(f"[{r['verdict']}] {r['id']}: {r['claim']}  ({r['location']})")
        lines.append(f"    paper: {r['paper']}")
        lines.append(f"    ours:  {r['ours']}")
        lines.append(f"    model: {r['model']};  tolerance: {r['tolerance']}")
        lines.append(f"    port discipline: {r.get('discipline', '')}")
        if r.get("verdicts"):
            lines.append("    verdicts: " + ", ".join(f"{m} {v}" for m, v in r["verdicts"].items())
                         + f"  (the verdict above is {VERDICT_MODEL}'s)")
            fragile = [f"{m} at {bw} GB/s" for bw, ms in r["details"].get("fragile", {}).items() for m, x in ms.items() if x]
            if fragile:
                lines.append("    fragile (the verdict flips with o, Li, L × 3/4 or 5/4): " + ", ".join(fragile))
            at100 = r.get("verdicts_by_bandwidth", {}).get("100")
            if at100:
                lines.append("    at 100 GB/s: " + ", ".join(f"{m} {v}" for m, v in at100.items()))
        sp = r["details"].get("shared_port")
        if sp:
            lines.append(f"    shared-port LP schedule ({sp['latency_model']}, another port rule, not the verdict): "
                         + shared_port_cell(sp).replace("**", ""))
        if r.get("reading"):
            lines.append(f"    reading: {r['reading']}")
        margin = r["details"].get("margin_pp")
        if margin is not None and abs(margin) < claims.PERCENT_ROUNDING_PP:
            lines.append(f"    note:  knife-edge, {margin:+.2f} pp from the limit; the verdict depends on "
                         f"model details (α, the p grid)")
    s = report["summary"]
    lines.append("")
    def counts(c):
        return (f"{c['PASS']} PASS, {c['FAIL']} FAIL, {c['OPEN']} OPEN, {c['undecided']} undecided, "
                f"{c['reading']} reading")
    lines.append(f"{len(report['rows'])} claims: {counts(s)} "
                 f"(verdicts under the {VERDICT_MODEL} latency model, the paper's simulator, at 50 GB/s)")
    for m, c in report["summary_by_latency_model"].items():
        lines.append(f"  under {m}: {counts(c)}")
    for m, c in report.get("summary_by_bandwidth_gbps", {}).get("100", {}).items():
        lines.append(f"  under {m} at 100 GB/s: {counts(c)}")
    st = report["settings"]
    lines.append(f"setting (stands in for SimAI): B = {st['nic_bandwidth_bytes_per_s'] / 1e9:g} GB/s per GPU "
                 f"({st['nics_per_server']} NICs/server), α = {st['alpha_seconds'] * 1e6:g} µs, "
                 f"N = {st['message_bytes'] // 2**30} GiB, ℓ from NICs lost {st['ell_from_nics_lost']}")
    lines.append("unknown in the paper's setting:")
    lines += [f"  - {u}" for u in st["unknowns"]]
    for path in report["figures"]:
        lines.append(f"wrote {path}")
    return "\n".join(lines)


def _cell(verdict: str, r: dict | None) -> str:
    """A table cell: the verdict and, for per-model rows, the worst point and what decided it."""
    text = f"**{verdict}**"
    if not r:
        return text
    if "c0" in r:
        text += f" c0 = {r['c0']:+.4f}"
        if r.get("upper_bound_at_p"):
            lo, hi = r["c0_range"]
            text += f"; p ≥ {min(r['upper_bound_at_p'])} by bounds only: c0 ∈ [{lo:+.4f}, {hi:+.4f}]"
        elif r.get("full_fit"):
            text += "; every p by event time (--full-fit)"
        return text + _fragile(verdict, r)
    if "optcc_gap" in r:
        return text + (f" {100 * r['optcc_gap']:.2f}% vs bound {100 * r['bound_gap']:.2f}% "
                       f"(k = {r['k']}, {r['decided_by']})") + _fragile(verdict, r)
    if r.get("worst_key"):
        how = r.get("decided_by", {}).get(r["worst_key"], "")
        pt = r.get("points", {}).get(r["worst_key"], {})
        if how == REFUTED_BY_BOUND:          # no k: the bound holds for every schedule
            text += f" {100 * r['worst']:.2f}% at {r['worst_key']} ({how})"
        else:
            size = f", segment {pt['segment_bytes'] / 2**20:.1f} MiB" if pt.get("segment_bytes") else ""
            text += (f" {100 * r['worst']:.2f}% at {r['worst_key']} (k = {r['optcc_overhead_and_k'][r['worst_key']][1]}"
                     f"{size}{', ' + how if how else ''})")
    if r.get("undecided"):
        text += f"; undecided: {', '.join(r['undecided'])}"
    if r.get("refuted_by_bound"):
        text += f"; refuted by the bound: {', '.join(r['refuted_by_bound'])}"
    if r.get("verdict_at_fixed_k"):
        text += "; with k fixed: " + ", ".join(f"k = {k} {v}" for k, v in r["verdict_at_fixed_k"].items())
    return text + _fragile(verdict, r) + _disciplines(r)


def _disciplines(r: dict) -> str:
    """'; step: FAIL, shared: undecided': the row under the other port disciplines (each point at its k; under step also searched over k)."""
    by = r.get("verdict_by_discipline")
    if not by:
        return ""
    return "; " + ", ".join(f"{d}: {v}" for d, v in by.items() if d != r.get("discipline"))


def _fragile(verdict: str, r: dict) -> str:
    """'; **fragile**: 1.25λ undecided (…points)' where the verdict flips with o, Li, L × 3/4 or 5/4."""
    if not r.get("fragile"):
        return ""
    pts = r.get("fragile_points") or []
    return (f"; **fragile**: {fragile_text(verdict, r['verdict_at_latency'])}"
            + (f" (points {', '.join(pts)})" if pts else ""))


def render_markdown_table(report: dict) -> str:
    """The README / docs/paper_checks.md table: one row per claim, a column per latency preset at
    50 GB/s, simai at 100 GB/s, and the shared-port LP schedule (paper_checks.shared_port; a
    different port rule, never the verdict) where a row has one (regenerate: `optcc paper-checks --json > r.json` then
    `python -m paper_checks.report r.json`)."""
    lines = ["| claim | paper | alpha | simai (= verdict) | nccl | simai at 100 GB/s | shared-port LP schedule (simai) |",
             "|---|---|---|---|---|---|---|"]
    for r in report["rows"]:
        models = r["details"].get("latency_models", {})
        m100 = r["details"].get("latency_models_100GBps", {})
        cells = [_cell(r["verdicts"].get(m, r["verdict"]), models.get(m)) for m in PRESET_NAMES]
        at100 = r.get("verdicts_by_bandwidth", {}).get("100", {}).get(VERDICT_MODEL, r["verdict"])
        cells.append(_cell(at100, m100.get(VERDICT_MODEL)))
        cells.append(shared_port_cell(r["details"].get("shared_port")))   # another port rule: not the verdict
        lines.append(f"| {r['id']} | {r['paper']} | " + " | ".join(cells) + " |")
    s = report["summary"]
    lines.append("")
    lines.append(f"{len(report['rows'])} claims (simai at 50 GB/s, the verdict column): {s['PASS']} PASS, "
                 f"{s['FAIL']} FAIL, {s['undecided']} undecided, {s['reading']} reading, {s['OPEN']} OPEN; "
                 f"fragile (the verdict flips with o, Li, L × 3/4 or 5/4): "
                 f"{', '.join(report.get('fragile', [])) or 'none'}.")
    return "\n".join(lines)


if __name__ == "__main__":
    import json
    import sys
    with open(sys.argv[1]) as fh:
        print(render_markdown_table(json.load(fh)))
