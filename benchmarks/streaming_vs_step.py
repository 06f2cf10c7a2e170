"""Step vs streaming runner wall time on local gloo (CPU): the same proved OptCC schedule, sizes.

Each round launches both runners on the same schedule, alternating (`--mode bench --sizes`,
warm-up and timed iterations per size, the time is the slowest rank's mean), so that a machine
whose load drifts hurts both alike; the table shows the median over rounds. The ratio
step / streaming > 1 means streaming is faster. On loopback there is no link latency to hide, so the gain measured
here comes from dropping the per-start-time barrier and posting receives early.

    python benchmarks/streaming_vs_step.py [--p 8] [--ell 2] [--segments 8] [--sizes 64K,1M,8M]
"""
import argparse
import os
import statistics
import sys
import tempfile

from optcc.sizes import parse_bytes
from gpu_runner.launch import check_runner, launch, prepare_schedule, worker_certificate
from optcc.algorithms import build_schedule
from optcc.cluster import Cluster


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--p", type=int, default=8)
    ap.add_argument("--ell", default="2")
    ap.add_argument("--segments", type=int, default=8)
    ap.add_argument("--sizes", default="64K,1M,8M")
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    sizes = [parse_bytes(s, "--sizes") for s in a.sizes.split(",")]
    cluster = Cluster.build(a.p, stragglers={0: a.ell})
    schedule = build_schedule("optcc", cluster, a.segments)
    times = {"step": [], "streaming": []}
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "optcc.json")
        schedule.save(path)
        prepare_schedule(path, a.p)
        check_runner(schedule, "streaming")
        cert = worker_certificate(schedule, tmp)          # the workers re-check the parent's proof
        for _ in range(a.rounds):
            for runner in ("step", "streaming"):
                res = launch(a.p, ["--schedule", path, "--certificate", cert, "--runner", runner,
                                   "--mode", "bench", "--sizes", ",".join(map(str, sizes)), "--dtype", "float32",
                                   "--iters", str(a.iters), "--warmup", str(a.warmup)], 120)
                if not res.ok:
                    print(f"{runner}: failed: {res.describe_failure()}")
                    return 1
                times[runner].append([(r["seconds"], r["wrong"]) for r in res.result["rows"]])
    print(f"# OptCC on {cluster.describe()}, k = {a.segments} ({len(schedule.flows)} flows), gloo on "
          f"{os.cpu_count()} CPU cores, {a.warmup} warm-up + {a.iters} timed runs per size, median of {a.rounds} rounds")
    print(f"{'size':>10}  {'step_ms':>9}  {'streaming_ms':>12}  {'step/streaming':>14}  wrong")
    for n, size in enumerate(sizes):
        ts = statistics.median(r[n][0] for r in times["step"])
        tt = statistics.median(r[n][0] for r in times["streaming"])
        wrong = sum(r[n][1] for rs in times.values() for r in rs)
        print(f"{size:>10}  {ts * 1e3:9.2f}  {tt * 1e3:12.2f}  {ts / tt:14.3f}  {wrong}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
