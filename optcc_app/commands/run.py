"""`optcc run --nproc P --schedule FILE`: prove the schedule, then run it on P local ranks."""
from __future__ import annotations

import sys
import threading
import time

from gpu_runner.runners import DEFAULT_RUNNER, RUNNERS   # torch-free modules
from gpu_runner.worker import DTYPES, ELEMENT_BYTES
from optcc_app.commands._common import byte_size, positive_seconds, print_json, require_cuda_for_nccl
from optcc.errors import OptccError, RunFailed
from optcc.needs import require

SAY_AFTER_S = 2.0     # policy: a step that takes longer than this is announced on stderr


def register(sub) -> None:
    parser = sub.add_parser("run", help="prove a schedule, then run it with torch.distributed on local processes")
    parser.add_argument("--nproc", type=int, required=True, help="number of local ranks (= the schedule's p)")
    parser.add_argument("--schedule", required=True, metavar="FILE", help="Schedule JSON")
    parser.add_argument("--certificate", metavar="FILE", help="verifier certificate (skips re-proving)")
    parser.add_argument("--size", type=byte_size, default=1 << 20, metavar="BYTES",
                        help="bytes per rank, e.g. 4M (K/M/G binary; default 1 MiB)")
    parser.add_argument("--dtype", choices=DTYPES, default="float32")
    parser.add_argument("--backend", choices=("auto", "gloo", "nccl"), default="auto",
                        help="auto: NCCL when CUDA is available, else gloo")
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="seconds a rank waits for a dead or hung peer before exiting (default 60)")
    parser.add_argument("--iters", type=int, default=1, help="timed runs (default 1)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed runs first (default 1)")
    parser.add_argument("--runner", choices=RUNNERS, default=DEFAULT_RUNNER,
                        help="streaming (default; refused unless proved safe for the schedule), streaming-ordered "
                             "(receives in the schedule's order per port: for messages of many round trips) or step")
    parser.add_argument("--allow-worse-numerics", action="store_true",
                        help="run even when the schedule's rounding-error bound for --dtype is worse than "
                             "the ring's (or an integer intermediate can overflow)")
    parser.add_argument("--generated-check", choices=("auto", "instance", "per-rank"), default="auto",
                        help="a generated schedule (optcc schedule --form generated): instance = build and prove it "
                             "here, then each rank compares its program's digest; per-rank = accept it by its "
                             "generator's proof and let each rank check its own program (no instance is built; "
                             "numerics are then not analysed: needs --allow-worse-numerics); auto (default): "
                             "instance within the build limit p²·k ≤ 4·10⁶, else per-rank")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.set_defaults(handler=run)


def run(args) -> int:
    require("run", "torch")
    if args.nproc < 2:
        raise OptccError("--nproc", f"expected at least 2 ranks, got {args.nproc}")
    positive_seconds(args.timeout, "--timeout")
    elem = ELEMENT_BYTES[args.dtype]
    if args.size % elem:
        raise OptccError("--size", f"expected a whole number of {args.dtype} elements ({elem} bytes each), "
                                   f"got {args.size} bytes")
    if args.iters < 1 or args.warmup < 0:
        raise OptccError("--iters", "expected --iters ≥ 1 and --warmup ≥ 0")
    from gpu_runner.launch import check_runner, launch_trusted, prepare_schedule
    require_cuda_for_nccl(args.backend)
    started = time.monotonic()

    def say(message: str) -> None:
        print(f"optcc run: {message} ({time.monotonic() - started:.1f} s)", file=sys.stderr, flush=True)

    def heard(event: dict) -> None:
        if event["event"] == "group":
            say(f"process group formed: {event['backend']}, {event['world_size']} ranks")
        elif event["event"] == "ready":
            say("every rank has its proved program; running")
    # said only when the checks take a while, so that a refusal stays one line
    slow = threading.Timer(SAY_AFTER_S, say, [f"checking {args.schedule}: "
                                              + ("its certificate" if args.certificate else "proving it")
                                              + ", numerics, runner"])
    slow.daemon = True
    slow.start()
    try:
        per_rank = {"auto": None, "instance": False, "per-rank": True}[args.generated_check]
        schedule, note = prepare_schedule(args.schedule, args.nproc, args.certificate, args.dtype,
                                          args.allow_worse_numerics, per_rank=per_rank)
        runner_note = check_runner(schedule, args.runner)
    finally:
        slow.cancel()
    say(f"accepted; starting {args.nproc} ranks")
    res = launch_trusted(args.schedule, schedule.sha256(), args.nproc, args.size, args.dtype,
                         args.timeout, args.iters, args.warmup, args.backend, runner=args.runner,
                         certificate=args.certificate, allow_worse_numerics=args.allow_worse_numerics,
                         progress=heard, schedule=schedule)
    if not res.ok:
        raise RunFailed("run", "the run failed: " + res.describe_failure())
    r = res.result
    row = r["rows"][0]
    out = {"correct": r["correct"], "seconds": r["seconds"], "backend": r["backend"],
           "world_size": r["world_size"], "size": row["size"], "count": row["count"],
           "dtype": row["type"], "wrong": row["wrong"], "max_abs_error": row["max_abs_error"],
           "algorithm": schedule.meta.get("algorithm"), "proof": note, "runner": args.runner}
    if args.json:
        print_json(out)
    else:
        print(f"# {out['algorithm'] or 'schedule'} on {schedule.cluster.describe()}: {note}; {runner_note}")
        print(f"{out['world_size']} ranks ({out['backend']}), {out['size']} bytes {out['dtype']}: "
              f"{'correct' if out['correct'] else 'WRONG'} ({out['wrong']} wrong elements, "
              f"max |error| {_num(out['max_abs_error'])}), {out['seconds'] * 1e3:.3f} ms")
    return 0 if out["correct"] else 1


def _num(x) -> str:
    """A float as %.3g; the strings optcc.jsonout uses for NaN/±inf pass through."""
    return f"{x:.3g}" if isinstance(x, (int, float)) else str(x)
