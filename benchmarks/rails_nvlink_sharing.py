"""OptCC's rails at g = 8, 100 GB/s NICs (NVLink 450 GB/s bounds them): the event model with the
NVLink streams at their stated rates (`nvlink="stated"`, what the report times) against the same
model with a server's streams shared max-min (`nvlink="max-min"`, optcc.event_maxmin: what
SimGrid's network model does), per k, with the fault-free flat ring's time as the baseline.

Run: python benchmarks/rails_nvlink_sharing.py [--p 24 32] [--k 1 2 4 8 16 32 64] [--ell 2]
(prints one line per point: flows, both overheads over the ring, stated/max-min − 1, the two
timings' CPU seconds; simai latencies at 8 GiB).
"""
from __future__ import annotations

import argparse
import sys
import time
from fractions import Fraction


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--p", type=int, nargs="+", default=[24, 32])
    ap.add_argument("--k", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64])
    ap.add_argument("--ell", type=Fraction, default=Fraction(2))
    args = ap.parse_args(argv)
    from optcc.algorithms.baselines import flat_ring_allreduce
    from optcc.algorithms.registry import choose
    from optcc.cluster import Cluster
    from optcc.latency import units
    from optcc.timing import event_time
    n = 8 * 2**30
    for p in args.p:
        healthy = Cluster.build(p, 8, bandwidth=100e9, nvlink_bandwidth=450e9, latency_model="simai")
        ho, hli, hlat = units(healthy, n)
        ring = event_time(flat_ring_allreduce(healthy), ho, None, hli, hlat)
        c = Cluster.build(p, 8, {0: args.ell}, bandwidth=100e9, nvlink_bandwidth=450e9, latency_model="simai")
        o, li, lat = units(c, n)
        for k in args.k:
            s = choose(c).build(c, k)
            t0 = time.process_time()
            stated = event_time(s, o, None, li, lat)
            t1 = time.process_time()
            shared = event_time(s, o, None, li, lat, nvlink="max-min")
            t2 = time.process_time()
            print(f"p={p:4d} l={args.ell} k={k:3d} {len(s.flows):8d} flows  over the ring: stated "
                  f"{float(stated / ring - 1):+.3%}, max-min {float(shared / ring - 1):+.3%}  "
                  f"stated/max-min {float(stated / shared - 1):+.3%}  CPU {t1 - t0:.1f} s, {t2 - t1:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
