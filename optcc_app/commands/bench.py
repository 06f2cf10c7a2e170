"""`optcc bench`: nccl-tests style AllReduce benchmark of a schedule, an algorithm or torch's own."""
from __future__ import annotations

import os
import sys

from gpu_runner.runners import DEFAULT_RUNNER, RUNNERS   # torch-free modules
from gpu_runner.worker import DTYPES, ELEMENT_BYTES
from optcc_app.commands._common import (add_cluster_args, add_segments_arg, cluster_from_args, positive_seconds, print_json,
                                        require_cuda_for_nccl, segments_from_args)
from optcc.errors import OptccError, RunFailed
from optcc.needs import require


def register(sub) -> None:
    parser = sub.add_parser("bench", help="AllReduce benchmark in nccl-tests' output layout (plus lb_us, eff)")
    parser.add_argument("--nproc", type=int, required=True, help="number of local ranks")
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--schedule", metavar="FILE", help="Schedule JSON (proved before it runs)")
    what.add_argument("--algo", choices=("optcc", "ring", "torch"),
                      help="build the schedule for the cluster flags ('torch' = dist.all_reduce)")
    add_cluster_args(parser, p_required=False)
    add_segments_arg(parser, "auto: chosen per size, one launch per distinct k (unused with --schedule, --algo torch)")
    parser.add_argument("-b", "--minbytes", default="8K", help="smallest size (default 8K)")
    parser.add_argument("-e", "--maxbytes", default="1M", help="largest size (default 1M)")
    parser.add_argument("-f", "--stepfactor", type=int, default=2,
                        help="size multiplier (default 2); 1 steps by -i bytes instead, as nccl-tests does")
    parser.add_argument("-i", "--stepbytes", default="1M", help="size increment with -f 1 (default 1M, nccl-tests')")
    parser.add_argument("-w", "--warmup-iters", type=int, default=2, help="untimed runs per size (default 2)")
    parser.add_argument("-n", "--iters", type=int, default=5, help="timed runs per size (default 5)")
    parser.add_argument("--dtype", choices=DTYPES, default="float32")
    parser.add_argument("-d", "--datatype", metavar="TYPE",
                        help=f"nccl-tests' type name: {', '.join(NCCL_TYPES)} (the same as --dtype)")
    parser.add_argument("-o", "--op", default="sum", help="reduction: sum, the only one optcc runs (nccl-tests' -o)")
    parser.add_argument("-c", "--check", type=int, default=1,
                        help="1: check every result against torch's all_reduce (always on; nccl-tests' -c)")
    parser.add_argument("-t", "--nthreads", type=int, default=1, help="threads per process: 1 (nccl-tests' -t)")
    parser.add_argument("-g", "--ngpus", type=int, default=1, help="GPUs per thread: 1 (nccl-tests' -g)")
    parser.add_argument("--backend", choices=("auto", "gloo", "nccl"), default="auto")
    parser.add_argument("--timeout", type=float, default=60.0, help="dead/hung peer timeout in seconds (default 60)")
    parser.add_argument("--runner", choices=RUNNERS, default=DEFAULT_RUNNER,
                        help="streaming (default; refused unless proved safe for the schedule), streaming-ordered "
                             "(receives in the schedule's order per port: for messages of many round trips) or step")
    parser.add_argument("--allow-worse-numerics", action="store_true",
                        help="run even when the schedule's rounding-error bound for --dtype is worse than the ring's")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.set_defaults(handler=run)


NCCL_TYPES = {"float": "float32", "half": "float16", "bfloat16": "bfloat16", "int32": "int32", "int": "int32",
              "int64": "int64"}     # nccl-tests' -d names this runner has; the others are refused by name


