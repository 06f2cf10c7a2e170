"""One short prepared GPU check (≤ 8 minutes on one H100/H200); results go to $OUT/gpu_results.json.

Sections (each independent; an error is recorded and the next section runs; the JSON is
rewritten after every section so a timeout still leaves what was measured):
  env        torch/CUDA/NCCL versions, device name
  virtual    the executor's CUDA data path: run_virtual (plans, scratch, in-place add_/copy_/mul_ on
             CUDA tensors; transfers are device copies) for ring and OptCC at p ∈ {3,4,5,8}, all
             five dtypes, lengths 1, 1001, 2^20+3; compared with the exact sum (float64)
  graph      the graph runner's single-GPU mode (gpu_runner.device_executor.VirtualGraph): p virtual
             ranks, device copies for the network, one CUDA graph replayed; ring p = 4, OptCC p = 4
             and 8, float32 and bfloat16, 1/16/64 MiB per rank: a table of build seconds, µs per
             AllReduce and per device op, GB/s, max error against the exact sum
  nccl1      single-rank NCCL process group: per-step overhead of dist.batch_isend_irecv with m
             matched self send/recv pairs (m = 1, 4, 8), 4 KiB and 4 MiB tensors, host-synchronised
             per step and pipelined (synchronised once per 100 steps)
  add        in-place landing add (dst.add_(src), and with alpha=−1 as signed coefs do) against a
             plain torch.add(a, b) and torch.add(a, b, out=c): GB/s counting 3 × bytes per add
  gloo_cuda  two gloo ranks with CUDA tensors through the real worker (ring, p = 2): does gloo's
             send/recv take CUDA tensors? (recorded either way; NCCL needs one GPU per rank, so
             multi-rank NCCL cannot run on one GPU)
Run: `OUT=/some/dir bash benchmarks/device/run.sh` (or python benchmarks/device/gpu_checks.py --out DIR;
`--cpu-dry-run` runs the virtual, graph and add sections on CPU: a code check, tests/project/test_device_script.py).
Not part of the installed package: a prepared script for a lent device machine.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import traceback

from optcc.jsonout import dumps

BUDGET_S = 380.0         # no section starts after it (gloo_cuda's launch may take 90 s; run.sh kills at 470 s)
VIRTUAL_UNTIL_S = 120.0  # the virtual section stops adding cases then
GRAPH_UNTIL_S = 300.0    # the graph section stops adding cases then
T_START = time.monotonic()
DEVICE = "cuda"          # --cpu-dry-run sets "cpu": exercises the code paths on a machine without a GPU
SIZES = (1, 1001, (1 << 20) + 3)


def elapsed() -> float:
    return time.monotonic() - T_START


def section_env(torch):
    info = {"torch": torch.__version__, "cuda_available": torch.cuda.is_available(),
            "python": sys.version.split()[0]}
    if torch.cuda.is_available():
        info["device"] = torch.cuda.get_device_name(0)
        info["cuda"] = torch.version.cuda
        try:
            info["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
        except Exception as e:  # noqa: BLE001
            info["nccl"] = f"unknown ({e})"
    return info


def section_virtual(torch):
    from gpu_runner.executor import run_virtual
    from optcc.algorithms import build_schedule
    from optcc.cluster import Cluster
    dtypes = [torch.float32, torch.bfloat16, torch.float16, torch.int32, torch.int64]
    results = []
    dev = torch.device(DEVICE)
    for algo in ("ring", "optcc"):
        for p in (3, 4, 5, 8):
            try:
                sched = build_schedule(algo, Cluster.build(p, stragglers={0: 2}), 4)
            except Exception as e:  # noqa: BLE001
                results.append({"algo": algo, "p": p, "error": f"{type(e).__name__}: {e}"})
                continue
            for dtype in dtypes:
                for n in SIZES:
                    if elapsed() > VIRTUAL_UNTIL_S:
                        results.append({"skipped": "time budget"})
                        return results
                    g = torch.Generator(device="cpu").manual_seed(p * 1000 + n)
                    if dtype.is_floating_point:
                        xs = [torch.randn(n, generator=g).to(dtype).to(dev) for _ in range(p)]
                    else:
                        xs = [torch.randint(-1000, 1001, (n,), generator=g, dtype=dtype).to(dev) for _ in range(p)]
                    exact = torch.stack([x.double() for x in xs]).sum(0)
                    absum = torch.stack([x.double().abs() for x in xs]).sum(0)
                    sync(torch)
                    t0 = time.perf_counter()
                    run_virtual(sched, xs)
                    sync(torch)
                    dt = time.perf_counter() - t0
                    if dtype.is_floating_point:
                        bound = (2 * (p - 1) + 1) * torch.finfo(dtype).eps * absum + 1e-30
                        wrong = sum(int(((x.double() - exact).abs() > bound).sum()) for x in xs)
                    else:
                        wrong = sum(int((x.long() != exact.long()).sum()) for x in xs)
                    results.append({"algo": algo, "p": p, "dtype": str(dtype).replace("torch.", ""), "n": n,
                                    "wrong": wrong, "seconds": dt})
    return results


GRAPH_CASES = (("ring", 4), ("optcc", 4), ("optcc", 8))
GRAPH_BYTES = (1 << 20, 16 << 20, 64 << 20)     # per rank; --cpu-dry-run: GRAPH_DRY_ELEMENTS
GRAPH_DRY_ELEMENTS = 1001
GRAPH_REPS = 20


def section_graph(torch):
    """The graph runner's single-GPU mode (gpu_runner.device_executor.VirtualGraph on
    CudaVirtualBackend): p virtual ranks, device copies for the network, captured once in a CUDA
    graph. Per case: graph build seconds (plans, check, capture), µs per AllReduce (mean of
    GRAPH_REPS replays, CUDA events), µs per device op (that / the graph's copies, adds, scales and
    groups), GB/s (bytes per rank / time: nccl-tests' algbw, all p ranks on one device), and the
    error against the exact float64 sum: max |x − exact| / Σ|x| and elements beyond the
    (2(p − 1) + 1)·eps·Σ|x| bound (the virtual section's). --cpu-dry-run: CpuVirtualBackend, a code check."""
    from gpu_runner.device_executor import CpuVirtualBackend, CudaVirtualBackend, VirtualGraph
    from optcc.algorithms import build_schedule
    from optcc.cluster import Cluster
    from optcc.text_table import table_lines
    dev = torch.device(DEVICE)
    rows = []
    for algo, p in GRAPH_CASES:
        sched = build_schedule(algo, Cluster.build(p, stragglers={0: 2} if algo == "optcc" else {}), 4)
        for dtype in (torch.float32, torch.bfloat16):
            for nbytes in (GRAPH_BYTES if DEVICE == "cuda" else (GRAPH_DRY_ELEMENTS * 4,)):
                if elapsed() > GRAPH_UNTIL_S:
                    rows.append({"skipped": "time budget"})
                    return {"rows": rows, "table": _graph_table(rows, table_lines)}
                n = nbytes // torch.empty(0, dtype=dtype).element_size()
                g = torch.Generator(device=dev).manual_seed(p * 7 + n)
                inputs = [torch.randn(n, generator=g, device=dev).to(dtype) for _ in range(p)]
                xs = [x.clone() for x in inputs]
                backend = CudaVirtualBackend() if DEVICE == "cuda" else CpuVirtualBackend()
                sync(torch)
                graph = VirtualGraph(sched, xs, backend, unsafe=True)   # the schedules are the library's own
                sync(torch)
                graph.run()                            # the checked run: inputs -> the AllReduce
                sync(torch)
                exact = torch.stack([x.double() for x in inputs]).sum(0)
                absum = torch.stack([x.double().abs() for x in inputs]).sum(0)
                bound = (2 * (p - 1) + 1) * torch.finfo(dtype).eps * absum + 1e-30
                err = max(float(((x.double() - exact).abs() / (absum + 1e-30)).max()) for x in xs)
                wrong = sum(int(((x.double() - exact).abs() > bound).sum()) for x in xs)
                reps = GRAPH_REPS if DEVICE == "cuda" else 2
                seconds = _time_replays(torch, graph, reps)
                rows.append({"algo": algo, "p": p, "dtype": str(dtype).replace("torch.", ""), "bytes": n * xs[0].element_size(),
                             "build_s": graph.build_s, "us_per_allreduce": seconds * 1e6, "device_ops": graph.n_ops,
                             "us_per_op": seconds * 1e6 / max(graph.n_ops, 1),
                             "GBps": n * xs[0].element_size() / seconds / 1e9, "max_rel_err": err, "wrong": wrong})
                del graph, xs, inputs
    table = _graph_table(rows, table_lines)
    print("\n".join(table), flush=True)
    return {"rows": rows, "table": table}


def _time_replays(torch, graph, reps):
    """Mean seconds per replay (CUDA events around `reps` back-to-back replays; perf_counter on CPU)."""
    graph.run()
    if DEVICE != "cuda":
        t0 = time.perf_counter()
        for _ in range(reps):
            graph.run()
        return (time.perf_counter() - t0) / reps
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        graph.backend.replay(graph.graph)
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 1e3 / reps


def _graph_table(rows, table_lines):
    head = ("algo", "p", "dtype", "bytes", "build_s", "us/allreduce", "ops", "us/op", "GB/s", "max_rel_err", "wrong")
    keys = ("algo", "p", "dtype", "bytes", "build_s", "us_per_allreduce", "device_ops", "us_per_op", "GBps",
            "max_rel_err", "wrong")
    return table_lines(head, [[r[k] for k in keys] for r in rows if "algo" in r])


def section_nccl1(torch):
    import torch.distributed as dist
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    torch.cuda.set_device(0)
    store = dist.HashStore()
    dist.init_process_group("nccl", store=store, rank=0, world_size=1)
    out = []
    try:
        dev = torch.device("cuda", 0)
        warm = torch.zeros(1, device=dev)
        dist.all_reduce(warm)
        for nbytes in (4096, 4 << 20):
            for m in (1, 4, 8):
                src = [torch.ones(nbytes // 4, device=dev) for _ in range(m)]
                dst = [torch.empty(nbytes // 4, device=dev) for _ in range(m)]
                ops = []
                for a, b in zip(src, dst):
                    ops.append(dist.P2POp(dist.isend, a, 0))
                    ops.append(dist.P2POp(dist.irecv, b, 0))

                def post_and_wait():
                    for w in dist.batch_isend_irecv(ops):
                        w.wait()

                for _ in range(10):
                    post_and_wait()
                torch.cuda.synchronize()
                steps = 100
                t0 = time.perf_counter()
                for _ in range(steps):
                    post_and_wait()
                    torch.cuda.synchronize()
                synced = (time.perf_counter() - t0) / steps
                t0 = time.perf_counter()
                for _ in range(steps):
                    post_and_wait()
                torch.cuda.synchronize()
                pipelined = (time.perf_counter() - t0) / steps
                ok = all(torch.equal(b, a) for a, b in zip(src, dst))
                out.append({"bytes": nbytes, "pairs": m, "us_per_step_synced": synced * 1e6,
                            "us_per_step_pipelined": pipelined * 1e6, "data_ok": ok})
    finally:
        dist.destroy_process_group()
    return out


def sync(torch):
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def section_add(torch):
    dev = torch.device(DEVICE)
    out = []
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        for n in ((1 << 20, 1 << 24, 1 << 26) if DEVICE == "cuda" else (1 << 16,)):
            a = torch.randn(n, device=dev).to(dtype)
            b = torch.randn(n, device=dev).to(dtype)
            c = torch.empty_like(a)
            nbytes = 3 * n * a.element_size()

            def timeit(fn, reps=20):
                for _ in range(3):
                    fn()
                if DEVICE != "cuda":
                    t0 = time.perf_counter()
                    for _ in range(reps):
                        fn()
                    return (time.perf_counter() - t0) / reps
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record()
                for _ in range(reps):
                    fn()
                end.record()
                torch.cuda.synchronize()
                return start.elapsed_time(end) / 1e3 / reps

            t_inplace = timeit(lambda: a.add_(b))
            t_alpha = timeit(lambda: a.add_(b, alpha=-1))
            t_plain = timeit(lambda: torch.add(a, b))
            t_out = timeit(lambda: torch.add(a, b, out=c))
            out.append({"dtype": str(dtype).replace("torch.", ""), "elements": n,
                        "GBps_add_inplace": nbytes / t_inplace / 1e9,
                        "GBps_add_inplace_alpha": nbytes / t_alpha / 1e9,
                        "GBps_torch_add": nbytes / t_plain / 1e9,
                        "GBps_torch_add_out": nbytes / t_out / 1e9,
                        "inplace_over_plain": t_plain / t_inplace})
    return out


def section_gloo_cuda(torch):
    import tempfile

    from gpu_runner.launch import launch, worker_certificate
    from optcc.algorithms import build_schedule
    from optcc.cluster import Cluster
    s = build_schedule("ring", Cluster.build(2), 1)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "ring2.json")
        s.save(path)
        res = launch(2, ["--schedule", path, "--certificate", worker_certificate(s, tmp), "--backend", "gloo",
                         "--device", "cuda", "--size", str(4 << 20), "--dtype", "float32"],
                     timeout_s=30, wall_limit_s=90)
    return {"ok": res.ok, "result": res.result, "failure": None if res.ok else res.describe_failure()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--cpu-dry-run", action="store_true",
                    help="run the virtual, graph and add sections on CPU with small sizes (code check only)")
    args = ap.parse_args(argv)
    global DEVICE, SIZES
    if args.cpu_dry_run:
        DEVICE, SIZES = "cpu", (1, 1001)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "gpu_results.json")
    results: dict = {"sections": {}, "device": DEVICE}

    def save():
        results["elapsed_s"] = elapsed()
        with open(path + ".tmp", "w") as fh:
            fh.write(dumps(results, indent=1))
        os.replace(path + ".tmp", path)

    try:
        import torch
    except ImportError as e:
        results["error"] = f"torch not importable: {e}"
        save()
        return 1
    order = [("env", section_env), ("virtual", section_virtual), ("graph", section_graph), ("add", section_add),
             ("nccl1", section_nccl1), ("gloo_cuda", section_gloo_cuda)]
    for name, fn in order:
        cpu_ok = args.cpu_dry_run and name in ("virtual", "graph", "add")
        if name != "env" and not torch.cuda.is_available() and not cpu_ok:
            results["sections"][name] = {"skipped": "no CUDA device"}
            continue
        if elapsed() > BUDGET_S:
            results["sections"][name] = {"skipped": f"time budget ({BUDGET_S:.0f} s) used"}
            continue
        t0 = time.perf_counter()
        try:
            results["sections"][name] = {"result": fn(torch)}
        except Exception as e:  # noqa: BLE001 - record and go on to the next section
            results["sections"][name] = {"error": f"{type(e).__name__}: {e}",
                                         "traceback": traceback.format_exc()[-2000:]}
        results["sections"][name]["seconds"] = time.perf_counter() - t0
        print(f"[gpu_checks] {name}: {'error' if 'error' in results['sections'][name] else 'done'} "
              f"in {results['sections'][name]['seconds']:.1f} s", flush=True)
        save()
    virt = results["sections"].get("virtual", {}).get("result") or []
    graph = (results["sections"].get("graph", {}).get("result") or {}).get("rows") or []
    results["summary"] = {
        "virtual_cases": sum(1 for r in virt if "wrong" in r),
        "virtual_wrong_cases": sum(1 for r in virt if r.get("wrong", 0) or "error" in r),
        "graph_cases": sum(1 for r in graph if "wrong" in r),
        "graph_wrong_cases": sum(1 for r in graph if r.get("wrong", 0)),
    }
    save()
    print(dumps(results["summary"]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
