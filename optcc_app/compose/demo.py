"""What `optcc demo` computes: the ring and OptCC schedules on a degraded cluster, checked
(simulation, a Z3 proof), timed, beside T0, the lower bound and the fluid-LP optima, and a
same-shape OptCC schedule run on local gloo processes when torch is installed."""
from __future__ import annotations

from fractions import Fraction

from bounds.closed_form import describe_case, fault_free_optimum, lower_bound
from optcc_app.compose.rows import row
from optcc_app.compose.timing_report import time_schedule
from lp_models.fluid import lp_optimum
from optcc.algorithms import build_schedule
from optcc.cluster import Cluster
from optcc.simulate import simulate
from optcc.timing import units_to_seconds
from verifier import prove_allreduce


def run_demo(cluster: Cluster, segments: int, n_bytes: int, real_run: bool = True, progress=None) -> dict:
    """Build, check, prove and time the ring and OptCC schedules; solve the LPs; run one for real."""
    say = progress or (lambda msg: None)
    t0 = fault_free_optimum(cluster.p, cluster.g)
    lb = lower_bound(cluster)
    rows: dict = {}
    notes: list = []
    ok = True

    def add_row(name, time_units, **extra):
        rows[name] = row(time_units, t0, lb, seconds=units_to_seconds(cluster, time_units, n_bytes), **extra)

    add_row("lower bound", lb, note=describe_case(cluster).split(":")[0])
    healthy = Cluster.build(cluster.p, cluster.g, {}, cluster.bandwidth, cluster.nvlink_bandwidth).with_latency(
        cluster.overhead, cluster.issue_delay, cluster.latency, cluster.latency_model)
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
        rows["real run"] = row(None, None, None, seconds=None, correct=False, proved=True, note="FAILED")
        notes.append("real run FAILED: " + res.describe_failure())
        return
    r = res.result
    rows["real run"] = row(None, None, None, seconds=r["seconds"], correct=r["correct"], proved=True,
                           note=f"OptCC k=4 on {small.describe()}, {r['world_size']} {r['backend']} processes, "
                                f"1 MiB float32, " + ("matches" if r["correct"] else "DIFFERS FROM") + " dist.all_reduce")
    notes.append("real run: a smaller cluster of the same shape on this machine's CPU cores (its time is "
                 "process overhead, not the model's network)")
