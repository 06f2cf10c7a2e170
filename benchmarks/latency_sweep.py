"""OptCC over the fault-free ring under each latency preset, auto k (issue 13, item 7).

Grid: p ∈ {16, 32, …, 1024}, ℓ ∈ {8/7, 4/3, 2} (one straggler, g = 1), n = 8 GiB,
B ∈ {50, 100} GB/s, presets alpha / simai / nccl (optcc.latency). Both times are closed-form
model times (optcc.model_time; the ring's is exact, OptCC's is its tested upper bound below the
latency knee) at the k `--segments auto` picks (optcc.segments). Prints overhead % and k per
point, one table per (B, preset), and the worst point per table; --json prints every point.
Run: python benchmarks/latency_sweep.py [--json]
"""
from __future__ import annotations

import json
import sys
import time
from fractions import Fraction as F

from optcc.cluster import Cluster
from optcc.latency import PRESET_NAMES
from optcc.model_time import model_time
from optcc.segments import auto_segments

PS = tuple(2**i for i in range(4, 11))
ELLS = (("8/7", F(8, 7)), ("4/3", F(4, 3)), ("2", F(2)))
N_BYTES = 8 * 2**30
BANDWIDTHS = (50 * 10**9, 100 * 10**9)


def point(p: int, ell: F, bandwidth: int, model: str) -> dict:
    c = Cluster.build(p, stragglers={0: ell}, bandwidth=bandwidth, latency_model=model)
    ring = model_time("ring", Cluster.build(p, bandwidth=bandwidth, latency_model=model), 1, N_BYTES)
    k, t = auto_segments("optcc", c, N_BYTES)
    return {"p": p, "ell": str(ell), "bandwidth": bandwidth, "model": model, "k": k, "valid": t.valid,
            "optcc_s": t.seconds(c, N_BYTES), "ring_s": ring.seconds(c, N_BYTES),
            "overhead": float(t.time / ring.time - 1)}


def main(argv) -> int:
    started = time.perf_counter()
    rows = [point(p, ell, b, m) for b in BANDWIDTHS for m in PRESET_NAMES for _, ell in ELLS for p in PS]
    if "--json" in argv:
        json.dump({"n_bytes": N_BYTES, "rows": rows, "seconds": time.perf_counter() - started}, sys.stdout, indent=1)
        print()
        return 0
    for b in BANDWIDTHS:
        for m in PRESET_NAMES:
            sub = [r for r in rows if r["bandwidth"] == b and r["model"] == m]
            print(f"# B = {b / 1e9:g} GB/s, latency model {m}, n = 8 GiB: OptCC over the fault-free ring "
                  f"(overhead %, auto k)")
            print(f"{'p':>5} " + " ".join(f"{'ℓ=' + name:>16}" for name, _ in ELLS))
            for p in PS:
                cells = []
                for name, ell in ELLS:
                    r = next(x for x in sub if x["p"] == p and x["ell"] == str(ell))
                    mark = "" if r["valid"] else "!"
                    cells.append(f"{100 * r['overhead']:8.2f}% k={r['k']:<4}{mark}")
                print(f"{p:>5} " + " ".join(f"{c:>16}" for c in cells))
            worst = max((r for r in sub if r["p"] >= 32), key=lambda r: r["overhead"])
            print(f"worst for p ≥ 32: {100 * worst['overhead']:.2f}% at p = {worst['p']}, ℓ = {worst['ell']}, "
                  f"k = {worst['k']}\n")
    print(f"({time.perf_counter() - started:.1f} s; '!' = no k below the latency knee: not modelled)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
