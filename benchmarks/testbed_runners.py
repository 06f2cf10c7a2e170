"""Runners side by side on one delayed testbed (root): the comparison behind ORDERED_RTTS.

    sudo python benchmarks/testbed_runners.py --sizes 4194304,16777216,33554432 --segments 16 \\
        --runners streaming-ordered,streaming,step

p = 8, rank 0 at ℓ = 2, 40 Mbit/s, 2 ms one-way delay (docs/gpu_runner.md, "`optcc testbed
--sizes`"); one timed run per size and runner, no warm-up, int32 checked exactly. Prints one
JSON line per runner: [size MiB, seconds, correct] per size.
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
from fractions import Fraction

from gpu_runner.launch import prepare_schedule, worker_certificate
from gpu_runner.testbed import Testbed, measure, require_root
from optcc.algorithms import build_schedule
from optcc.cluster import Cluster


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", required=True, help="comma-separated bytes per rank")
    ap.add_argument("--segments", type=int, default=16)
    ap.add_argument("--runners", default="streaming-ordered,streaming,step")
    ap.add_argument("--p", type=int, default=8)
    ap.add_argument("--rate", type=float, default=40.0, help="healthy Mbit/s (rank 0 gets half)")
    ap.add_argument("--delay-ms", type=float, default=2.0)
    args = ap.parse_args()
    require_root()
    p, rate = args.p, args.rate
    cluster = Cluster.build(p, stragglers={0: Fraction(2)}, bandwidth=Fraction(str(rate)) * 10**6 / 8)
    with tempfile.TemporaryDirectory() as tmp, Testbed(p, delay_ms=args.delay_ms) as tb:
        path = os.path.join(tmp, "s.json")
        build_schedule("optcc", cluster, args.segments).save(path)
        schedule, _ = prepare_schedule(path, p)
        common = ["--schedule", path, "--certificate", worker_certificate(schedule, tmp), "--mode", "bench",
                  "--sizes", args.sizes, "--dtype", "int32", "--iters", "1", "--warmup", "0", "--backend", "gloo"]
        tb.shape([rate / 2] + [rate] * (p - 1))
        for runner in args.runners.split(","):
            rows = measure(tb, common + ["--runner", runner], 300)["rows"]
            print(json.dumps({runner: [[r["size"] / 2**20, round(r["seconds"], 3), r["correct"]] for r in rows]}),
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
