"""`optcc time FILE`: slot and event time of a schedule, against T0 and the lower bound."""
from __future__ import annotations

from optcc_app.commands._common import (add_latency_args, add_size_and_json_args, apply_latency_args, message_size,
                                    print_json, print_table)
from optcc.latency import describe_json
from optcc.schedule import Schedule
from optcc_app.compose.timing_report import time_schedule
from optcc.timing import units_to_seconds


def register(sub) -> None:
    parser = sub.add_parser("time", help="time a schedule (slot and event models) against T0 and the bound")
    parser.add_argument("file", metavar="FILE")
    add_size_and_json_args(parser)
    add_latency_args(parser)   # override the schedule's cluster's latency model
    parser.set_defaults(handler=run)


def run(args) -> int:
    message_size(args)
    schedule = Schedule.load(args.file)
    schedule.cluster = apply_latency_args(schedule.cluster, args)
    rep = time_schedule(schedule, args.n)
    c = schedule.cluster
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
        "capacity_violation": None if rep.violation is None else rep.violation.describe(schedule),
    }
    if args.json:
        print_json(out)
    else:
        print(f"# {schedule.meta.get('algorithm', 'schedule')} on {c.describe()}, "
              f"{len(schedule.flows)} flows, n = {args.n} bytes, times in units of n/B")
        rows = [
            ["slot time", out["slot_time"], out["seconds"]["slot"]],
            [f"event time ({out['latency_model']['name']} latency)", out["event_time"], out["seconds"]["event"]],
            ["T0 (fault-free)", out["t0"], units_to_seconds(c, rep.t0, args.n)],
            ["lower bound", out["lower_bound"],
             None if rep.lower_bound is None else units_to_seconds(c, rep.lower_bound, args.n)],
        ]
        print_table(["", "n/B", "seconds"], rows)
        lb = out["ratio_to_lower_bound"]
        r0 = out["ratio_to_t0"]
        print(("slot / T0 = -" if r0 is None else f"slot / T0 = {r0:.4f}") + ("" if lb is None else f", slot / lower bound = {lb:.4f}"))
        print(f"capacity ({rep.capacity}): " + ("ok" if rep.violation is None else "VIOLATED: " + out["capacity_violation"]))
    return 0 if rep.violation is None else 1
