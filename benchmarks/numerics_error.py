"""Real rounding error of our multi-straggler OptCC schedules vs torch.distributed.all_reduce (gloo).

For each cluster and dtype: the verifier's rigorous worst-case bound (verifier.numerics) for our
schedule and for the ring, and the measured max |result − exact| / (eps·Σ|x|) over all ranks
and elements (exact = float64 all_reduce of the same inputs) of our schedule and of torch's
all_reduce on the same inputs (gpu_runner.worker, standard normal inputs, seed per rank).
Rerun:  PYTHONPATH=. python benchmarks/numerics_error.py  [--elements 65536]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from fractions import Fraction as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from gpu_runner.launch import launch_trusted, prepare_schedule  # noqa: E402
from optcc.algorithms import build_schedule  # noqa: E402
from optcc.cluster import Cluster  # noqa: E402
from verifier.numerics import analyze_numerics  # noqa: E402

CLUSTERS = [Cluster.build(5, stragglers={0: 2, 1: F(3, 2)}), Cluster.build(6, stragglers={0: 2, 2: F(3, 2), 4: 3}),
            Cluster.build(8, stragglers={0: 2, 5: 4})]
ELEM = {"float32": 4, "bfloat16": 2}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--elements", type=int, default=65536)
    ap.add_argument("--segments", type=int, default=2)
    a = ap.parse_args()
    print(f"{'cluster':42} {'dtype':8} {'tree':5} {'bound':>7} {'ring':>7} {'ours':>7} {'torch':>7}  (eps·Σ|x|)")
    with tempfile.TemporaryDirectory() as tmp:
        for c in CLUSTERS:
            s = build_schedule("optcc", c, a.segments)
            path = os.path.join(tmp, f"p{c.p}.json")
            s.save(path)
            prepare_schedule(path, c.p)
            for dtype in ("float32", "bfloat16"):
                r = analyze_numerics(s, dtype)
                res = launch_trusted(path, s.sha256(), c.p, a.elements * ELEM[dtype], dtype, 120, backend="gloo")
                if not res.ok:
                    print(f"{c.describe()}: {res.describe_failure()}")
                    return 1
                row = res.result["rows"][0]
                print(f"{c.describe():42} {dtype:8} {str(r.summation_tree):5} {r.bound_eps:7.3f} {r.ring_bound_eps:7.3f} "
                      f"{row['err_eps']:7.3f} {row['torch_err_eps']:7.3f}  wrong={row['wrong']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
