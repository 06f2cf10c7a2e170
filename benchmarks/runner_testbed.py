"""Testbed targets (issue 6): on a real tc-shaped network of namespaces (root only), p = 8, ℓ = 2,
OptCC must be ≥ 1.5× faster than torch's all_reduce on the straggler network and within 15% of
the lower-bound time for that network. Prints the table and whether each target is met.

    sudo python benchmarks/runner_testbed.py [--rate 40] [--size 8388608] [--segments 32]
"""
import argparse
import sys
from fractions import Fraction

from gpu_runner.testbed import run_testbed


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--p", type=int, default=8)
    ap.add_argument("--ell", default="2")
    ap.add_argument("--rate", type=float, default=40.0, help="healthy Mbit/s (low: 2 CPUs must not be the bottleneck)")
    ap.add_argument("--size", type=int, default=8 << 20)
    ap.add_argument("--segments", type=int, default=32)
    ap.add_argument("--iters", type=int, default=2)
    ap.add_argument("--plot", default="testbed.png")
    a = ap.parse_args()
    res = run_testbed(a.p, 0, Fraction(a.ell), a.rate, a.size, a.segments, a.iters, plot=a.plot,
                      log=lambda m: print("# " + m, flush=True))
    print(f"p={res['p']} ell={res['ell']:g} rate={res['rate_mbit']:g} Mbit/s size={res['size']} k={res['segments']}")
    print(f"{'run':24s} {'seconds':>8s} {'/ff':>7s} {'/lb':>7s}")
    for r in res["rows"]:
        print(f"{r['name']:24s} {r['seconds']:8.3f} {r['ratio_to_fault_free']:7.3f} {r['ratio_to_lower_bound']:7.3f}")
    print(f"lower bound {res['lower_bound_seconds']:.3f} s; OptCC schedule (slot model) {res['optcc_schedule_seconds']:.3f} s")
    t = res["targets"]
    print(f"target OptCC >= 1.5x torch: {res['speedup_optcc_vs_torch']:.3f}x -> {'MET' if t['speedup_ge_1.5'] else 'NOT MET'}")
    print(f"target OptCC <= 1.15 x lower bound: {res['optcc_over_lower_bound']:.3f} -> "
          f"{'MET' if t['within_15pct_of_bound'] else 'NOT MET'}")
    return 0 if all(t.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