def nccl_tests_flags(args) -> None:
    """nccl-tests' flags with their meanings: -d maps onto --dtype; what optcc does not run is refused
    naming the flag (no reduction but sum, no unchecked runs, one thread and one GPU per process)."""
    if args.datatype is not None:
        if args.datatype not in NCCL_TYPES:
            raise OptccError("-d", f"optcc bench runs {', '.join(NCCL_TYPES)}; got {args.datatype!r}")
        args.dtype = NCCL_TYPES[args.datatype]
    if args.op != "sum":
        raise OptccError("-o", f"optcc runs the AllReduce sum only; got -o {args.op}")
    if args.check != 1:
        raise OptccError("-c", "optcc bench always checks every result against torch's all_reduce; -c takes 1 only")
    if args.nthreads != 1 or args.ngpus != 1:
        flag = "-t" if args.nthreads != 1 else "-g"
        raise OptccError(flag, "one rank per process, one GPU per rank: -t 1 -g 1 (give the rank count with --nproc)")


def run(args) -> int:
    nccl_tests_flags(args)
    require("bench", "torch")
    from gpu_runner.bench import sweep, table_rows
    from optcc.sizes import parse_bytes
    from gpu_runner.launch import attested_worker_args, check_runner, launch, prepare_schedule, private_tempdir
    if args.nproc < 2:
        raise OptccError("--nproc", f"expected at least 2 ranks, got {args.nproc}")
    if args.iters < 1 or args.warmup_iters < 0:
        raise OptccError("-n", "expected -n ≥ 1 and -w ≥ 0")
    positive_seconds(args.timeout, "--timeout")
    lo, hi = parse_bytes(args.minbytes, "-b"), parse_bytes(args.maxbytes, "-e")
    sizes = sweep(lo, hi, args.stepfactor, parse_bytes(args.stepbytes, "-i"))
    elem = ELEMENT_BYTES[args.dtype]
    if any(s % elem for s in sizes):
        raise OptccError("-b", f"every size must be a whole number of {args.dtype} elements ({elem} bytes), "
                               f"got {', '.join(str(s) for s in sizes if s % elem)}")
    require_cuda_for_nccl(args.backend)
    base = ["--mode", "bench", "--dtype", args.dtype, "--warmup", str(args.warmup_iters), "--iters", str(args.iters),
            "--backend", args.backend]
    if args.p is None and not args.cluster:
        args.p = args.nproc                  # cluster flags default to one rank per process
    groups = _size_groups(args, sizes)       # [(k or None, sizes)]: one launch each
    rows: list = []
    result: dict = {}
    shown = None
    with private_tempdir("optcc-bench-") as tmp:
        for k, mine in groups:
            common = [*base, "--sizes", ",".join(map(str, mine))]
            schedule = None                  # torch's own all_reduce runs no schedule
            if args.schedule or args.algo in ("optcc", "ring"):
                if args.schedule:
                    path = args.schedule
                else:
                    from optcc.algorithms import build_schedule
                    built = build_schedule(args.algo, cluster_from_args(args), k)
                    path = os.path.join(tmp, f"{args.algo}-k{k}.json")
                    built.save(path)
                schedule, note = prepare_schedule(path, args.nproc, None, args.dtype, args.allow_worse_numerics)
                note += "; " + check_runner(schedule, args.runner)
                cluster = schedule.cluster
                worker = [*attested_worker_args(schedule, path, tmp, args.runner, args.dtype, args.allow_worse_numerics),
                          "--runner", args.runner, "--alternate-torch", *common]
                if args.allow_worse_numerics:
                    worker.append("--allow-worse-numerics")
                label = f"{schedule.meta.get('algorithm', 'schedule')} ({note})"
            else:
                cluster = cluster_from_args(args)
                if cluster.p != args.nproc:
                    raise OptccError("--p", f"the cluster has p = {cluster.p} but --nproc is {args.nproc}")
                worker = ["--algo", "torch", *common]
                label = "torch.distributed.all_reduce"
            say(f"starting {args.nproc} ranks ({len(mine)} sizes" + (f", k = {k}" if k is not None else "") + ")")
            if shown is None:
                shown = _Rows(args, cluster, label, lo, hi, say)
            shown.segments = k
            res = launch(args.nproc, worker, args.timeout, schedule=schedule, progress=shown.event)
            if not res.ok:
                raise RunFailed("bench", "the benchmark failed: " + res.describe_failure())
            rows += table_rows(res.result, cluster, k)
            result = res.result
    rows.sort(key=lambda r: r["size"])
    if args.json:
        ks = sorted({k for k, _ in groups if k is not None})
        print_json({"algorithm": label, "runner": result.get("runner"), "cluster": cluster.to_json(),
                    "backend": result["backend"], "world_size": result["world_size"], "warmup": args.warmup_iters,
                    "iters": args.iters, "segments": ks[0] if len(ks) == 1 else (ks or None), "rows": rows})
    else:
        shown.finish(result, rows)
    return 0 if all(r["wrong"] == 0 for r in rows) else 1


