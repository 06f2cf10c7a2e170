"""`optcc bound`: the AllReduce lower bound for a cluster, its binding term, and its derivation."""
from __future__ import annotations

from optcc_app.commands._common import add_cluster_args, add_size_and_json_args, cluster_from_args, message_size, print_json, print_table


def register(sub) -> None:
    parser = sub.add_parser(
        "bound", help="lower bound on AllReduce time (Theorems 1/3, derived multi-straggler)",
        description="Lower bound on AllReduce time in units of n/B and seconds. For g > 1 each "
                    "--straggler names a GPU rank; all g GPUs of one server at one ℓ is the "
                    "paper's Theorem 3, any other set uses the derived server-aggregate bound.")
    add_cluster_args(parser)
    add_size_and_json_args(parser)
    parser.add_argument("--derive", action="store_true", help="print the derivation steps (appendix style)")
    parser.set_defaults(handler=run)


def run(args) -> int:
    message_size(args)
    from bounds.report import derivation
    from optcc_app.compose.bound_report import bound_report

    cluster = cluster_from_args(args)
    out = bound_report(cluster, args.n)
    steps = derivation(cluster) if args.derive else None
    if steps is not None:
        from lp_models.duals import derivation_steps
        steps += derivation_steps(cluster)
    if args.json:
        if steps is not None:
            out["derivation"] = [{k: v for k, v in s.items() if k != "pretty"} for s in steps]
        print_json(out)
        return 0
    if steps is not None:
        for k, s in enumerate(steps, 1):
            print(f"({k}) {s['step']}. {s['text']}")
            if "pretty" in s:
                print("\n" + "\n".join("    " + line for line in s["pretty"].splitlines()) + "\n")
                print(f"    LaTeX: {s['latex']}\n")
        print()
    print(f"# {out['case']}; {cluster.describe()}, n = {args.n} bytes, times in units of n/B")
    print_table(["", "n/B", "seconds"], [
        ["lower bound", out["lower_bound"], out["seconds"]],
        ["  cut term", out["cut"], None],
        ["  volume term", out["volume"], None],
        ["T0 (fault-free)", out["t0"], out["t0_seconds"]],
    ])
    ratio = "-" if out["ratio_to_t0"] is None else f"{out['ratio_to_t0']:.4f}"
    print(f"bound / T0 = {ratio}; binding term: {out['binding']}")
    print(f"formula: T >= {out['formula']} · n/B")
    if out["pooling_limited_by_nvlink"]:
        print(f"limited by NVLink: the in-server reduce-scatter/all-gather that pools each server's NICs "
              f"needs {out['pooling_nvlink']:.4f} n/B on the busiest GPU's NVLink, above the NIC bound "
              "(derived, docs/failures.md)")
    return 0
