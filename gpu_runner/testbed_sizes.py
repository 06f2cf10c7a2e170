"""`optcc testbed --sizes`: torch all_reduce and OptCC over a sweep of message sizes on the testbed.

One launch per measured column sweeps every size (the worker's bench mode), on the same shaped
network (with the forwarder's delay when `delay_ms` is set): torch all_reduce on the healthy
network and with the straggler, OptCC with the step runner and with the streaming runner. Per
size the rows also carry the schedule's bandwidth-only time (slot model, α = 0) and the latency
model's prediction (event model with the measured delay as wire latency).
"""
from __future__ import annotations

import os
import tempfile
from fractions import Fraction

from optcc.errors import OptccError

COLUMNS = ("size", "torch_fault_free_s", "torch_straggler_s", "optcc_step_s", "optcc_streaming_s",
           "predicted_s", "segments")


def predicted_seconds(cluster, schedule, size: int, delay_s: float | None, overhead_s: float | None):
    """The latency model's time for `schedule` at `size` bytes: the event model of the latency
    issue (optcc.timing.event_time) with wire latency L = the testbed's measured one-way delay,
    overhead o = `overhead_s` (0 when not measured) and issue delay Li = 0. None without a
    measured delay."""
    from optcc import timing
    if delay_s is None:
        return None

    def units(seconds: float) -> Fraction:      # seconds -> units of n/B (derived: t·B/n)
        return Fraction(str(seconds)) * cluster.bandwidth / size
    model = timing.event_time(schedule, alpha_units=units(overhead_s or 0.0), latency_units=units(delay_s))
    return timing.units_to_seconds(cluster, model, size)


def crossover_size(rows: list[dict], optcc_key: str) -> int | None:
    """Smallest measured size from which OptCC beats torch's ring with the straggler at that size
    and every larger one (below it the ring wins); None if OptCC never wins at the largest size."""
    best = None
    for row in sorted(rows, key=lambda r: -r["size"]):
        if row[optcc_key] is None or row[optcc_key] >= row["torch_straggler_s"]:
            break
        best = row["size"]
    return best


ORDERED_RTTS = 8          # derived from measurement (docs/gpu_runner.md): receives in port order pay off from here
PROBE_BYTES = 1 << 20      # policy: the probe's stream size when it measures the per-message overhead
PROBE_REPEATS = 2


def overhead_from_probe(fixed_cost_s: float, rtt_s: float) -> float:
    """The per-message overhead o the model gets (derived, docs/gpu_runner.md): the probe's fixed
    per-flow cost (both ends post at once, so it holds gloo's rendezvous round trip) less that
    round trip; what remains is the stack's own time per message, plus the probe's barrier skew
    (so an upper estimate). Never below 0."""
    return max(0.0, fixed_cost_s - rtt_s)


