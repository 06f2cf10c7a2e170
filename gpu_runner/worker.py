"""One rank's process: join the process group, run the schedule (or torch's all_reduce), check, time.

Started by torchrun (`python -m gpu_runner ...`) or by gpu_runner.launch (optcc run / bench /
testbed), which set the usual env:// variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT,
LOCAL_RANK). Rank 0 gathers the figures of all ranks with two small all_reduces and writes
them as JSON (--result FILE) and/or prints them. Any failure ends the process with a one-line
message "optcc-runner rank R: error: ..." and a non-zero code, never a hang (see watchdog.py).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import timedelta

from gpu_runner.runners import DEFAULT_RUNNER, RUNNERS
from gpu_runner.watchdog import EXIT_WRONG, Watchdog, run_rank
from optcc.jsonout import dumps

DTYPES = ("float32", "bfloat16", "float16", "int32", "int64")
# machine epsilon of each float dtype (IEEE / bfloat16 definitions)
ELEMENT_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "int32": 4, "int64": 8}
EPS = {"float32": 2.0**-23, "bfloat16": 2.0**-7, "float16": 2.0**-10}
DEFAULT_TIMEOUT_S = 60.0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m gpu_runner",
                                 description="Run a proved optcc Schedule with torch.distributed "
                                             "(launch with torchrun --nproc-per-node P).")
    ap.add_argument("--schedule", metavar="FILE", help="Schedule JSON (optcc-schedule/1)")
    ap.add_argument("--algo", choices=("schedule", "torch"), default="schedule",
                    help="'schedule' runs FILE; 'torch' runs dist.all_reduce (baseline)")
    ap.add_argument("--certificate", metavar="FILE", help="verifier certificate for FILE (skips re-proving)")
    # what optcc's launcher proved, signed for the workers it starts (gpu_runner.proof.write_attestation)
    ap.add_argument("--attestation", metavar="FILE", help=argparse.SUPPRESS)
    ap.add_argument("--size", type=int, default=1 << 20, help="bytes per rank (default 1 MiB)")
    ap.add_argument("--sizes", help="comma-separated sizes in bytes (bench mode)")
    ap.add_argument("--dtype", choices=DTYPES, default="float32")
    ap.add_argument("--backend", choices=("auto", "gloo", "nccl"), default="auto")
    ap.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                    help="where the data lives (auto: cuda for nccl, cpu for gloo; gloo+cuda is allowed)")
    ap.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S,
                    help="seconds any rank waits for a peer before giving up (default 60)")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--iters", type=int, default=1)
    ap.add_argument("--mode", choices=("run", "bench"), default="run")
    ap.add_argument("--alternate-torch", action="store_true",
                    help="bench mode: time torch's all_reduce in rounds alternating with the schedule's (one "
                         "machine state for both: their ratio is measured in one run)")
    ap.add_argument("--runner", choices=RUNNERS, default=DEFAULT_RUNNER,
                    help="streaming (default: no per-time barrier, proved safe per schedule) or step")
    ap.add_argument("--result", metavar="FILE", help="rank 0 writes the JSON result here")
    # rank 0 appends one JSON line per event (group formed, ready, each size's row): the launcher's progress
    ap.add_argument("--progress", metavar="FILE", help=argparse.SUPPRESS)
    ap.add_argument("--json", action="store_true", help="rank 0 prints JSON to stdout")
    ap.add_argument("--allow-worse-numerics", action="store_true",
                    help="run even when the schedule's rounding-error bound for --dtype is worse than the ring's")
    # fault injection for tests: "die:RANK" or "hang:RANK" (after the process group is up)
    ap.add_argument("--inject-fault", help=argparse.SUPPRESS)
    return ap


def main(argv=None) -> int:
    return run_rank("optcc-runner", _main, build_parser().parse_args(argv))


def _load_schedule(args):
    """The schedule at --schedule, admitted by its form's row (gpu_runner.admission): under the
    launcher's attestation, or proved here (torchrun). A generated schedule's part for this rank
    is built after placement (_rank_part)."""
    if not args.schedule:
        raise ValueError("--schedule FILE is required with --algo schedule")
    from gpu_runner.admission import admission_of
    from optcc.generated import load_any
    schedule = load_any(args.schedule, "--schedule")
    admission = admission_of(schedule)
    if args.attestation:                           # the launcher proved it: check its signature, not the proof
        admission.attested(schedule, args.attestation, args.dtype, args.allow_worse_numerics)
    else:
        admission.here(schedule, args.certificate, args.dtype, args.allow_worse_numerics, args.runner)
    return schedule


def _rank_part(schedule, sched_rank: int, args):
    """What this rank lowers (gpu_runner.admission): the flow list, or a generated schedule's part
    for this rank alone (built from its parameters, O(p·k)), checked."""
    from gpu_runner.admission import admission_of
    return admission_of(schedule).rank_part(schedule, sched_rank, args.runner, args.dtype,
                                            args.allow_worse_numerics)


def rank_executor(schedule, sched_rank: int, args, group_ranks=None, watchdog=None):
    """(this rank's part, its executor): the part as _rank_part builds it, the executor of the
    runner named (a streaming one takes the program the part's check built): what a rank does
    between agreeing on the schedule and its first message (benchmarks/first_message.py times it)."""
    from gpu_runner.proof import built_program
    from gpu_runner.runners import make_executor, program_key
    part = _rank_part(schedule, sched_rank, args)
    key = program_key(args.runner)
    executor = make_executor(part, sched_rank, args.runner, group_ranks=group_ranks, watchdog=watchdog,
                             program=built_program(part, *key) if key else None)
    return part, executor


def _main(args, rank: int) -> int:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    schedule = _load_schedule(args) if args.algo == "schedule" else None
    if schedule is not None and schedule.cluster.p != world:
        raise ValueError(f"the schedule is for {schedule.cluster.p} ranks but WORLD_SIZE is {world}")
    import torch
    import torch.distributed as dist

    watchdog = Watchdog(rank, args.timeout)
    watchdog.phase("the process group to form (rendezvous with every rank)")

    backend = args.backend
    if backend == "auto":
        backend = "nccl" if torch.cuda.is_available() and dist.is_nccl_available() else "gloo"
    if backend == "nccl" or args.device == "cuda":
        if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
            raise ValueError(f"backend {backend} / device {args.device} needs CUDA GPUs and none is available")
        torch.cuda.set_device(local_rank % torch.cuda.device_count())
        device = torch.device("cuda", torch.cuda.current_device())
    else:
        device = torch.device("cpu")
    dist.init_process_group(backend, timeout=timedelta(seconds=args.timeout))
    sync = torch.zeros(1, device=device if backend == "nccl" else "cpu")
    dist.all_reduce(sync)           # every rank takes part in the first collective (NCCL rule)
    watchdog.beat()
    tell = _progress(args.progress if rank == 0 else None)
    tell({"event": "group", "backend": backend, "world_size": world})

    from gpu_runner.executor import SUPPORTED_DTYPES
    dtype = SUPPORTED_DTYPES[args.dtype]
    executor, placed = None, {}
    if schedule is not None:
        from gpu_runner.gate import agree_on_schedule
        watchdog.phase("every rank's schedule digest")
        agree_on_schedule(schedule.sha256())      # every rank runs the same schedule, or none runs
        watchdog.beat()
        from gpu_runner.hosts import placement   # stragglers named by host: map schedule ranks
        watchdog.phase("every rank's host name (stragglers named by host)")
        sched_rank, group_ranks, placed = placement(schedule)
        watchdog.beat()
        schedule, executor = rank_executor(schedule, sched_rank, args, group_ranks, watchdog)

    def barrier():
        watchdog.waiting("the barrier before a timed run")
        dist.all_reduce(sync)
        if device.type == "cuda":
            torch.cuda.synchronize()
        watchdog.beat()

    def one_size(size_bytes: int) -> dict:
        elem = torch.empty((), dtype=dtype).element_size()
        count = size_bytes // elem
        inp = make_input(rank, count, dtype, device)
        ref = inp.clone()
        watchdog.waiting("torch's reference all_reduce")
        dist.all_reduce(ref)
        absref = exact = None         # Σ|x_i| and the float64 sum: only the float checks need them
        watchdog.beat()               # each reference all_reduce gets its own --timeout window
        if args.dtype in EPS:
            absref = inp.double().abs()
            watchdog.waiting("torch's reference all_reduce of |x| (float64)")
            dist.all_reduce(absref)
            watchdog.beat()
            exact = inp.double()      # float64 sum: finite wherever the exact sum is
            watchdog.waiting("torch's reference all_reduce (float64)")
            dist.all_reduce(exact)
            watchdog.beat()
        work = inp.clone()
        if executor is not None:
            executor.prepare(work)
        alternate = args.alternate_torch and executor is not None
        other = inp.clone() if alternate else None
        times, torch_times = [], []

        def timed(run, buf) -> float:
            buf.copy_(inp)
            barrier()
            if args.inject_fault:
                inject_fault(args.inject_fault, rank, watchdog)
            t0 = time.perf_counter()
            run(buf)
            if device.type == "cuda":
                torch.cuda.synchronize()
            t1 = time.perf_counter()
            watchdog.beat()
            return t1 - t0

        def torch_all_reduce(buf) -> None:
            watchdog.waiting("torch's all_reduce")
            dist.all_reduce(buf)
        mine = executor.run if executor is not None else torch_all_reduce
        for it in range(args.warmup + args.iters):
            if alternate and it % 2:                 # torch first on odd rounds: neither always goes first
                t_torch = timed(torch_all_reduce, other)
                t = timed(mine, work)
            else:
                t = timed(mine, work)
                t_torch = timed(torch_all_reduce, other) if alternate else None
            if it >= args.warmup:
                times.append(t)
                if t_torch is not None:
                    torch_times.append(t_torch)
        wrong, max_err = count_wrong(work, ref, absref, args.dtype, world, exact)
        stats = torch.tensor([float(wrong), 0.0, 0.0], dtype=torch.float64, device=device)
        mx = torch.tensor([sum(times) / max(len(times), 1), max_err, sum(torch_times) / max(len(torch_times), 1)],
                          dtype=torch.float64, device=device)
        watchdog.waiting("gathering the results")
        dist.all_reduce(stats)
        dist.all_reduce(mx, op=dist.ReduceOp.MAX)
        watchdog.beat()
        row = {"size": count * elem, "count": count, "type": args.dtype,
               "seconds": float(mx[0]), "wrong": int(stats[0]), "max_abs_error": float(mx[1]),
               "correct": int(stats[0]) == 0}
        if alternate:
            row["torch_seconds"] = float(mx[2])
        if args.dtype in EPS and count:      # error against the exact (float64) sum, in eps·Σ|x|
            scale = EPS[args.dtype] * absref + 1e-300
            errs = torch.tensor([float(((work.double() - exact).abs() / scale).max()),
                                 float(((ref.double() - exact).abs() / scale).max())], dtype=torch.float64, device=device)
            dist.all_reduce(errs, op=dist.ReduceOp.MAX)
            row.update({"err_eps": float(errs[0]), "torch_err_eps": float(errs[1])})
        return row

    tell({"event": "ready"})
    sizes = [args.size] if args.mode == "run" else [int(x) for x in (args.sizes or str(args.size)).split(",")]
    rows = []
    for s in sizes:
        rows.append(one_size(s))
        tell({"event": "row", "row": rows[-1]})
    watchdog.phase("shutdown")
    if executor is not None:
        executor.close()                # waits for a run in progress (the RankExecutor contract)
    out = {"backend": backend, "world_size": world, "algo": args.algo, "runner": args.runner,
           "schedule": None if schedule is None else schedule.meta.get("algorithm", "schedule"),
           "device": str(device), "rows": rows, **placed}
    if args.mode == "run":
        out.update({"correct": rows[0]["correct"], "seconds": rows[0]["seconds"]})
    if rank == 0:
        if args.result:
            tmp = args.result + ".tmp"
            with open(tmp, "w") as fh:
                fh.write(dumps(out))
            os.replace(tmp, args.result)
        if args.json:
            print(dumps(out))
        elif not args.result:
            for r in rows:
                print(f"rank 0: {out['algo']} {r['size']} bytes {r['type']} on {world} ranks "
                      f"({backend}): {'correct' if r['correct'] else 'WRONG'} ({r['wrong']} wrong), "
                      f"{r['seconds'] * 1e3:.3f} ms")
    watchdog.beat()
    dist.barrier() if backend == "gloo" else dist.all_reduce(sync)
    watchdog.disable()
    dist.destroy_process_group()
    return 0 if all(r["correct"] for r in rows) else EXIT_WRONG


def inject_fault(spec: str, rank: int, watchdog) -> None:
    """Test hook: 'die:R' ends rank R abruptly, 'hang:R' makes it sleep (watchdog off) mid-run."""
    kind, fault_rank = spec.split(":")
    if int(fault_rank) != rank:
        return
    if kind == "die":
        os._exit(17)
    watchdog.disable()
    time.sleep(3600)


def make_input(rank: int, count: int, dtype, device):
    """Deterministic per-rank data: integers in [-1000, 1000] or standard normals."""
    import torch
    gen = torch.Generator().manual_seed(1000 + rank)
    if dtype in (torch.int32, torch.int64):
        x = torch.randint(-1000, 1001, (count,), generator=gen, dtype=dtype)
    else:
        x = torch.randn(count, generator=gen).to(dtype)
    return x.to(device)


def count_wrong(result, ref, absref, dtype_name: str, world: int, exact=None) -> tuple[int, float]:
    """Elements differing from torch's all_reduce: exactly (ints) or beyond the float bound.

    Float bound (derived): each of two summation orders errs by at most (p−1)·eps·Σ|x_i| plus a
    final rounding, so two results differ by at most (2(p−1)+1)·eps·Σ|x_i| (+ a tiny floor).
    A NaN or ±inf element is wrong wherever the exact sum (`exact`, the float64 all_reduce of
    the inputs; torch's result when not given) fits the dtype: a comparison with NaN is false,
    so the test is written as "not within the bound", never as "beyond it".
    """
    if dtype_name not in EPS:
        diff = (result != ref)
        return int(diff.sum()), float((result.double() - ref.double()).abs().max()) if result.numel() else 0.0
    import torch
    exact = ref.double() if exact is None else exact
    err = (result.double() - ref.double()).abs()
    bound = (2 * (world - 1) + 1) * EPS[dtype_name] * absref + 1e-30
    representable = exact.abs() <= torch.finfo(result.dtype).max
    bad = (~(err <= bound) & (result != ref)) | (~torch.isfinite(result) & representable)
    return int(bad.sum()), float(err.max()) if err.numel() else 0.0


if __name__ == "__main__":
    sys.exit(main())


def _progress(path: str | None):
    """tell(event): one JSON line appended to `path` and flushed (nothing without a path)."""
    if not path:
        return lambda event: None

    def tell(event: dict) -> None:
        with open(path, "a") as fh:
            fh.write(dumps(event) + "\n")
    return tell
