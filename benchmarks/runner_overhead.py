"""Host cost of the runners: microseconds per posted message, with the transport removed and on gloo.

  --transport none  one rank's executor in this process on torch's fake process group (every
                    isend/irecv completes at once, moves no data): what the host alone spends per
                    post, per runner, for the straggler and a healthy rank: wall time per post,
                    and the process's CPU time per post (all its threads; less sensitive to other
                    jobs on a shared machine than wall time, so the column to compare two versions
                    by). optcc.segments.HOST_POST_S is measured at the paper's p by
                    benchmarks/first_message.py (generated schedules, k = 25).
  --transport gloo  the step runner on a ring of many segments on real gloo processes, 8 bytes per
                    piece (time ~ steps x overhead), next to torch's all_reduce on the same data.

    python benchmarks/runner_overhead.py --transport none [--p 16] [--segments 16]
    python benchmarks/runner_overhead.py --transport gloo [--p 4] [--segments 8]
"""
import argparse
import os
import sys
import tempfile
import time


def fake_transport(p: int, k: int, iters: int) -> int:
    import torch
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    import gpu_runner.proof as proof
    from gpu_runner.runners import RUNNERS, make_executor
    from optcc.algorithms import build_schedule
    from optcc.cluster import Cluster
    from optcc.segments import HOST_POST_S
    dist.init_process_group("fake", store=FakeStore(), rank=1, world_size=p)
    schedule = build_schedule("optcc", Cluster.build(p, stragglers={0: 2}), k)
    proof.require_proof(schedule)
    print(f"optcc p={p} k={k}, transport removed (torch fake process group), {iters} runs each")
    print(f"{'runner':<18} {'rank':<10} {'posts':>6} {'us/run':>10} {'us/post':>8} {'cpu_us/post':>11}")
    healthy = {}
    for runner in RUNNERS:
        for rank, what in ((0, "straggler"), (1, "healthy")):
            ex = make_executor(schedule, rank, runner)
            tensor = torch.zeros(64 * len(schedule.pieces))
            ex.run(tensor)                                    # binds views
            t0, c0 = time.perf_counter(), time.process_time()
            for _ in range(iters):
                ex.run(tensor)
            per_run = (time.perf_counter() - t0) / iters
            cpu_run = (time.process_time() - c0) / iters
            posts = sum(1 for f in schedule.flows if rank in (f.src, f.dst))
            if hasattr(ex, "close"):
                ex.close()
            print(f"{runner:<18} {what:<10} {posts:>6} {per_run * 1e6:>10.1f} {per_run / posts * 1e6:>8.2f} {cpu_run / posts * 1e6:>11.2f}")
            if what == "healthy":
                healthy[runner] = cpu_run / posts
    print(f"healthy rank, streaming: {healthy['streaming'] * 1e6:.2f} us CPU per post; optcc.segments.HOST_POST_S "
          f"(benchmarks/first_message.py) states {float(HOST_POST_S) * 1e6:.0f} us")
    dist.destroy_process_group()
    return 0


def gloo_transport(p: int, k: int, iters: int) -> int:
    from gpu_runner.launch import launch, prepare_schedule, worker_certificate
    from optcc.algorithms import build_schedule
    from optcc.cluster import Cluster
    from optcc.lowering.step import build_plan
    s = build_schedule("ring", Cluster.build(p), k)
    count = 2 * len(s.pieces)            # two float32 elements per piece
    size = 4 * count
    steps = build_plan(s, 0, count).n_batches
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "ring.json")
        s.save(path)
        common = ["--mode", "run", "--size", str(size), "--iters", str(iters), "--warmup", "3", "--runner", "step"]
        prepare_schedule(path, p)                      # prove once; workers re-check the certificate
        ours = launch(p, ["--schedule", path, "--certificate", worker_certificate(s, tmp), *common], 60)
        torch_ = launch(p, ["--algo", "torch", *common], 60)
    for name, r in (("ring executor", ours), ("torch all_reduce", torch_)):
        if not r.ok:
            print(f"{name}: failed: {r.describe_failure()}")
            return 1
    t = ours.result["seconds"]
    print(f"p={p}, k={k}: {steps} batched steps per rank, {size} bytes")
    print(f"ring executor    {t * 1e6:10.1f} us total, {t / steps * 1e6:8.1f} us per step (gloo, CPU)")
    print(f"torch all_reduce {torch_.result['seconds'] * 1e6:10.1f} us total")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--transport", choices=("none", "gloo"), default="none")
    ap.add_argument("--p", type=int)
    ap.add_argument("--segments", type=int)
    ap.add_argument("--iters", type=int, default=20)
    a = ap.parse_args()
    if a.transport == "none":
        return fake_transport(a.p or 16, a.segments or 16, a.iters)
    return gloo_transport(a.p or 4, a.segments or 8, a.iters)


if __name__ == "__main__":
    sys.exit(main())