def message_seconds(cluster, schedule, size: int) -> float:
    """The median NIC flow's wire time (slot model) in seconds at `size` bytes."""
    from optcc.timing import IntegerTimes, units_to_seconds
    grid = IntegerTimes(schedule)
    durs = sorted(grid.durs[i] for i, f in enumerate(schedule.flows) if f.link == "nic")
    return units_to_seconds(cluster, grid.to_fraction(durs[len(durs) // 2]), size)


def streaming_runner_for(message_s: float, rtt_s: float | None) -> str:
    """'streaming-ordered' (receives in the schedule's order per port: one rendezvous round trip per
    change of sender, no bandwidth shared between two senders) once a message lasts ORDERED_RTTS
    round trips; 'streaming' (receives posted early) below that or without a measured RTT."""
    return "streaming-ordered" if rtt_s is not None and message_s >= ORDERED_RTTS * rtt_s else "streaming"


def segments_for(cluster, sizes: list[int], segments) -> dict[int, int]:
    """size -> k: the integer given, or `--segments auto`'s choice (optcc.segments) on `cluster`,
    whose latency fields hold the testbed's measured delay and overhead."""
    from optcc.segments import resolve_segments
    return {size: resolve_segments(segments, "optcc", cluster, size) for size in sizes}


def run_sizes(p: int, straggler: int, ell: Fraction, rate_mbit: float, sizes: list[int], segments,
              iters: int = 1, warmup: int = 1, timeout_s: float = 120.0, delay_ms: float | None = None,
              dtype: str = "int32", plot: str | None = None, log=None) -> dict:
    """`segments`: an integer k or "auto" (per size, from the measured delay and overhead)."""
    from bounds.closed_form import lower_bound
    from gpu_runner.launch import prepare_schedule, worker_certificate
    from gpu_runner.netcheck import measure_link
    from gpu_runner.probe import worker_args as probe_args
    from gpu_runner.testbed import Testbed, measure, require_root
    from optcc.algorithms import build_schedule
    from optcc.cluster import Cluster
    from optcc.segments import parse_segments
    from optcc.timing import slot_time, units_to_seconds

    require_root()
    if not 0 <= straggler < p:
        raise OptccError("straggler", f"rank {straggler} is out of range 0..{p - 1}")
    if not sizes or any(s <= 0 for s in sizes):
        raise OptccError("sizes", "expected positive sizes in bytes")
    segments = parse_segments(segments)
    log = log or (lambda msg: None)
    bandwidth = Fraction(str(rate_mbit)) * 10**6 / 8
    cluster = Cluster.build(p, stragglers={straggler: ell}, bandwidth=bandwidth)
    healthy = [rate_mbit] * p
    slow = list(healthy)
    slow[straggler] = rate_mbit / float(ell)
    common = ["--dtype", dtype, "--iters", str(iters), "--warmup", str(warmup), "--backend", "gloo", "--mode", "bench"]
    measured: dict[str, dict[int, dict]] = {}
    link = overhead = fixed_cost = None
    with tempfile.TemporaryDirectory(prefix="optcc-testbed-") as tmp, Testbed(p, delay_ms=delay_ms) as tb:
        if delay_ms is not None:
            tb.shape(healthy)
            link = measure_link(tb, 1 % p, 2 % p, seconds=1.0, count=10)
            log(f"link check: RTT {link['rtt_median_s'] * 1e3:.2f} ms, "
                f"{link['throughput_bytes_per_s'] * 8e-6:.1f} Mbit/s")
            fixed_cost = measure(tb, ["probe", *probe_args(PROBE_BYTES, PROBE_REPEATS, None, 1.1)],
                                 timeout_s)["fixed_cost_s"]
            overhead = overhead_from_probe(fixed_cost, min(link["rtt_s"]))
            log(f"per-message cost: {fixed_cost * 1e3:.2f} ms fixed per flow (probe), "
                f"overhead o = {overhead * 1e3:.2f} ms beyond the round trip")
        elif segments == "auto":
            raise OptccError("segments", "'auto' needs a measured delay: run with --delay-ms")
        delay_s = min(link["rtt_s"]) / 2 if link else None      # the emulated delay: the best ping
        model = cluster if link is None else Cluster.build(
            p, stragglers={straggler: ell}, bandwidth=bandwidth, latency=Fraction(str(round(delay_s, 9))),
            overhead=Fraction(str(round(overhead, 9))))
        ks = segments_for(model, sizes, segments)
        if segments == "auto":
            log("segments auto: " + ", ".join(f"{size}: k = {k}" for size, k in ks.items()))
        schedules = {}
        for k in sorted(set(ks.values())):
            folder = os.path.join(tmp, f"k{k}")           # worker_certificate writes one file per folder
            os.mkdir(folder)
            path = os.path.join(folder, "optcc.json")
            build_schedule("optcc", cluster, k).save(path)
            schedule, _ = prepare_schedule(path, p)
            schedules[k] = (schedule, ["--schedule", path, "--certificate", worker_certificate(schedule, folder)])
        rtt = min(link["rtt_s"]) if link else None
        runner = {size: streaming_runner_for(message_seconds(cluster, schedules[ks[size]][0], size), rtt)
                  for size in sizes}
        plan = [("torch_fault_free_s", healthy, {None: ["--algo", "torch"]}),
                ("torch_straggler_s", slow, {None: ["--algo", "torch"]}),
                ("optcc_step_s", slow, {(k, "step"): args + ["--runner", "step"] for k, (_, args) in schedules.items()}),
                ("optcc_streaming_s", slow, {(ks[size], runner[size]): schedules[ks[size]][1] + ["--runner", runner[size]]
                                             for size in sizes})]
        for key, rates, by_k in plan:
            tb.shape(rates)
            measured[key] = {}
            for k, args in by_k.items():
                group = [s for s in sizes if k is None or (ks[s] == k[0] and k[1] in ("step", runner[s]))]
                if not group:
                    continue
                log(f"measuring {key}" + ("" if k is None else f" (k = {k[0]}, {k[1]})") + f" over {len(group)} sizes ...")
                rows = measure(tb, args + common + ["--sizes", ",".join(map(str, group))], timeout_s)["rows"]
                measured[key].update({r["size"]: r for r in rows})
                log("  " + ", ".join(f"{r['size']}: {r['seconds']:.3f} s" for r in rows))
    rows = []
    for size in sizes:
        schedule = schedules[ks[size]][0]
        row = {"size": size}
        for key in ("torch_fault_free_s", "torch_straggler_s", "optcc_step_s", "optcc_streaming_s"):
            row[key] = measured[key][size]["seconds"]
        row["predicted_s"] = predicted_seconds(cluster, schedule, size, delay_s, overhead)
        row["segments"] = ks[size]
        row["streaming_runner"] = runner[size]
        row["schedule_s"] = units_to_seconds(cluster, slot_time(schedule), size)
        row["lower_bound_s"] = units_to_seconds(cluster, lower_bound(cluster), size)
        row["correct"] = all(m[size]["correct"] for m in measured.values())
        rows.append(row)
    optcc_key = "optcc_streaming_s"
    notes = []
    if all(r["predicted_s"] is None for r in rows):
        notes.append("predicted_s is null: no measured delay (run with --delay-ms)")
    else:
        notes.append("predicted_s: event model with L = measured one-way delay (best ping / 2), o = measured "
                     "per-message overhead (probe's fixed cost − best RTT), Li = 0")
    result = {"p": p, "straggler": straggler, "ell": float(ell), "rate_mbit": rate_mbit,
              "straggler_rate_mbit": slow[straggler], "delay_ms": delay_ms, "dtype": dtype, "iters": iters,
              "warmup": warmup, "segments": segments, "measured_rtt_s": None if link is None else link["rtt_median_s"],
              "measured_rtt_min_s": None if link is None else min(link["rtt_s"]),
              "measured_rate_mbit": None if link is None else link["throughput_bytes_per_s"] * 8e-6,
              "measured_fixed_cost_s": fixed_cost, "measured_overhead_s": overhead,
              "rows": rows, "optcc_column": optcc_key,
              "ring_wins_below": crossover_size(rows, optcc_key), "notes": notes}
    if plot:
        write_sizes_chart(result, plot)
        result["plot"] = plot
    return result


def write_sizes_chart(result: dict, path: str) -> None:
    """Left: time against message size (log-log), one line per measured column; right: each
    OptCC column's speed-up over torch's all_reduce with the straggler (matplotlib, Agg)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = result["rows"]
    mib = [r["size"] / 2**20 for r in rows]
    fig, (ax, sx) = plt.subplots(1, 2, figsize=(12, 4.5))
    styles = {"torch_fault_free_s": ("torch all_reduce, fault-free", "#7f7f7f", "o"),
              "torch_straggler_s": ("torch all_reduce, straggler", "#d62728", "s"),
              "optcc_step_s": ("OptCC, step runner", "#1f77b4", "^"),
              "optcc_streaming_s": ("OptCC, streaming runner", "#2ca02c", "D"),
              "predicted_s": ("model prediction", "#2ca02c", None),
              "lower_bound_s": ("lower bound (Theorem 1, α = 0)", "k", None)}
    for key, (label, color, marker) in styles.items():
        ys = [r[key] for r in rows]
        if any(y is None for y in ys):
            continue
        ax.plot(mib, ys, label=label, color=color, marker=marker,
                linestyle="-" if marker else "--", linewidth=1.5 if marker else 1)
        if key != "torch_straggler_s":
            sx.plot(mib, [r["torch_straggler_s"] / y for r, y in zip(rows, ys)], label=label, color=color,
                    marker=marker, linestyle="-" if marker else "--", linewidth=1.5 if marker else 1)
    sx.axhline(1.0, color="#d62728", linewidth=1)
    for a in (ax, sx):
        a.set_xscale("log", base=2)
        a.set_xlabel("message size per rank (MiB)")
        a.grid(True, which="both", alpha=0.3)
    ax.set_yscale("log")
    ax.set_ylabel("AllReduce time (s)")
    sx.set_ylabel("speed-up over torch all_reduce with the straggler")
    delay = "" if result["delay_ms"] is None else f", {result['delay_ms']:g} ms delay"
    ax.set_title(f"p = {result['p']}, rank {result['straggler']} at ℓ = {result['ell']:g}, "
                 f"{result['rate_mbit']:g} Mbit/s{delay}")
    sx.set_title("time of torch with the straggler / time")
    ax.legend(fontsize=8)
    sx.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
