"""few_servers against optcc_servers where the "optcc" dispatcher chooses between them (the
measurement behind few_servers.accepts): the overhead over NCCLNoFailure's event time at the
best k, one straggler server, 8 GiB, 50 GB/s, NVLink 450 GB/s, presets simai, nccl and alpha.

Each side: the event time (optcc.event_timer, from arrays) at k = 2, 4, …, 1024 while the
schedule has at most CAP flows; few_servers also by its closed-form upper bound
slot + A·o + B·(Li + L) (tested ≥ the event time below its knee) at the k's beyond the cap.
Run: PYTHONPATH=. python benchmarks/few_servers_dispatch.py [CAP]
"""
from __future__ import annotations

import sys
from fractions import Fraction as F

from optcc.algorithms.few_servers import build as FS
from optcc.algorithms.servers.arrays import server_event_arrays
from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.event_timer import Prepared, ring_event_time
from optcc.latency import units

N = 8 * 2**30
B, B_NVLINK = F(50 * 10**9), F(450 * 10**9)     # paper_checks.settings' NIC and NVLink bandwidths


def cluster(p: int, g: int, ell, model: str) -> Cluster:
    """The straggler server 0 (all g GPUs at ℓ), the preset's latency."""
    return Cluster.build(p, g, {i: ell for i in range(g)}, bandwidth=B, nvlink_bandwidth=B_NVLINK, latency_model=model)


def nccl_event(p: int, g: int, model: str, n: int) -> F:
    """NCCLNoFailure (the flat ring, fault-free): its exact event time."""
    c = Cluster.build(p, g, bandwidth=B, nvlink_bandwidth=B_NVLINK, latency_model=model)
    return ring_event_time(c, *units(c, n))
POINTS = [(16, 4), (32, 4), (16, 8), (32, 8), (64, 8)]
ELLS = (F(2), F(4, 3), F(8, 7))
MODELS = ("simai", "nccl", "alpha")


def best(c, make, cap, closed=None):
    o, li, lat = units(c, N)
    seen = []
    k = 2
    while k <= 1024:
        fa = make(c, k)
        if len(fa) > cap:
            break
        seen.append((Prepared.from_arrays(c, fa).event_time(o, li, lat), k, "event"))
        k *= 2
    if closed is not None:
        while k <= 1024:
            if li + lat <= FS.knee(c) / (k * c.p):
                seen.append((closed(c, k, o, li + lat), k, "upper bound"))
            k *= 2
    return min(seen)


def few_closed(c, k, o, lam):
    return FS.slot_time(c, k) + FS.overheads(c, k) * o + FS.latencies(c, k) * lam


def main(cap: int) -> None:
    print("p g ell model | few_servers | optcc_servers")
    for p, g in POINTS:
        for ell in ELLS:
            for model in MODELS:
                c = cluster(p, g, ell, model)
                ring = nccl_event(p, g, model, N)
                try:
                    t, k, how = best(c, FS.arrays, cap, few_closed)
                    few = f"{100 * float(t / ring - 1):7.3f}% k={k} ({how})"
                except OptccError as e:
                    few = f"refused ({e.field})"
                t, k, how = best(c, server_event_arrays, cap)
                print(f"{p} {g} {ell} {model} | {few} | {100 * float(t / ring - 1):7.3f}% k={k} ({how})", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 400_000)
