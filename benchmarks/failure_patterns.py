"""Failure patterns operators see (issue 17): lost NICs with and without PXN pooling, two degraded
servers; OptCC's slot time at k segments (α = 0) against the exclusive LP and the lower bound.

Rows: p ∈ {16, 64, 256}, g ∈ {4, 8}; patterns (server 1 is the first degraded one):
  1 NIC, PXN       server 1 lost 1 of g NICs, pooled: all its GPUs at g/(g−1) (paper's 8/7 at g = 8)
  1 NIC, no PXN    the same without pooling: 2 GPUs at ℓ = 2 (optcc.failures, derived)
  half, PXN        server 1 lost g/2 NICs, pooled: all its GPUs at ℓ = 2 (paper)
  2 servers, PXN   server 1 lost 1 NIC, server 2 lost g/2 (ℓ = g/(g−1) and 2 on all their GPUs)
  2 servers, no PXN  the same without pooling (mixed servers)
Columns: the construction `build_schedule("optcc", …)` picks (optcc_servers for one uniform
straggler server, optcc_rails otherwise), its slot time computed without building the schedule
(optcc_servers' closed form / optcc_rails.slot_time, both tested equal to generated schedules),
the exclusive fluid LP of the same cluster (servers pooled, lp_models.fluid; its NVLink row
bounds.closed_form.pooling_nvlink_time), the derived lower bound (bounds.closed_form), the ratios,
whether NVLink limits the rails (optcc_rails.nvlink_limited) and the seconds to compute the row.
The LP works on classes of equal servers, so it is never the slow part; --lp-max-p skips it above
a p anyway and says so in the row.
Run: python benchmarks/failure_patterns.py [--p 16,64,256] [--g 4,8] [--k 64] [--json]
"""
from __future__ import annotations

import argparse
import json
import sys
import time

from bounds.closed_form import lower_bound
from lp_models.fluid import solve_fluid_lp
from optcc.algorithms.registry import choose
from optcc.cluster import Cluster

PATTERNS = (
    ("1 NIC, PXN", lambda g: [(1, 1)], True),
    ("1 NIC, no PXN", lambda g: [(1, 1)], False),
    ("half, PXN", lambda g: [(1, g // 2)], True),
    ("2 servers, PXN", lambda g: [(1, 1), (2, g // 2)], True),
    ("2 servers, no PXN", lambda g: [(1, 1), (2, g // 2)], False),
)


def row(p: int, g: int, name: str, failed, pxn: bool, k: int, lp_max_p: int) -> dict:
    if p // g <= max(s for s, _ in failed):
        return {"p": p, "g": g, "pattern": name, "skipped": f"needs {max(s for s, _ in failed) + 1} servers"}
    cluster = Cluster.build(p, g, failed_nics=failed, pxn=pxn)
    started = time.perf_counter()
    chosen = choose(cluster)                 # the construction build_schedule("optcc", …) runs
    which = chosen.name
    t = chosen.slot_time(cluster, k)
    lb = lower_bound(cluster)
    out = {"p": p, "g": g, "pattern": name, "cluster": cluster.describe(), "construction": which,
           "slot_time": float(t), "slot_time_exact": str(t), "lower_bound": float(lb),
           "ratio_to_lower_bound": float(t / lb), "lp_exclusive": None, "ratio_to_lp": None,
           "nvlink_limited": None, "lp_note": None}
    if which == "optcc_rails":
        from optcc.algorithms.rails.build import nvlink_limited
        out["nvlink_limited"] = nvlink_limited(cluster, k)
    if p <= lp_max_p:
        lp = solve_fluid_lp(cluster, "exclusive")
        if lp.optimal:
            out["lp_exclusive"] = lp.objective
            out["ratio_to_lp"] = float(t) / lp.objective
        else:
            out["lp_note"] = f"LP {lp.status}"
    else:
        out["lp_note"] = f"LP skipped above p = {lp_max_p}"
    out["seconds"] = time.perf_counter() - started
    return out


def main(argv) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--p", default="16,64,256")
    ap.add_argument("--g", default="4,8")
    ap.add_argument("--k", type=int, default=64)
    ap.add_argument("--lp-max-p", type=int, default=10**6)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    rows = []
    for g in (int(x) for x in a.g.split(",")):
        for p in (int(x) for x in a.p.split(",")):
            for name, failed, pxn in PATTERNS:
                rows.append(row(p, g, name, failed(g), pxn, a.k, a.lp_max_p))
                if not a.json:
                    _print(rows[-1], header=len(rows) == 1, k=a.k)
    if a.json:
        json.dump({"k": a.k, "rows": rows}, sys.stdout, indent=2)
        sys.stdout.write("\n")
    return 0


def _print(r: dict, header: bool, k: int) -> None:
    if header:
        print(f"k = {k}, α = 0, NVLink 9x NIC; times in n/B")
        print(f"{'p':>4} {'g':>2}  {'pattern':<18} {'construction':<13} {'slot':>8} {'LP_ex':>8} "
              f"{'/LP_ex':>7} {'bound':>8} {'/bound':>7} {'NVLink-lim':>10} {'s':>6}")
    if "skipped" in r:
        print(f"{r['p']:>4} {r['g']:>2}  {r['pattern']:<18} skipped: {r['skipped']}")
        return
    lp = "-" if r["lp_exclusive"] is None else f"{r['lp_exclusive']:.5f}"
    rl = "-" if r["ratio_to_lp"] is None else f"{r['ratio_to_lp']:.4f}"
    nv = "-" if r["nvlink_limited"] is None else ("yes" if r["nvlink_limited"] else "no")
    print(f"{r['p']:>4} {r['g']:>2}  {r['pattern']:<18} {r['construction']:<13} {r['slot_time']:8.5f} {lp:>8} "
          f"{rl:>7} {r['lower_bound']:8.5f} {r['ratio_to_lower_bound']:7.4f} {nv:>10} {r['seconds']:6.1f}"
          + ("" if r["lp_note"] is None else f"  {r['lp_note']}"), flush=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
