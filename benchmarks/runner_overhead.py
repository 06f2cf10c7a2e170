"""Per-step overhead of the executor on gloo (CPU): tiny messages, so time ≈ steps × overhead.

Runs a ring schedule with many segments (many batch_isend_irecv steps) on 8-byte-per-piece
data and prints microseconds per step, next to torch's all_reduce on the same data.

    python benchmarks/runner_overhead.py [--p 4] [--segments 8]
"""
import argparse
import os
import sys
import tempfile

from gpu_runner.launch import launch, prepare_schedule, worker_certificate
from optcc.lowering.step import build_plan
from optcc.algorithms import build_schedule
from optcc.cluster import Cluster


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--p", type=int, default=4)
    ap.add_argument("--segments", type=int, default=8)
    ap.add_argument("--iters", type=int, default=20)
    a = ap.parse_args()
    s = build_schedule("ring", Cluster.build(a.p), a.segments)
    count = 2 * len(s.pieces)            # two float32 elements per piece
    size = 4 * count
    steps = build_plan(s, 0, count).n_batches
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "ring.json")
        s.save(path)
        common = ["--mode", "run", "--size", str(size), "--iters", str(a.iters), "--warmup", "3"]
        prepare_schedule(path, a.p)                      # prove once; workers re-check the certificate
        ours = launch(a.p, ["--schedule", path, "--certificate", worker_certificate(s, tmp), *common], 60)
        torch_ = launch(a.p, ["--algo", "torch", *common], 60)
    for name, r in (("ring executor", ours), ("torch all_reduce", torch_)):
        if not r.ok:
            print(f"{name}: failed: {r.describe_failure()}")
            return 1
    t = ours.result["seconds"]
    print(f"p={a.p}, k={a.segments}: {steps} batched steps per rank, {size} bytes")
    print(f"ring executor    {t * 1e6:10.1f} us total, {t / steps * 1e6:8.1f} us per step (gloo, CPU)")
    print(f"torch all_reduce {torch_.result['seconds'] * 1e6:10.1f} us total")
    return 0


if __name__ == "__main__":
    sys.exit(main())
