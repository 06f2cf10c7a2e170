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


def run_sizes(p: int, straggler: int, ell: Fraction, rate_mbit: float, sizes: list[int], segments: int,
              iters: int = 1, warmup: int = 1, timeout_s: float = 120.0, delay_ms: float | None = None,
              dtype: str = "int32", plot: str | None = None, log=None) -> dict:
    from bounds.closed_form import lower_bound
    from gpu_runner.launch import prepare_schedule, worker_certificate
    from gpu_runner.netcheck import measure_link
    from gpu_runner.testbed import Testbed, measure, require_root
    from optcc.algorithms import build_schedule
    from optcc.cluster import Cluster
    from optcc.timing import slot_time, units_to_seconds

    require_root()
    if not 0 <= straggler < p:
        raise OptccError("straggler", f"rank {straggler} is out of range 0..{p - 1}")
    if not sizes or any(s <= 0 for s in sizes):
        raise OptccError("sizes", "expected positive sizes in bytes")
    log = log or (lambda msg: None)
    bandwidth = Fraction(str(rate_mbit)) * 10**6 / 8
    cluster = Cluster.build(p, stragglers={straggler: ell}, bandwidth=bandwidth)
    healthy = [rate_mbit] * p
    slow = list(healthy)
    slow[straggler] = rate_mbit / float(ell)
    common = ["--mode", "bench", "--sizes", ",".join(map(str, sizes)), "--dtype", dtype,
              "--iters", str(iters), "--warmup", str(warmup), "--backend", "gloo"]
    measured: dict[str, list[dict] | None] = {}
    link = None
    with tempfile.TemporaryDirectory(prefix="optcc-testbed-") as tmp:
        path = os.path.join(tmp, "optcc.json")
        build_schedule("optcc", cluster, segments).save(path)
        schedule, _ = prepare_schedule(path, p)
        sched = ["--schedule", path, "--certificate", worker_certificate(schedule, tmp)]   # workers re-check it
        plan = [("torch_fault_free_s", healthy, ["--algo", "torch"]),
                ("torch_straggler_s", slow, ["--algo", "torch"])]
        for kind in ("step", "streaming"):
            plan.append((f"optcc_{kind}_s", slow, sched + ["--runner", kind]))
        with Testbed(p, delay_ms=delay_ms) as tb:
            if delay_ms is not None:
                tb.shape(healthy)
                link = measure_link(tb, 1 % p, 2 % p, seconds=1.0, count=10)
                log(f"link check: RTT {link['rtt_median_s'] * 1e3:.2f} ms, "
                    f"{link['throughput_bytes_per_s'] * 8e-6:.1f} Mbit/s")
            for key, rates, args in plan:
                tb.shape(rates)
                log(f"measuring {key} over {len(sizes)} sizes ...")
                measured[key] = measure(tb, args + common, timeout_s)["rows"]
                log("  " + ", ".join(f"{r['size']}: {r['seconds']:.3f} s" for r in measured[key]))
    delay_s = min(link["rtt_s"]) / 2 if link else None      # the emulated delay: the best ping
    rows = []
    for i, base in enumerate(measured["torch_fault_free_s"]):
        size = base["size"]
        row = {"size": size}
        for key in ("torch_fault_free_s", "torch_straggler_s", "optcc_step_s", "optcc_streaming_s"):
            row[key] = measured[key][i]["seconds"]
        row["predicted_s"] = predicted_seconds(cluster, schedule, size, delay_s, None)
        row["segments"] = segments
        row["schedule_s"] = units_to_seconds(cluster, slot_time(schedule), size)
        row["lower_bound_s"] = units_to_seconds(cluster, lower_bound(cluster), size)
        row["correct"] = all(m[i]["correct"] for m in measured.values())
        rows.append(row)
    optcc_key = "optcc_streaming_s"
    notes = []
    if all(r["predicted_s"] is None for r in rows):
        notes.append("predicted_s is null: no measured delay (run with --delay-ms)")
    else:
        notes.append("predicted_s: event model with L = measured one-way delay, o = 0, Li = 0")
    result = {"p": p, "straggler": straggler, "ell": float(ell), "rate_mbit": rate_mbit,
              "straggler_rate_mbit": slow[straggler], "delay_ms": delay_ms, "dtype": dtype, "iters": iters,
              "warmup": warmup, "measured_rtt_s": None if link is None else link["rtt_median_s"],
              "measured_rtt_min_s": None if link is None else min(link["rtt_s"]),
              "measured_rate_mbit": None if link is None else link["throughput_bytes_per_s"] * 8e-6,
              "rows": rows, "optcc_column": optcc_key,
              "ring_wins_below": crossover_size(rows, optcc_key), "notes": notes}
    if plot:
        write_sizes_chart(result, plot)
        result["plot"] = plot
    return result


def write_sizes_chart(result: dict, path: str) -> None:
    """Time against message size (log-log), one line per measured column (matplotlib, Agg)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = result["rows"]
    mib = [r["size"] / 2**20 for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4.5))
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
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("message size per rank (MiB)")
    ax.set_ylabel("AllReduce time (s)")
    delay = "" if result["delay_ms"] is None else f", {result['delay_ms']:g} ms delay"
    ax.set_title(f"p = {result['p']}, rank {result['straggler']} at ℓ = {result['ell']:g}, "
                 f"{result['rate_mbit']:g} Mbit/s{delay}")
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
