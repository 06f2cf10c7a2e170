"""Run every paper check and render the result (table text or JSON-able dict)."""
from __future__ import annotations

from optcc.latency import PRESET_NAMES
from paper_checks import claims, settings
from paper_checks.per_model import VERDICT_MODEL

VERDICTS = (claims.PASS, claims.FAIL, claims.OPEN)


def run_paper_checks(figures_dir: str | None = None) -> dict:
    rows = claims.all_checks()
    summary = {v: sum(r.verdict == v for r in rows) for v in VERDICTS}
    by_model = {m: {v: sum(r.verdicts.get(m, r.verdict) == v for r in rows) for v in VERDICTS}
                for m in PRESET_NAMES}
    figures = []
    if figures_dir:
        from paper_checks.figures import draw_figures
        figures = draw_figures(figures_dir)
    return {"settings": settings.settings_json(), "rows": [r.to_json() for r in rows],
            "summary": summary, "summary_by_latency_model": by_model, "verdict_model": VERDICT_MODEL,
            "figures": figures}


def render_text(report: dict) -> str:
    lines = []
    for r in report["rows"]:
        lines.append(f"[{r['verdict']}] {r['id']}: {r['claim']}  ({r['location']})")
        lines.append(f"    paper: {r['paper']}")
        lines.append(f"    ours:  {r['ours']}")
        lines.append(f"    model: {r['model']};  tolerance: {r['tolerance']}")
        if r.get("verdicts"):
            lines.append("    verdicts: " + ", ".join(f"{m} {v}" for m, v in r["verdicts"].items())
                         + f"  (the verdict above is {VERDICT_MODEL}'s)")
        margin = r["details"].get("margin_pp")
        if margin is not None and abs(margin) < claims.PERCENT_ROUNDING_PP:
            lines.append(f"    note:  knife-edge, {margin:+.2f} pp from the limit; the verdict depends on "
                         f"model details (α, the p grid)")
    s = report["summary"]
    lines.append("")
    lines.append(f"{len(report['rows'])} claims: {s['PASS']} PASS, {s['FAIL']} FAIL, {s['OPEN']} OPEN "
                 f"(verdicts under the {VERDICT_MODEL} latency model, the paper's simulator)")
    for m, c in report["summary_by_latency_model"].items():
        lines.append(f"  under {m}: {c['PASS']} PASS, {c['FAIL']} FAIL, {c['OPEN']} OPEN")
    st = report["settings"]
    lines.append(f"setting (stands in for SimAI): B = {st['nic_bandwidth_bytes_per_s'] / 1e9:g} GB/s per GPU "
                 f"({st['nics_per_server']} NICs/server), α = {st['alpha_seconds'] * 1e6:g} µs, "
                 f"N = {st['message_bytes'] // 2**30} GiB, ℓ from NICs lost {st['ell_from_nics_lost']}")
    lines.append("unknown in the paper's setting:")
    lines += [f"  - {u}" for u in st["unknowns"]]
    for path in report["figures"]:
        lines.append(f"wrote {path}")
    return "\n".join(lines)
