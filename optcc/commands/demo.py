"""`optcc demo`: the main job on a default degraded cluster (p = 16, GPU 0 at ℓ = 2).

Builds the ring and OptCC schedules, checks them (simulation and a Z3 proof), times them, prints
them beside T0, the lower bound and the fluid-LP optima, and runs a same-shape OptCC schedule on
local gloo processes when torch is installed. The CLI is the one layer allowed to compose packages.
"""
from __future__ import annotations

import sys
import time
from fractions import Fraction

from bounds.closed_form import describe_case, fault_free_optimum, lower_bound
from lp_models.comparison import lp_optimum
from optcc.algorithms import build_schedule
from optcc.cluster import Cluster
from optcc.commands._common import add_cluster_args, add_size_and_json_args, cluster_from_args, message_size, print_json, print_table
from optcc.simulate import simulate
from optcc.timing import time_schedule, units_to_seconds
from verifier import prove_allreduce


def register(sub) -> None:
    parser = sub.add_parser("demo", help="the main job: ring vs OptCC vs the lower bound on a degraded cluster")
    add_cluster_args(parser, p_required=False)
    parser.set_defaults(straggler=None)            # --p defaults to 16 unless --cluster is given
    parser.add_argument("--segments", "-k", type=int, default=64, help="pipeline segments for OptCC (default 64)")
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
    started = time.perf_counter()
    result = run_demo(cluster, args.segments, args.n, real_run=not args.no_run,
                      progress=None if args.json else lambda msg: print(msg, file=sys.stderr))
    if args.json:
        print_json(result)
        return 0 if result["ok"] else 1
    print(f"# AllReduce of n = {args.n} bytes on {cluster.describe()}, B = {float(cluster.bandwidth):.3g} B/s, "
          f"OptCC with k = {args.segments} segments; times in units of n/B")
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


def run_demo(cluster: Cluster, segments: int, n_bytes: int, real_run: bool = True, progress=None) -> dict:
    """Compose the packages (the CLI is the one place allowed to): build, check, prove, time, run."""
    say = progress or (lambda msg: None)
    t0 = fault_free_optimum(cluster.p, cluster.g)
    lb = lower_bound(cluster)
    rows: dict = {}
    notes: list = []
    ok = True

    def add_row(name, time_units, **extra):
        rows[name] = {"time": float(time_units), "seconds": units_to_seconds(cluster, time_units, n_bytes),
                      "ratio_to_t0": float(time_units / t0) if t0 else None,
                      "ratio_to_lower_bound": float(time_units / lb) if lb else None, **extra}

    add_row("lower bound", lb, note=describe_case(cluster).split(":")[0])
    healthy = Cluster.build(cluster.p, cluster.g, {}, cluster.bandwidth, cluster.nvlink_bandwidth, cluster.alpha)
    for name, algo, c, k in [("ring, no straggler", "ring", healthy, 1), ("ring, straggler (PXN)", "ring", cluster, 1),
                             ("OptCC", "optcc", cluster, segments)]:
        say(f"building {name} ...")
        schedule = build_schedule(algo, c, k)
        say(f"simulating {name} ({len(schedule.flows)} flows) ...")
        correct = simulate(schedule).correct
        say(f"proving {name} with Z3 ...")
        proof = prove_allreduce(schedule)
        if not proof.proved:
            notes.append(f"{name}: NOT PROVED: {proof.counterexample['property']}: {proof.counterexample['message']}")
        rep = time_schedule(schedule, n_bytes)
        capacity_ok = rep.violation is None
        ok &= correct and capacity_ok and proof.proved
        add_row(name, rep.slot_time, correct=correct, proved=proof.proved,
                note=f"{len(schedule.flows)} flows, event time {float(rep.event_time):.4f}"
                     + ("" if capacity_ok else ", CAPACITY VIOLATED"))
    say("solving the fluid LPs ...")
    for capacity, label in [("shared", "LP optimum, shared ports"), ("exclusive", "LP optimum, one flow per port")]:
        value = lp_optimum(cluster, capacity)
        if value is None:
            notes.append(f"{label}: the LP did not reach optimality")
            continue
        add_row(label, Fraction(value).limit_denominator(10**9), note="fluid LP (lp_models), GLOP")
    if real_run:
        _real_run(cluster, rows, notes, say)
        ok &= rows.get("real run", {}).get("correct") is not False
    return {"cluster": cluster.to_json(), "segments": segments, "n_bytes": n_bytes, "t0": float(t0),
            "lower_bound": float(lb), "rows": rows, "notes": notes, "ok": bool(ok)}


def _real_run(cluster: Cluster, rows: dict, notes: list, say) -> None:
    """Run a small OptCC schedule of the same shape on local gloo processes (needs the runner extra)."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        notes.append("real run skipped: torch is not installed (pip install torch==2.13.0 && pip install -e '.[runner]')")
        return
    from gpu_runner.launch import run_schedule_file
    if cluster.g != 1:
        notes.append("real run skipped: the demo runs g = 1 clusters only (use optcc run)")
        return
    import os
    import tempfile

    ells = list(cluster.stragglers.values())
    p_run = min(max(4, len(ells) + 2), 8)
    small = Cluster.build(p_run, 1, {r: ell for r, ell in enumerate(ells[:p_run - 2])})
    schedule = build_schedule("optcc", small, 4)
    size = 1 << 20
    with tempfile.TemporaryDirectory(prefix="optcc-demo-") as tmp:
        path = os.path.join(tmp, "optcc.json")
        schedule.save(path)
        say(f"running OptCC on {p_run} local gloo ranks ({size} bytes float32) ...")
        res = run_schedule_file(path, p_run, size, "float32", 60.0, iters=3, warmup=1)   # proves, then runs
    if not res.ok:
        rows["real run"] = {"time": None, "seconds": None, "ratio_to_t0": None, "ratio_to_lower_bound": None,
                            "correct": False, "proved": True, "note": "FAILED"}
        notes.append("real run FAILED: " + res.describe_failure())
        return
    r = res.result
    rows["real run"] = {"time": None, "seconds": r["seconds"], "ratio_to_t0": None, "ratio_to_lower_bound": None,
                        "correct": r["correct"], "proved": True,
                        "note": f"OptCC k=4 on {small.describe()}, {r['world_size']} {r['backend']} processes, "
                                f"1 MiB float32, " + ("matches" if r["correct"] else "DIFFERS FROM") + " dist.all_reduce"}
    notes.append("real run: a smaller cluster of the same shape on this machine's CPU cores (its time is "
                 "process overhead, not the model's network)")
