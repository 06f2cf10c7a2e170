"""Multi-straggler OptCC under pipelined latency (issue 13, item 4): before and after.

Before = hop spread 1 (the issue-8 pattern, what optcc_multi builds when Li = L = 0); after = hop
spread 3 (the latency-robust pattern it builds when Li + L > 0; docs/optcc_multi.md "Latency").
For p ∈ {8, 16, 32}, (ℓ1, ℓ2) ∈ {(4/3, 8/7), (2, 4/3)}, k ∈ {16, 64}, n ∈ {1, 8} GiB under the
SimAI preset (o = 0, Li = 3 µs, L = 2 µs; optcc.latency): the event-model time of the generated
schedule (optcc.timing.event_time, exact), its overhead over the fault-free ring under the same
model (exact closed form, optcc.model_time), and its latency count on the critical path (the
event time's slope in Li + L between 0 and 1/(4kp) n/B). The closed form of the after column
(optcc.model_time.model_time) is printed beside it; it must be ≥ the event time.
Second table, n = 8 GiB: each variant at the k its closed form picks (before: spread 1's slot time
plus its old count 2(p−1) + (p−1)(k+1)/2 + 4k latencies below its knee 1/(2kp), the issue-13
formula; after: `--segments auto`, optcc.segments), both timed by the event model.
Run: python benchmarks/optcc_multi_latency.py [--json] [p ...]
"""
from __future__ import annotations

import json
import sys
import time
from fractions import Fraction as F

from optcc.algorithms.multi.build import optcc_multi_allreduce
from optcc.cluster import Cluster
from optcc.latency import units as latency_units
from optcc.model_time import model_time
from optcc.segments import auto_segments
from optcc.timing import IntegerTimes, event_time, slot_time

SETTINGS = (("4/3,8/7", (F(4, 3), F(8, 7))), ("2,4/3", (F(2), F(4, 3))))
KS = (16, 64)
SIZES = (2**30, 8 * 2**30)
MODEL = "simai"


def measure(sched, cluster_lat, grid, n_bytes) -> F:
    o, li, lat = latency_units(cluster_lat, n_bytes)
    return event_time(sched, o, grid, li, lat)


def rows_for(p: int, name: str, ells, k: int) -> list[dict]:
    plain = Cluster.build(p, stragglers=dict(enumerate(ells)))
    lat_cluster = Cluster.build(p, stragglers=dict(enumerate(ells)), latency_model=MODEL)
    ring = Cluster.build(p, latency_model=MODEL)
    out = {}
    for label, c in (("before", plain), ("after", lat_cluster)):
        t = time.perf_counter()
        s = optcc_multi_allreduce(c, k)
        g = IntegerTimes(s)
        e0 = event_time(s, F(0), g)
        lam = F(1, 4 * k * p)
        slope = (event_time(s, F(0), g, F(0), lam) - e0) / lam
        out[label] = (s, g, slot_time(s, g), slope, time.perf_counter() - t)
    rows = []
    for n in SIZES:
        ring_t = model_time("ring", ring, 1, n).time
        row = {"p": p, "ells": name, "k": k, "n_bytes": n, "model": MODEL, "ring": float(ring_t)}
        for label, (s, g, st, slope, _) in out.items():
            ev = measure(s, lat_cluster, g, n)
            row[label] = {"slot": float(st), "event": float(ev), "overhead": float(ev / ring_t - 1),
                          "latency_count": float(slope), "flows": len(s.flows)}
        mt = model_time("optcc", lat_cluster, k, n)
        row["after"]["closed_form"] = float(mt.time)
        row["after"]["closed_form_valid"] = mt.valid
        rows.append(row)
    return rows


def old_auto_k(plain: Cluster, lat_cluster: Cluster, n_bytes: int) -> int:
    """The k spread 1's closed form picked (issue 13 before this change): slot + old count·(Li + L)."""
    _, li, lat = latency_units(lat_cluster, n_bytes)
    lam, p, best = li + lat, plain.p, None
    for k in list(range(1, 65)) + list(range(66, 1025, 8)):
        if lam > F(1, 2) / (k * p):
            break
        t = model_time("optcc", plain, k, n_bytes).slot + (2 * (p - 1) + F((p - 1) * (k + 1), 2) + 4 * k) * lam
        if best is None or t < best[1]:
            best = (k, t)
    return best[0] if best else 1


def auto_row(p: int, name: str, ells, n_bytes: int = 8 * 2**30) -> dict:
    plain = Cluster.build(p, stragglers=dict(enumerate(ells)))
    lat_cluster = Cluster.build(p, stragglers=dict(enumerate(ells)), latency_model=MODEL)
    ring_t = model_time("ring", Cluster.build(p, latency_model=MODEL), 1, n_bytes).time
    row = {"p": p, "ells": name, "n_bytes": n_bytes, "model": MODEL, "ring": float(ring_t)}
    for label, c, k in (("before", plain, old_auto_k(plain, lat_cluster, n_bytes)),
                        ("after", lat_cluster, auto_segments("optcc", lat_cluster, n_bytes)[0])):
        s = optcc_multi_allreduce(c, k)
        ev = measure(s, lat_cluster, IntegerTimes(s), n_bytes)
        row[label] = {"k": k, "event": float(ev), "overhead": float(ev / ring_t - 1), "flows": len(s.flows)}
    return row


def main(argv) -> int:
    as_json = "--json" in argv
    ps = [int(a) for a in argv if a != "--json"] or [8, 16, 32]
    started = time.perf_counter()
    rows = [r for p in ps for name, ells in SETTINGS for k in KS for r in rows_for(p, name, ells, k)]
    autos = [auto_row(p, name, ells) for p in ps for name, ells in SETTINGS]
    if as_json:
        json.dump({"model": MODEL, "rows": rows, "auto": autos, "seconds": time.perf_counter() - started},
                  sys.stdout, indent=1)
        print()
        return 0
    print(f"# multi-straggler OptCC under the {MODEL} latency model: event time over the fault-free ring "
          f"(same model); B = latencies on the critical path; before = hop spread 1, after = spread 3")
    print(f"{'p':>3} {'ells':>8} {'k':>3} {'n':>5} | {'slot':>7} {'over':>7} {'B':>6} | {'slot':>7} {'over':>7} "
          f"{'B':>6} {'closed':>7}")
    for r in rows:
        b, a = r["before"], r["after"]
        print(f"{r['p']:>3} {r['ells']:>8} {r['k']:>3} {r['n_bytes'] // 2**30:>3}Gi | {b['slot']:7.4f} "
              f"{100 * b['overhead']:6.2f}% {b['latency_count']:6.1f} | {a['slot']:7.4f} {100 * a['overhead']:6.2f}% "
              f"{a['latency_count']:6.1f} {100 * (a['closed_form'] / r['ring'] - 1):6.2f}%"
              f"{'' if a['closed_form_valid'] else '!'}")
    print("\n# n = 8 GiB, each at the k its closed form picks; event time over the ring")
    print(f"{'p':>3} {'ells':>8} | {'k':>4} {'over':>7} | {'k':>4} {'over':>7}")
    for r in autos:
        b, a = r["before"], r["after"]
        print(f"{r['p']:>3} {r['ells']:>8} | {b['k']:>4} {100 * b['overhead']:6.2f}% | {a['k']:>4} "
              f"{100 * a['overhead']:6.2f}%")
    print(f"({time.perf_counter() - started:.1f} s; slot in n/B; 'closed' = optcc.model_time over the ring; "
          f"'!' = above the knee, not modelled)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
