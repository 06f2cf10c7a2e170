"""`optcc demo`: the main job on a default degraded cluster (p = 16, GPU 0 at ℓ = 2).

Builds the ring and OptCC schedules, checks them (simulation and a Z3 proof), times them, prints
them beside T0, the lower bound and the fluid-LP optima, and runs a same-shape OptCC schedule on
local gloo processes when torch is installed (optcc_app.compose.demo does the work; this module parses and prints).
"""
from __future__ import annotations

import sys
import time

from optcc_app.compose.demo import run_demo
from optcc_app.commands._common import (add_cluster_args, add_segments_arg, add_size_and_json_args, cluster_from_args, message_size,
                                    print_json, print_table, segments_from_args)


def register(sub) -> None:
    parser = sub.add_parser("demo", help="the main job: ring vs OptCC vs the lower bound on a degraded cluster")
    add_cluster_args(parser, p_required=False)
    parser.set_defaults(straggler=None)            # --p defaults to 16 unless --cluster is given
    add_segments_arg(parser, "at --n")
    add_size_and_json_args(parser)
    parser.add_argument("--no-run", action="store_true", help="skip the real gloo run even if torch is installed")
    parser.set_defaults(handler=run)


def run(args) -> int:
    if args.straggler is None:
        args.straggler = [] if args.cluster else ["0:2"]
    if args.p is None and not args.cluster:
        args.p = 16
    message_size(args)
    cluster = cluster_from_args(args)
    k = segments_from_args(args, "optcc", cluster, args.n)
    started = time.perf_counter()
    result = run_demo(cluster, k, args.n, real_run=not args.no_run,
                      progress=None if args.json else lambda msg: print(msg, file=sys.stderr))
    if args.json:
        print_json(result)
        return 0 if result["ok"] else 1
    print(f"# AllReduce of n = {args.n} bytes on {cluster.describe()}, B = {float(cluster.bandwidth):.3g} B/s, "
          f"OptCC with k = {k} segments; times in units of n/B")
    rows = []
    for name, row in result["rows"].items():
        rows.append([name, row["time"], row.get("seconds"), row["ratio_to_t0"], row["ratio_to_lower_bound"],
                     _mark(row.get("correct")), _mark(row.get("proved")), row.get("note", "")])
    print_table(["", "n/B", "seconds", "/T0", "/bound", "sum ok", "proved", "note"], rows)
    for line in result["notes"]:
        print(line)
    print(f"({time.perf_counter() - started:.1f} s)")
    return 0 if result["ok"] else 1


def _mark(value):
    return {True: "yes", False: "NO", None: "-"}[value]
