"""`optcc compare`: lower bound, fluid LP (shared, exclusive), ILP, OptCC and rings in one table."""
from __future__ import annotations

from optcc_app.commands._common import (add_cluster_args, add_segments_arg, add_size_and_json_args, cluster_from_args, message_size,
                                    positive_seconds, print_json, print_table, segments_from_args, LOUD_WORK)
from optcc.timing import units_to_seconds


def register(sub) -> None:
    parser = sub.add_parser("compare", help="lower bound vs LP/ILP optimum vs OptCC vs ring on one cluster")
    add_cluster_args(parser)
    add_segments_arg(parser, "at --n")
    parser.add_argument("--ilp", action="store_true", help="also search an optimal tree schedule with CP-SAT (p ≤ 4)")
    parser.add_argument("--ilp-pieces", type=int, default=2, help="equal pieces for the ILP (default 2)")
    parser.add_argument("--ilp-time-limit", type=float, default=30.0, help="CP-SAT time limit in seconds (default 30)")
    parser.add_argument("--solver", default="glop", help="LP solver: glop (default), pdlp, highs, clp, scip")
    parser.add_argument("--no-prove", action="store_true", help="skip the Z3 proofs of the schedules")
    add_size_and_json_args(parser)
    parser.set_defaults(handler=run)




def run(args) -> int:
    import sys
    from optcc_app.compose.comparison import MATERIALIZE_MAX_P, compare

    message_size(args)
    positive_seconds(args.ilp_time_limit, "--ilp-time-limit")
    cluster = cluster_from_args(args)
    k = segments_from_args(args, "optcc", cluster, args.n, build=cluster.p <= MATERIALIZE_MAX_P)
    loud = cluster.p <= MATERIALIZE_MAX_P and cluster.p ** 2 * k >= LOUD_WORK

    def progress(message: str) -> None:
        print(f"optcc compare: {message}", file=sys.stderr, flush=True)
    if loud:
        print(f"optcc compare: {cluster.describe()}, k = {k}: solving the fluid LPs, then building, timing "
              f"{'and proving ' if not args.no_prove else ''}each schedule", file=sys.stderr, flush=True)
    out = compare(cluster, k, ilp=args.ilp, solver=args.solver, ilp_pieces=args.ilp_pieces,
                  ilp_time_limit_s=args.ilp_time_limit, prove=not args.no_prove,
                  progress=progress if loud else None)

    out["n_bytes"] = args.n
    out["segments"] = k
    if args.json:
        print_json(out)
        return 0
    t0, lb = out["t0"], out["lower_bound"]
    print(f"# AllReduce on {out['cluster']}, k = {k}, n = {args.n} bytes; times in units of n/B")

    def row(name, value, proved="-", source=""):
        if value is None:
            return [name, None, None, None, None, proved, source]
        return [name, value, units_to_seconds(cluster, value, args.n), value / t0 if t0 else None,
                value / lb if lb else None, proved, source]

    rows = [row("lower bound", lb, source="closed form (bounds)"),
            row("T0 (fault-free optimum)", t0, source="closed form"),
            row("fluid LP, shared", out["lp_optimum"], source=f"LP {out['lp']['shared']['solver']}"),
            row("fluid LP, exclusive", out["lp_optimum_exclusive"], source=f"LP {out['lp']['exclusive']['solver']}")]
    if args.ilp:
        rows.append(row("ILP optimum (trees)", out["ilp_optimum"], source="CP-SAT"))
    for name, a in out["algorithms"].items():
        proved = {True: "yes", False: "NO", None: "-"}[a["proved"]]
        rows.append(row(name, a["time"], proved, a["source"]))
    print_table(["", "n/B", "seconds", "/T0", "/bound", "proved", "source"], rows)
    for note in out["notes"]:
        print("note:", note)
    return 0
