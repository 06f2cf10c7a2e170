"""Rails verification at scale: a whole-schedule proof, a proof by composition, and the runner's
re-check of a rails certificate (verifier.rails_certificate), one schedule (a table, not a test).

Default: optcc_rails at p = 256, g = 8, GPU 3 at ℓ = 2, k = 2 (docs/parametric.md's benchmark).
Run:  python benchmarks/rails_certificate_speed.py [--p 256] [--g 8] [--k 2] [--whole]
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time
from fractions import Fraction

from optcc.algorithms.rails import build as optcc_rails
from optcc.cluster import Cluster


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--p", type=int, default=256)
    ap.add_argument("--g", type=int, default=8)
    ap.add_argument("--k", type=int, default=2)
    ap.add_argument("--whole", action="store_true", help="also prove_allreduce(reported=()) on the whole schedule")
    args = ap.parse_args()
    from verifier import prove_allreduce
    from verifier.parametric.rails import composition_theorem
    from verifier.rails_certificate import check_rails_certificate, write_rails_certificate
    from verifier.rails_composition import prove_rails_composition
    t = time.perf_counter()
    s = optcc_rails.build(Cluster.build(args.p, args.g, {3: Fraction(2)}), args.k)
    rows = [("build", time.perf_counter() - t, f"{len(s.flows)} flows, {len(s.pieces)} pieces")]
    if args.whole:
        t = time.perf_counter()
        pr = prove_allreduce(s, reported=())
        rows.append(("prove_allreduce (sum, causality, capacity, time)", time.perf_counter() - t, str(pr.proved)))
    t = time.perf_counter()
    composition_theorem()
    rows.append(("composition theorem (Z3, once per process)", time.perf_counter() - t, ""))
    t = time.perf_counter()
    pr = prove_rails_composition(s)
    rows.append(("prove_rails_composition", time.perf_counter() - t,
                 f"proved {pr.proved}, {pr.facts['distinct_rail_proofs']} distinct rail proofs"))
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "rails.cert")
        t = time.perf_counter()
        write_rails_certificate(pr, s, path)
        rows.append(("write_rails_certificate", time.perf_counter() - t, f"{os.path.getsize(path)} bytes"))
        t = time.perf_counter()
        ok, why = check_rails_certificate(s, path)
        rows.append(("check_rails_certificate (the runner's gate)", time.perf_counter() - t, why or str(ok)))
    width = max(len(r[0]) for r in rows)
    print(f"{'stage':<{width}}  seconds  note")
    for name, sec, note in rows:
        print(f"{name:<{width}}  {sec:7.2f}  {note}")


if __name__ == "__main__":
    main()
