"""nccl-tests style benchmark rows: size, count, type, time_us, algbw, busbw, #wrong, lb_us, eff.

algbw = size / time and busbw = algbw · 2(p−1)/p are nccl-tests' definitions for AllReduce
(its PERFORMANCE.md). lb_us is our lower bound for the cluster (bounds.closed_form.lower_bound,
in n/B, times size/B; latency α not included) and eff = lb_us / time_us (1.0 = at the bound).
"""
from __future__ import annotations

from bounds.closed_form import lower_bound
from optcc.errors import OptccError
from optcc.sizes import parse_bytes  # noqa: F401  (the commands' size parser; one for all)
from optcc.timing import units_to_seconds

HEADERS = ("size", "count", "type", "time_us", "algbw", "busbw", "#wrong", "lb_us", "eff")


def sweep(begin: int, end: int, factor: int) -> list[int]:
    """nccl-tests' -b/-e/-f: begin, begin·f, ... up to end."""
    if end < begin:
        raise OptccError("sweep.end", f"max size {end} is below min size {begin}")
    if factor < 2:
        raise OptccError("sweep.factor", f"expected a step factor ≥ 2, got {factor}")
    sizes = [begin]
    while sizes[-1] * factor <= end:
        sizes.append(sizes[-1] * factor)
    return sizes


def table_rows(result: dict, cluster) -> list[dict]:
    """Worker rows (seconds per iteration, wrong count) -> benchmark rows for this cluster."""
    p = result["world_size"]
    lb_units = lower_bound(cluster)
    rows = []
    for r in result["rows"]:
        t = r["seconds"]
        size = r["size"]
        algbw = size / t / 1e9 if t > 0 else float("inf")
        lb_us = units_to_seconds(cluster, lb_units, size) * 1e6
        rows.append({"size": size, "count": r["count"], "type": r["type"], "time_us": t * 1e6,
                     "algbw": algbw, "busbw": algbw * 2 * (p - 1) / p, "wrong": r["wrong"],
                     "lb_us": lb_us, "eff": lb_us / (t * 1e6) if t > 0 else None})
    return rows


def format_table(rows) -> list[list]:
    out = []
    for r in rows:
        out.append([r["size"], r["count"], r["type"], f"{r['time_us']:.1f}", f"{r['algbw']:.4f}",
                    f"{r['busbw']:.4f}", r["wrong"], f"{r['lb_us']:.1f}",
                    "-" if r["eff"] is None else f"{r['eff']:.4f}"])
    return out
