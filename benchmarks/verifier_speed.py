"""Verifier speed: time to prove OptCC (and ring) schedules for p = 8..256 (a table, not a test).

Targets (issue 4, on the 2-core dev machine): OptCC p = 64, k = 16 proved in ≤ 20 s;
p = 256, k = 4 in ≤ 120 s. Run:  python benchmarks/verifier_speed.py [--ring] [--ell 2]
"""
from __future__ import annotations

import argparse
import time
from fractions import Fraction

from optcc.algorithms import build_schedule
from optcc.cluster import Cluster
from verifier import prove_allreduce

TARGETS = {(64, 16): 20.0, (256, 4): 120.0}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ring", action="store_true", help="benchmark ring schedules instead of OptCC")
    ap.add_argument("--ell", default="2", help="straggler slowdown ℓ of rank 0 (default 2)")
    ap.add_argument("--ps", default="8,16,32,64,128,256")
    ap.add_argument("--ks", default="4,16")
    args = ap.parse_args()
    algo = "ring" if args.ring else "optcc"
    ell = Fraction(args.ell)
    header = ["algo", "p", "k", "flows", "pieces", "groups", "build s", "setup s", "sum s", "causal s", "cap s",
              "time s", "total s", "proved", "target"]
    rows = []
    for p in [int(x) for x in args.ps.split(",")]:
        for k in [int(x) for x in args.ks.split(",")]:
            t = time.perf_counter()
            s = build_schedule(algo, Cluster.build(p, stragglers={0: ell}), k)
            built = time.perf_counter() - t
            proof = prove_allreduce(s)
            ps = proof.facts["property_seconds"]
            target = TARGETS.get((p, k))
            verdict = "-" if target is None else (f"≤{target:.0f}s " + ("met" if proof.seconds <= target else "MISSED"))
            rows.append([algo, p, k, len(s.flows), len(s.pieces), proof.facts["piece_groups"], f"{built:.2f}",
                         f"{proof.seconds - sum(ps.values()):.2f}", f"{ps['sum']:.2f}", f"{ps['causality']:.2f}", f"{ps['capacity']:.2f}", f"{ps['time']:.2f}",
                         f"{proof.seconds:.2f}", proof.proved, verdict])
            print("  ".join(str(x) for x in rows[-1]), flush=True)
    print()
    print(f"# {algo} schedules, straggler rank 0 with ℓ = {ell}; wall-clock seconds. build = generator;"
          " setup = validate + integer time grid; total = prove_allreduce (setup + the four properties)")
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    for r in [header] + rows:
        print("  ".join(str(c).rjust(w) for c, w in zip(r, widths)))


if __name__ == "__main__":
    main()
