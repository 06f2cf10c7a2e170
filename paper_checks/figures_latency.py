"""Redraws of Figures 8, 9, 10 and 22 under each latency preset (alpha, simai, nccl), auto k.

One PNG per figure: columns = presets, rows = the figure's ℓ settings, time (ms) against p at
8 GiB. Lines: OptCC (closed-form model time at auto k, paper_checks.per_model), NCCLNoFailure
(the fault-free ring under the same model), the lower bound plus one o + Li + L, and the ring
with the straggler (PXN) and R2CCL as α-β models with α = o + Li + L per step (model: a
synchronous step pays each once).
"""
from __future__ import annotations

import os

from optcc.latency import PRESET_NAMES
from optcc.latency import units as latency_units
from paper_checks import models as M
from paper_checks import per_model as P
from paper_checks import settings as S

STYLE = {
    "OptCC (auto k)": dict(color="tab:red", marker="o", lw=2.2),
    "NCCLNoFailure": dict(color="tab:green", marker="s", lw=1.6),
    "Ring w/ straggler (PXN)": dict(color="tab:gray", marker="^", lw=1.6),
    "R2CCL (K = 4)": dict(color="tab:blue", marker="D", lw=1.6),
    "Lower bound": dict(color="black", ls="--", lw=1.4),
}


def series(p: int, g: int, ells, model: str, n: int = S.MESSAGE_BYTES) -> dict:
    """ms per line at one point under one preset."""
    def ms(units):
        return 1000 * M.seconds(units, n)
    o, li, lat = latency_units(P.cluster(p, g, ells, model), n)
    au = o + li + lat
    out = {"OptCC (auto k)": ms(P.optcc_time(p, g, ells, model, n)[0]),
           "NCCLNoFailure": ms(P.nccl_time(p, g, model, n)),
           "Lower bound": ms(P.bound_time(p, g, ells, model, n))}
    if isinstance(ells, tuple):
        out["Ring w/ straggler (PXN)"] = ms(M.ring_time(p, max(ells), au))
    else:
        out["Ring w/ straggler (PXN)"] = ms(M.pxn_ring_time(p, g, ells, au))
        out["R2CCL (K = 4)"] = ms(M.r2ccl_time(p, ells, au) if g == 1 else M.r2ccl_server_time(p, g, ells, au))
    return out


def draw(path: str, title: str, g: int, settings_rows, ps) -> str:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(settings_rows), len(PRESET_NAMES), figsize=(15, 4.2 * len(settings_rows)),
                             squeeze=False)
    for row, (ells, label) in enumerate(settings_rows):
        for col, model in enumerate(PRESET_NAMES):
            ax = axes[row][col]
            pts = [series(p, g, ells, model) for p in ps]
            for name, style in STYLE.items():
                if name in pts[0]:
                    ax.plot(ps, [pt[name] for pt in pts], label=name, markersize=4, **style)
            ax.set_xscale("log", base=2)
            ax.set_xticks(ps, [str(p) for p in ps])
            ax.set_xlabel("GPUs p")
            ax.set_ylabel("AllReduce time (ms)")
            ax.set_title(f"{label}; latency model {model}", fontsize=10)
            ax.grid(True, alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=10)
    fig.suptitle(f"Redraw of the paper's {title} under three latency models (docs/latency.md), N = 8 GiB, "
                 f"400 Gb/s per GPU (not SimAI)", fontsize=12)
    fig.tight_layout(rect=(0, 0.05, 1, 0.96))
    from paper_checks.figures import save_figure
    save_figure(fig, path, dpi=100)
    plt.close(fig)
    return path


NAMES = ("figure8_latency.png", "figure9_latency.png", "figure10_latency.png", "figure22_latency.png")


def draw_all(directory: str) -> list[str]:
    os.makedirs(directory, exist_ok=True)
    one = [(S.ELL_1_OF_8, "ℓ = 8/7"), (S.ELL_4_OF_8, "ℓ = 2")]
    at = [os.path.join(directory, name) for name in NAMES]
    return [
        draw(at[0], "Figure 8 (g = 1)", 1, one, S.P_FIGURE8),
        draw(at[1], "Figure 9 (two stragglers)", 1,
             [(pair, f"ℓ1 = {pair[0]}, ℓ2 = {pair[1]}") for pair in S.FIGURE9_ELLS], S.P_FIGURE9),
        draw(at[2], f"Figure 10 (g = {S.G_FIGURE10})", S.G_FIGURE10, one, S.P_FIGURE10),
        draw(at[3], f"Figure 22 (g = {S.G_FIGURE22})", S.G_FIGURE22, [(S.ELL_4_OF_8, "ℓ = 2")], S.P_FIGURE22),
    ]
