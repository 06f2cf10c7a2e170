"""PNG redraws of the paper's Figures 8 (g = 1), 9 (m = 2 stragglers) and 10 (g = 4) from our
α-β models (matplotlib Agg).

Panels as in the paper: (a) ℓ = 8/7 against p at 8 GiB, (b) ℓ = 8/7 against message size at
p = 128, (c)/(d) the same for ℓ = 2. Lines: OptCC, NCCLNoFailure, ring with straggler (PXN),
R2CCL (K = 4), lower bound
(all at α = 5 µs), plus OptCC at α = 0 (dotted) since α decides OptCC's best segment count.
"""
from __future__ import annotations

import os
from fractions import Fraction

from paper_checks import models as M
from paper_checks import optcc_model as O
from paper_checks import settings as S

STYLE = {
    "OptCC": dict(color="tab:red", marker="o", lw=2.2),
    "OptCC at α = 0": dict(color="tab:red", ls=":", lw=1.6),
    "NCCLNoFailure": dict(color="tab:green", marker="s", lw=1.6),
    "Ring w/ straggler (PXN)": dict(color="tab:gray", marker="^", lw=1.6),
    "R2CCL (K = 4)": dict(color="tab:blue", marker="D", lw=1.6),
    "Lower bound": dict(color="black", ls="--", lw=1.4),
}


def _series(p: int, g: int, ell: Fraction, n_bytes: int) -> dict:
    """AllReduce time in ms for each line at one point (α-β models, α = settings.ALPHA_SECONDS)."""
    au = M.alpha_units(n_bytes)
    def ms(units):
        return 1000 * M.seconds(units, n_bytes)
    out = {
        "NCCLNoFailure": ms(M.nccl_no_failure_time(p, g, au)),
        "Ring w/ straggler (PXN)": ms(M.pxn_ring_time(p, g, ell, au)),
        "Lower bound": ms(M.lower_bound_time(p, g, ell, au)),
    }
    if g == 1:
        out["R2CCL (K = 4)"] = ms(M.r2ccl_time(p, ell, au))
        out["OptCC"] = ms(O.optcc_best_time(p, ell, au)[0])
        out["OptCC at α = 0"] = ms(O.optcc_best_time(p, ell)[0])
    else:   # node-level R2CCL over q servers plus NVLink RS/AG (model, models.r2ccl_server_time)
        out["R2CCL (K = 4)"] = ms(M.r2ccl_server_time(p, g, ell, au))
        out["OptCC"] = ms(O.optcc_server_best_time(p, g, ell, au)[0])
        out["OptCC at α = 0"] = ms(O.optcc_server_best_time(p, g, ell)[0])
    return out


def _series_multi(p: int, ells, n_bytes: int) -> dict:
    """Figure 9 (m = 2, g = 1): ms per line. R2CCL handles one degraded node only: not drawn."""
    au = M.alpha_units(n_bytes)
    def ms(units):
        return 1000 * M.seconds(units, n_bytes)
    out = {
        "NCCLNoFailure": ms(M.nccl_no_failure_time(p, 1, au)),
        "Ring w/ straggler (PXN)": ms(M.ring_time(p, max(ells), au)),
        "Lower bound": ms(M.lower_bound_multi_time(p, ells, au)),
    }
    out["OptCC"] = ms(O.optcc_multi_best_time(p, ells, au)[0])
    out["OptCC at α = 0"] = ms(O.optcc_multi_best_time(p, ells)[0])
    return out


def _panel(ax, xs, points, xlabel, title):
    names = [n for n in STYLE if n in points[0]]
    for name in names:
        ax.plot(xs, [pt[name] for pt in points], label=name, markersize=4, **STYLE[name])
    ax.set_xlabel(xlabel)
    ax.set_ylabel("AllReduce time (ms)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3)


def _draw(path: str, title: str, rows, series, ps) -> str:
    """2 × 2 panels: per row (ℓ setting, label) time against p at 8 GiB and against size at p = 128."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(12, 8.5))
    for row, (setting, label) in enumerate(rows):
        pts = [series(p, setting, S.MESSAGE_BYTES) for p in ps]
        _panel(axes[row][0], ps, pts, "GPUs p", f"{label}, N = 8 GiB")
        axes[row][0].set_xscale("log", base=2)
        axes[row][0].set_xticks(ps, [str(p) for p in ps])
        sizes = S.MESSAGE_SWEEP_BYTES
        pts = [series(S.P_SIZE_SWEEP, setting, n) for n in sizes]
        _panel(axes[row][1], [n / S.GIB for n in sizes], pts, "message size N (GiB)",
               f"{label}, p = {S.P_SIZE_SWEEP}")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=10)
    fig.suptitle(f"Redraw of the paper's {title} — α-β model, 400 Gb/s per GPU, α = "
                 f"{float(S.ALPHA_SECONDS) * 1e6:g} µs (not SimAI)", fontsize=12)
    fig.tight_layout(rect=(0, 0.05, 1, 0.96))
    save_figure(fig, path, dpi=110)
    plt.close(fig)
    return path


def draw_figure(g: int, path: str) -> str:
    """Figure 8 (g = 1) or Figure 10 (g > 1): one straggler (server), ℓ = 8/7 and ℓ = 2."""
    ps = S.P_FIGURE8 if g == 1 else S.P_FIGURE10
    rows = [(ell, f"ℓ = {ell} ≈ {float(ell):.2f} (lost {lost} of 8 NICs)")
            for ell, lost in ((S.ELL_1_OF_8, 1), (S.ELL_4_OF_8, 4))]
    which = "Figure 8: single straggler, g = 1" if g == 1 else f"Figure 10: straggler server, g = {g}"
    return _draw(path, which, rows, lambda p, ell, n: _series(p, g, ell, n), ps)


def draw_figure9(path: str) -> str:
    """Figure 9: two stragglers (g = 1), (ℓ1, ℓ2) = (4/3, 8/7) and (2, 4/3)."""
    rows = [(pair, f"ℓ1 = {pair[0]}, ℓ2 = {pair[1]} (lost {lost} of 8 NICs)")
            for pair, lost in zip(S.FIGURE9_ELLS, ("2 and 1", "4 and 2"))]
    return _draw(path, "Figure 9: two stragglers, g = 1",
                 rows, _series_multi, S.P_FIGURE9)


def save_figure(fig, path: str, dpi: int) -> None:
    """PNG bytes of `fig` written atomically (optcc.files: never through a symlink, never half-written)."""
    import io

    from optcc.files import write_bytes_atomic
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    write_bytes_atomic(path, buf.getvalue(), "--figures")


NAMES = ("figure8.png", "figure9.png", "figure10.png")


def figure_names() -> tuple[str, ...]:
    """Every file draw_figures writes into its directory (the CLI checks them before any work)."""
    from paper_checks.figures_latency import NAMES as LATENCY_NAMES
    return NAMES + LATENCY_NAMES


def draw_figures(directory: str) -> list[str]:
    os.makedirs(directory, exist_ok=True)
    from paper_checks.figures_latency import draw_all
    at = [os.path.join(directory, name) for name in NAMES]
    return [draw_figure(1, at[0]), draw_figure9(at[1]), draw_figure(S.G_FIGURE10, at[2])] + draw_all(directory)
