"""Benchmark: vectorized bound evaluation (bounds.sweep) over 10^6 points; prints a table.

Run: /work/venv/bin/python benchmarks/bounds_sweep.py [--points N] [--repeat R]
Target (issue 3): 10^6 points in well under a second. Compile time (lambdify) is reported
separately from evaluation; the first call compiles, later calls reuse it.
"""
from __future__ import annotations

import argparse
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", type=int, default=10**6)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    n = args.points
    p = rng.integers(2, 4097, n).astype(float)
    ell = rng.uniform(1, 4, n)
    g = np.full(n, 8.0)
    ps = g * rng.integers(2, 513, n)

    t = time.perf_counter()
    from bounds import sweep
    sweep.sweep_single_straggler(p[:2], ell[:2])
    sweep.sweep_straggler_server(ps[:2], g[:2], ell[:2])
    compile_s = time.perf_counter() - t

    rows = []
    for name, fn, fargs in [("Theorem 1 (p, ℓ)", sweep.sweep_single_straggler, (p, ell)),
                            ("Theorem 3 (p, g=8, ℓ)", sweep.sweep_straggler_server, (ps, g, ell))]:
        best = float("inf")
        for _ in range(args.repeat):
            t = time.perf_counter()
            out = fn(*fargs)
            best = min(best, time.perf_counter() - t)
        rows.append((name, n, best, n / best, float(out["cut_binds"].mean())))

    # exactness spot check against the exact closed forms (a few points)
    from fractions import Fraction
    from bounds.closed_form import lower_bound_single_straggler
    out = sweep.sweep_single_straggler(p[:100], ell[:100])
    err = max(abs(float(lower_bound_single_straggler(int(p[k]), Fraction(ell[k]))) - out["lower_bound"][k])
              for k in range(100))

    print(f"import + lambdify compile: {compile_s:.3f} s")
    print(f"{'bound':24} {'points':>9} {'best s':>8} {'points/s':>12} {'cut binds':>10}")
    for name, n_, s, rate, frac in rows:
        print(f"{name:24} {n_:9d} {s:8.4f} {rate:12.3e} {frac:10.3f}")
    print(f"max |sweep − exact closed form| over 100 points: {err:.2e}")


if __name__ == "__main__":
    main()
