"""`optcc time FILE` or `optcc time --algo NAME --p …`: slot and event time of a schedule (read
from FILE, or built in memory from the registry without writing its JSON), against T0 and the
lower bound; the same JSON keys either way."""
from __future__ import annotations

from fractions import Fraction

from optcc.errors import OptccError
from optcc_app.commands._common import (add_cluster_args, add_latency_args, add_segments_arg, add_size_and_json_args,
                                        apply_latency_args, message_size, print_json, print_table, segments_given)
from optcc.latency import describe_json
from optcc_app.compose.timing_report import time_schedule
from optcc.timing import NVLINK_SHARING, units_to_seconds


def register(sub) -> None:
    parser = sub.add_parser("time", help="time a schedule (slot and event models) against T0 and the bound")
    parser.add_argument("file", metavar="FILE", nargs="?",
                        help="a schedule JSON (optcc schedule -o FILE: a flow list or a generated schedule); "
                             "or give --algo and the cluster instead")
    parser.add_argument("--algo", metavar="NAME",
                        help="build this algorithm of the registry in memory (as optcc schedule --algo) and time it")
    add_size_and_json_args(parser)
    add_cluster_args(parser, latency=False)   # with --algo: the cluster to build for
    add_segments_arg(parser, "at --n, with --algo (a FILE has its own k)")
    add_latency_args(parser)   # override the schedule's cluster's latency model
    parser.add_argument("--nvlink", choices=NVLINK_SHARING, default="stated",
                        help="NVLink streams below rate 1 (the rails'): at their stated rate (default), or shared "
                             "max-min among a server's streams at once (exact simulation of the built flows; "
                             "about 0.5 ms of CPU a flow; docs/latency.md)")
    parser.set_defaults(handler=run)


_CLUSTER_FLAGS = (("p", "--p"), ("cluster", "--cluster"), ("straggler", "--straggler"),
                  ("failed_nics", "--failed-nics"), ("no_pxn", "--no-pxn"))


def _timed_flows(schedule, args):
    """A flow list: its own flows on its cluster, the latency flags applied."""
    schedule.cluster = apply_latency_args(schedule.cluster, args)
    return (time_schedule(schedule, args.n, args.nvlink), schedule.cluster, schedule.meta.get("algorithm", "schedule"),
            len(schedule.flows), schedule, None)


def _timed_generated(gen, args):
    """A generated schedule: its parameters, timed as `time --algo` would."""
    from optcc_app.compose.timing_report import time_algorithm
    cluster = apply_latency_args(gen.cluster, args)
    rep, name, n_flows, built = time_algorithm(gen.algo, cluster, gen.segments, args.n, args.nvlink)
    return rep, cluster, name, n_flows, built, None


_TIMED_BY_FORM = {"flows": _timed_flows, "generated": _timed_generated}    # optcc.schedule.ScheduleForm.form


