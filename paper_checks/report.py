"""Run every paper check and render the result (table text or JSON-able dict)."""
from __future__ import annotations

from paper_checks import claims, settings

VERDICTS = (claims.PASS, claims.FAIL, claims.OPEN)


def run_paper_checks(figures_dir: str | None = None) -> dict:
    rows = claims.all_checks()
    summary = {v: sum(r.verdict == v for r in rows) for v in VERDICTS}
    figures = []
    if figures_dir:
        from paper_checks.figures import draw_figures
        figures = draw_figures(figures_dir)
    return {"settings": settings.settings_json(), "rows": [r.to_json() for r in rows],
            "summary": summary, "figures": figures}


def render_text(report: dict) -> str:
    lines = []
    for r in report["rows"]:
        lines.append(f"[{r['verdict']}] {r['id']}: {r['claim']}  ({r['location']})")
        lines.append(f"    paper: {r['paper']}")
        lines.append(f"    ours:  {r['ours']}")
        lines.append(f"    model: {r['model']};  tolerance: {r['tolerance']}")
        margin = r["details"].get("margin_pp")
        if margin is not None and abs(margin) < claims.PERCENT_ROUNDING_PP:
            lines.append(f"    note:  knife-edge, {margin:+.2f} pp from the limit; the verdict depends on "
                         f"model details (α, the p grid)")
    s = report["summary"]
    lines.append("")
    lines.append(f"{len(report['rows'])} claims: {s['PASS']} PASS, {s['FAIL']} FAIL, {s['OPEN']} OPEN")
    st = report["settings"]
    lines.append(f"setting (stands in for SimAI): B = {st['nic_bandwidth_bytes_per_s'] / 1e9:g} GB/s per GPU "
                 f"({st['nics_per_server']} NICs/server), α = {st['alpha_seconds'] * 1e6:g} µs, "
                 f"N = {st['message_bytes'] // 2**30} GiB, ℓ from NICs lost {st['ell_from_nics_lost']}")
    lines.append("unknown in the paper's setting:")
    lines += [f"  - {u}" for u in st["unknowns"]]
    for path in report["figures"]:
        lines.append(f"wrote {path}")
    return "\n".join(lines)
