"""`optcc testbed`: torch all_reduce vs OptCC on a real shaped network of namespaces (root only)."""
from __future__ import annotations

import math
import sys

from optcc.cluster import parse_straggler
from optcc_app.commands._common import add_segments_arg, byte_size, positive_seconds, print_json, print_table
from gpu_runner.runners import DEFAULT_RUNNER, RUNNERS   # torch-free module
from optcc.errors import OptccError, RunFailed
from optcc.files import check_writable
from optcc.needs import require


def register(sub) -> None:
    parser = sub.add_parser("testbed", help="measure torch all_reduce and OptCC on tc-shaped network namespaces (root)")
    parser.add_argument("--p", type=int, required=True, help="number of ranks (one namespace each)")
    parser.add_argument("--straggler", required=True, metavar="RANK:ELL", help="slowed rank and ℓ, e.g. 0:2")
    parser.add_argument("--rate", type=float, required=True, metavar="MBIT",
                        help="healthy link rate in Mbit/s (straggler gets rate/ℓ), each direction")
    parser.add_argument("--size", type=byte_size, default=4 << 20, metavar="BYTES",
                        help="bytes per rank, e.g. 4M (K/M/G binary; default 4 MiB)")
    add_segments_arg(parser, "with --sizes and --delay-ms per size, from the measured delay and per-message "
                             "overhead; else once, at --size or the largest of --sizes, on the shaped cluster "
                             "with --delay-ms as its latency")
    parser.add_argument("--iters", type=int, default=2, help="timed runs per measurement (default 2)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed runs first (default 1)")
    parser.add_argument("--timeout", type=float, default=120.0, help="dead/hung peer timeout in seconds (default 120)")
    parser.add_argument("--no-ring", action="store_true", help="skip the extra bar: our ring executor")
    parser.add_argument("--runner", choices=RUNNERS, default=DEFAULT_RUNNER,
                        help="executor for OptCC and our ring (default streaming; --sizes measures step and "
                             "streaming, ordered or not by message size)")
    parser.add_argument("--delay-ms", type=float, default=None, metavar="D",
                        help="one-way delay D ms on every link (TAP devices + a user-space forwarder; no netem)")
    parser.add_argument("--sizes", metavar="LIST",
                        help="sweep sizes, e.g. 1M,2M,4M (K/M/G binary): per size torch fault-free and "
                             "straggler, OptCC step (and streaming where available); replaces --size")
    parser.add_argument("--plot", default="testbed.png", metavar="PNG", help="bar chart path (default testbed.png)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.set_defaults(handler=run)


def run(args) -> int:
    require("testbed", "torch")
    if args.plot:
        require("testbed", "matplotlib", because="the --plot chart; --plot '' skips it")
    from gpu_runner.testbed import run_testbed
    if args.p < 2:
        raise OptccError("--p", f"expected at least 2 ranks, got {args.p}")
    rank, ell = parse_straggler(args.straggler)
    if not 0 <= rank < args.p:
        raise OptccError("--straggler", f"rank {rank} is out of range 0..{args.p - 1}")
    if ell <= 1:
        raise OptccError("--straggler", f"the testbed compares a straggler network: ℓ must be > 1, got {ell}")
    positive_seconds(args.timeout, "--timeout")
    if not (math.isfinite(args.rate) and args.rate > 0):
        raise OptccError("--rate", f"expected a positive rate in Mbit/s, got {args.rate}")
    from optcc.sizes import parse_bytes
    args.size = parse_bytes(args.size, "--size")
    if args.size <= 0:
        raise OptccError("--size", f"expected a positive size in bytes, got {args.size}")
    if args.iters < 1:
        raise OptccError("--iters", f"expected at least 1 timed run, got {args.iters}")
    if args.delay_ms is not None and not 0 <= args.delay_ms <= 10_000:
        raise OptccError("--delay-ms", f"expected 0 ≤ D ≤ 10000 ms, got {args.delay_ms}")
    args.segments = _segments(args, rank, ell)
    if args.plot:
        check_writable(args.plot, "--plot")          # before minutes of measuring, not after
    log = (lambda m: None) if args.json else (lambda m: print("# " + m, file=sys.stderr, flush=True))
    if args.sizes is not None:
        return _run_sizes(args, rank, ell, log)
    res = run_testbed(args.p, rank, ell, args.rate, args.size, args.segments, args.iters, args.warmup,
                      args.timeout, None, with_ring=not args.no_ring, log=log, delay_ms=args.delay_ms,
                      runner=args.runner)                  # the chart is drawn after the table is out
    if args.plot:
        res["plot"] = args.plot
    if args.json:
        print_json(res)
    else:
        print(f"# p = {res['p']}, straggler {res['straggler']} at ℓ = {res['ell']:g}: links "
              f"{res['rate_mbit']:g} Mbit/s, straggler {res['straggler_rate_mbit']:g} Mbit/s (tc tbf, both "
              f"directions); {res['size']} bytes float32, {res['iters']} timed runs each")
        print(f"# lower bound {res['lower_bound_seconds']:.3f} s, T0 {res['t0_seconds']:.3f} s, "
              f"OptCC schedule (slot model) {res['optcc_schedule_seconds']:.3f} s")
        print_table(["run", "seconds", "/ fault-free", "/ lower bound", "correct"],
                    [[r["name"], f"{r['seconds']:.3f}", f"{r['ratio_to_fault_free']:.3f}",
                      f"{r['ratio_to_lower_bound']:.3f}", r["correct"]] for r in res["rows"]])
        t = res["targets"]
        print(f"OptCC vs torch all_reduce on the straggler network: {res['speedup_optcc_vs_torch']:.3f}x "
              f"(target ≥ 1.5: {'met' if t['speedup_ge_1.5'] else 'NOT met'}); OptCC / lower bound "
              f"{res['optcc_over_lower_bound']:.3f} (target ≤ 1.15: {'met' if t['within_15pct_of_bound'] else 'NOT met'})")
    from gpu_runner.testbed import write_chart
    _draw(write_chart, res, args)
    return 0 if all(r["correct"] for r in res["rows"]) else 1


def _sizes(args) -> list[int]:
    from optcc.sizes import parse_bytes
    sizes = [parse_bytes(x, "--sizes") for x in args.sizes.split(",") if x.strip()]
    if not sizes:
        raise OptccError("--sizes", "expected a comma-separated list of sizes, e.g. 1M,4M")
    return sizes


def _segments(args, rank: int, ell) -> int | str:
    """The k of OptCC's schedule, or 'auto' left to the sweep where it measures the delay and the
    per-message overhead (--sizes with --delay-ms). Otherwise auto is chosen here, once, as every
    command chooses it (optcc.segments): at --size or the largest of --sizes, on the testbed's
    cluster (healthy B = --rate, the straggler) with the one-way --delay-ms as its latency L; a
    testbed without delay has no latency, so under the default preset, said on stderr even for the
    default: that preset's 14 µs is far below gloo's per-message cost here (docs/gpu_runner.md)."""
    from fractions import Fraction
    from optcc.cluster import Cluster
    from optcc.segments import parse_segments
    from optcc_app.commands._common import segments_from_args
    try:
        segments = parse_segments(args.segments)
    except OptccError as e:
        raise OptccError("--segments", e.message) from None
    if segments != "auto" or (args.sizes is not None and args.delay_ms is not None):
        return segments
    size = args.size if args.sizes is None else max(_sizes(args))
    delay = Fraction(str(args.delay_ms)) / 1000 if args.delay_ms else None
    cluster = Cluster.build(args.p, stragglers={rank: ell}, bandwidth=Fraction(str(args.rate)) * 10**6 / 8,
                            latency=delay)
    return segments_from_args(args, "optcc", cluster, size,
                              no_latency_hint="give --delay-ms, or --segments K, to choose another",
                              say_default_latency=True, real_run=True)


def _draw(draw, res, args) -> None:
    """Draw the chart after the table (or JSON) is out, so that a plotting error loses no measurement."""
    sys.stdout.flush()
    if not args.plot:
        return
    try:
        draw(res, args.plot)
    except Exception as e:  # noqa: BLE001 - any plotting failure: the measured results are already printed
        raise RunFailed("--plot", f"the results above were measured and printed, but the chart could not be "
                                  f"drawn: {type(e).__name__}: {e}") from None
    if not args.json:
        print(f"chart: {args.plot}")


def _run_sizes(args, rank, ell, log) -> int:
    from gpu_runner.testbed_sizes import COLUMNS, run_sizes
    sizes = _sizes(args)
    res = run_sizes(args.p, rank, ell, args.rate, sizes, args.segments, args.iters, args.warmup,
                    args.timeout, args.delay_ms, plot=None, log=log)   # the chart comes after the table
    if args.plot:
        res["plot"] = args.plot
    if args.json:
        print_json(res)
    else:
        delay = "no delay" if res["delay_ms"] is None else (
            f"{res['delay_ms']:g} ms one-way delay (measured RTT {res['measured_rtt_s'] * 1e3:.2f} ms, "
            f"{res['measured_rate_mbit']:.1f} Mbit/s, per-message overhead {res['measured_overhead_s'] * 1e3:.2f} ms)")
        print(f"# p = {res['p']}, straggler {res['straggler']} at ℓ = {res['ell']:g}: links {res['rate_mbit']:g} "
              f"Mbit/s, straggler {res['straggler_rate_mbit']:g} Mbit/s, {delay}; {res['dtype']}, "
              f"{res['iters']} timed runs per size")
        cols = list(COLUMNS) + ["streaming_runner", "schedule_s", "lower_bound_s", "correct"]
        print_table(cols, [[_cell(r[c]) for c in cols] for r in res["rows"]])
        below = res["ring_wins_below"]
        print(f"{res['optcc_column']} beats torch with the straggler from "
              f"{'no measured size' if below is None else f'{below} bytes'} upwards")
        for note in res["notes"]:
            print(f"# {note}")
    from gpu_runner.testbed_sizes import write_sizes_chart
    _draw(write_sizes_chart, res, args)
    return 0 if all(r["correct"] for r in res["rows"]) else 1


def _cell(v):
    if v is None:
        return "null"
    return f"{v:.3f}" if isinstance(v, float) else v