def _timed(args):
    """(report, cluster, algorithm name, flow count) of FILE, or of --algo built for the cluster
    flags (exactly one of the two)."""
    if args.file is not None and args.algo is not None:
        raise OptccError("--algo", "give a schedule FILE or --algo NAME, not both")
    if args.file is not None:
        given = [flag for attr, flag in _CLUSTER_FLAGS if getattr(args, attr)]
        given += ["--g"] * (args.g != 1) + ["--segments"] * segments_given(args)
        if given:
            raise OptccError(given[0], "the cluster and --segments flags build a schedule with --algo; "
                                       "FILE carries its own cluster")
        from optcc.generated import load_any
        schedule = load_any(args.file, "FILE")
        return _TIMED_BY_FORM[schedule.form](schedule, args)
    if args.algo is None:
        raise OptccError("FILE", "give a schedule FILE (optcc schedule -o FILE) or --algo NAME with --p")
    from optcc_app.commands._common import cluster_from_args, segments_from_args
    from optcc_app.commands.schedule import check_algo
    from optcc_app.compose.timing_report import array_record, time_algorithm
    check_algo(args.algo)
    cluster = cluster_from_args(args)
    # timed as arrays (not capped by the build limit), unless the NVLink model needs the flows
    arrays = args.nvlink == "stated" and array_record(args.algo, cluster) is not None
    k = segments_from_args(args, args.algo, cluster, args.n, build=not arrays)
    model = None
    if arrays and args.segments == "auto":
        from optcc.algorithms import MAX_ARRAY_WORK
        cap = max(1, MAX_ARRAY_WORK // cluster.p**2)
        if k > cap:
            import sys
            print(f"optcc: note: auto k = {k} is over the array limit p²·k ≤ {MAX_ARRAY_WORK}: event-timing k = {cap}; "
                  f"the model time at k = {k} is reported beside it, labelled", file=sys.stderr)
            model = _model_at(args.algo, cluster, k, args.n)
            if model is not None:
                model["timed_segments"] = cap
            k = cap
    rep, name, n_flows, schedule = time_algorithm(args.algo, cluster, k, args.n, args.nvlink)
    return rep, cluster, name, n_flows, schedule, model


def _model_at(algo, cluster, k: int, n_bytes: int) -> dict | None:
    """The closed-form model time (optcc.model_time) at the auto k the event timer cannot reach."""
    from optcc.model_time import model_time
    try:
        m = model_time(algo, cluster, k, n_bytes)
    except OptccError:
        return None
    return {"segments": k, "time": float(m.time), "slot_time": float(m.slot), "valid": m.valid,
            "source": "model: closed-form slot time plus the latency counts (optcc.model_time), not event-timed"}


def run(args) -> int:
    message_size(args)
    rep, c, name, n_flows, schedule, model = _timed(args)
    out = {
        "slot_time": float(rep.slot_time),
        "event_time": float(rep.event_time),
        "t0": float(rep.t0),
        "lower_bound": None if rep.lower_bound is None else float(rep.lower_bound),
        "ratio_to_t0": rep.ratio_to_t0(),
        "ratio_to_lower_bound": rep.ratio_to_lower_bound(),
        "seconds": {"slot": units_to_seconds(c, rep.slot_time, args.n),
                    "event": units_to_seconds(c, rep.event_time, args.n)},
        "n_bytes": args.n,
        "latency_model": describe_json(c),
        "capacity_model": rep.capacity,
        "capacity_ok": rep.violation is None,
        "capacity_violation": None if rep.violation is None or schedule is None else rep.violation.describe(schedule),
    }
    if model is not None:                                 # only where the array limit capped auto k
        out.update(segments=model.pop("timed_segments"), model_at_auto_k=model)
    if args.nvlink != "stated":
        out["nvlink"] = args.nvlink
    if args.json:
        print_json(out)
    else:
        print(f"# {name} on {c.describe()}, {n_flows} flows, n = {args.n} bytes, times in units of n/B")
        rows = [
            ["slot time", out["slot_time"], out["seconds"]["slot"]],
            [f"event time ({out['latency_model']['name']} latency"
             + (f", NVLink {args.nvlink}" if args.nvlink != "stated" else "") + ")", out["event_time"],
             out["seconds"]["event"]],
            ["T0 (fault-free)", out["t0"], units_to_seconds(c, rep.t0, args.n)],
            ["lower bound", out["lower_bound"],
             None if rep.lower_bound is None else units_to_seconds(c, rep.lower_bound, args.n)],
        ]
        model = out.get("model_at_auto_k")
        if model is not None:
            rows.append([f"model time at auto k = {model['segments']} (closed form, not event-timed"
                         + ("" if model["valid"] else "; beyond the model's knee") + ")", model["time"],
                         units_to_seconds(c, Fraction(model["time"]), args.n)])
        print_table(["", "n/B", "seconds"], rows)
        lb = out["ratio_to_lower_bound"]
        r0 = out["ratio_to_t0"]
        print(("slot / T0 = -" if r0 is None else f"slot / T0 = {r0:.4f}") + ("" if lb is None else f", slot / lower bound = {lb:.4f}"))
        print(f"capacity ({rep.capacity}): " + ("ok" if rep.violation is None else "VIOLATED: " + out["capacity_violation"]))
    return 0 if rep.violation is None else 1
