"""Exact event times at the paper's sizes (issue 24 item 1): wall time and peak memory of one
point each, every point in a fresh interpreter (its own peak RSS and CPU seconds). Target per point: ≤ 60 s,
≤ 4 GiB on a 2-core machine.

    python benchmarks/event_time_scale.py [--p 1024] [--json] [--only NAME]

A point is timed the way `optcc time --algo` times it (optcc_app.compose.timing_report.
time_algorithm: the registry's array form of the serving construction, families.arrays for
optcc_single, optcc.event_arrays for optcc_multi, optcc_servers and optcc_rails; capacity check
and exact event time on the integer grid) or, for the fault-free flat ring, by
optcc.event_timer.ring_event_time (no flows). A point that cannot be timed (no array form and
over the build limit, a grid beyond int64) is reported as `not available` with the reason.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys

POINTS = {   # name -> (p-independent description, code run in the child with p bound)
    "optcc-1-straggler-k25-simai": "one straggler ℓ = 2, k = 25, simai, 8 GiB",
    "optcc-2-stragglers-k25-simai": "two stragglers ℓ = 1.5, 2, k = 25, simai, 8 GiB",
    "optcc-g8-1-straggler-server-k25-simai": "g = 8, one straggler server ℓ = 2, k = 25, simai, 8 GiB",
    "optcc-g8-2-straggler-servers-k25-simai": "g = 8, straggler servers ℓ = 1.5, 2, k = 25, simai, 8 GiB",
    "flat-ring-g8-fault-free-simai": "NCCLNoFailure: the flat ring, g = 8, fault-free, simai, 8 GiB",
}

CHILD = r"""
import json, resource, sys, time
from fractions import Fraction
from optcc.cluster import Cluster
from optcc.errors import OptccError
name, p = sys.argv[1], int(sys.argv[2])
N = 8 << 30
t = time.perf_counter()
out = {"name": name, "p": p}
try:
    if name.startswith("flat-ring"):
        from optcc.event_timer import ring_event_time
        from optcc.latency import units
        c = Cluster.build(p, 8, latency_model="simai")
        out["event_time"] = float(ring_event_time(c, *units(c, N)))
        out["flows"] = 2 * (p - 1) * p * 8
    else:
        from optcc_app.compose.timing_report import time_algorithm
        g = 8 if "-g8-" in name else 1
        ells = {"optcc-1-straggler-k25-simai": [2], "optcc-2-stragglers-k25-simai": [Fraction(3, 2), 2],
                "optcc-g8-1-straggler-server-k25-simai": [2],
                "optcc-g8-2-straggler-servers-k25-simai": [Fraction(3, 2), 2]}[name]
        strag = {i * g + j: Fraction(e) for i, e in enumerate(ells) for j in range(g)}
        c = Cluster.build(p, g, strag, latency_model="simai")
        from optcc.algorithms.registry import choose
        rep, algo, flows, sched = time_algorithm("optcc", c, 25, N)
        out.update(event_time=float(rep.event_time), slot_time=float(rep.slot_time), flows=flows,
                   algorithm=choose(c).name, arrays=sched is None, capacity_ok=rep.violation is None)
except OptccError as e:
    out["not_available"] = str(e)
out["wall_s"] = time.perf_counter() - t
ru = resource.getrusage(resource.RUSAGE_SELF)
out["cpu_s"] = ru.ru_utime + ru.ru_stime
out["peak_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
print(json.dumps(out))
"""


def run_point(name: str, p: int, timeout: float) -> dict:
    try:
        res = subprocess.run([sys.executable, "-c", CHILD, name, str(p)], capture_output=True, text=True,
                             timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"name": name, "p": p, "not_available": f"over the {timeout:g} s timeout"}
    if res.returncode != 0:
        return {"name": name, "p": p, "not_available": res.stderr.strip().splitlines()[-1]}
    return json.loads(res.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--p", type=int, default=1024)
    ap.add_argument("--only", choices=sorted(POINTS), action="append")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    rows = []
    for name in a.only or POINTS:
        print(f"event_time_scale: {name} at p = {a.p} ...", file=sys.stderr, flush=True)
        rows.append(run_point(name, a.p, a.timeout))
    if a.json:
        print(json.dumps({"p": a.p, "rows": rows}, indent=2))
        return
    print(f"# exact event times at p = {a.p} (target ≤ 60 s, ≤ 4 GiB per point)")
    print(f"{'point':42} {'flows':>10} {'event n/B':>10} {'wall s':>7} {'CPU s':>7} {'peak GiB':>8}")
    for r in rows:
        if "not_available" in r:
            print(f"{r['name']:42} not available: {r['not_available']}")
        else:
            print(f"{r['name']:42} {r['flows']:>10} {r['event_time']:>10.4f} {r['wall_s']:>7.1f} {r['cpu_s']:>7.1f} "
                  f"{r['peak_gib']:>8.2f}")


if __name__ == "__main__":
    main()