def _size_groups(args, sizes: list[int]) -> list[tuple[int | None, list[int]]]:
    """The launches: for --algo optcc|ring, runs of consecutive sizes whose k is the same (auto's
    choice per size; a given --segments K is every size's k: one launch); else one launch."""
    if args.schedule or args.algo not in ("optcc", "ring"):
        return [(None, sizes)]
    cluster = cluster_from_args(args)
    groups: list[tuple[int | None, list[int]]] = []
    for size in sizes:                  # consecutive sizes with one k share a launch: rows stay in order
        k = segments_from_args(args, args.algo, cluster, size, real_run=True)
        if groups and groups[-1][0] == k:
            groups[-1][1].append(size)
        else:
            groups.append((k, [size]))
    return groups


def say(message: str) -> None:
    print(f"optcc bench: {message}", file=sys.stderr, flush=True)


class _Rows:
    """The table as nccl-tests prints it, row by row as each size finishes (text), or one progress
    line per size on stderr (--json, whose stdout is the JSON alone)."""

    def __init__(self, args, cluster, label, lo, hi, say):
        self.args, self.cluster, self.label, self.say = args, cluster, label, say
        step = f"{args.stepfactor}(factor)" if args.stepfactor > 1 else f"{args.stepbytes}(bytes)"
        self.run_line = (f"nThread 1 nGpus 1 minBytes {lo} maxBytes {hi} step: {step} "
                         f"warmup iters: {args.warmup_iters} iters: {args.iters} agg iters: 1 validation: 1 graph: 0")
        self.world, self.header = None, False
        self.segments = None            # the k of the launch in progress (its rows' k column)

    def _print_header(self, world, backend) -> None:
        from gpu_runner.bench import nccl_header
        notes = (f"{self.label} on {self.cluster.describe()}, {world} ranks ({backend})",
                 "in place: the out-of-place columns repeat the in-place run; "
                 f"lb_us = lower bound at B = {float(self.cluster.bandwidth):.4g} B/s; eff = lb_us/time")
        print("\n".join(nccl_header(self.run_line, notes)), flush=True)
        self.header = True

    def event(self, event: dict) -> None:
        from gpu_runner.bench import nccl_row, table_rows
        if event["event"] == "group":
            self.world = event["world_size"]
            self.say(f"process group formed ({event['backend']}, {self.world} ranks)")
            if not self.args.json and not self.header:
                self._print_header(self.world, event["backend"])
        elif event["event"] == "row":
            row, = table_rows({"world_size": self.world, "rows": [event["row"]]}, self.cluster, self.segments)
            if self.args.json:
                self.say(f"{row['size']} bytes: {row['time_us']:.2f} us, {row['wrong']} wrong")
            else:
                print(nccl_row(row), flush=True)

    def finish(self, result, rows) -> None:
        from gpu_runner.bench import nccl_footer, nccl_row
        if not self.header:             # no progress came (an old worker): the whole table now
            self._print_header(result["world_size"], result["backend"])
            for row in rows:
                print(nccl_row(row))
        print("\n".join(nccl_footer(rows)))
