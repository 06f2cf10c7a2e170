"""OptCC with g GPUs per server (one straggler server) against the issue-8 targets, slot model, α = 0.

Figure 10 setting (paper): g = 4, p ∈ {16, 64, 256}, ℓ ∈ {8/7, 2}; k = 64 segments, NVLink 9×
the NIC (cluster default). For each row: the slot time (n/B) of the generated schedule, whether
it equals the closed form `optcc_server_slot_time` and passes the one-flow-per-port check
(exclusive, NIC and NVLink), the server-level exclusive fluid LP optimum of the same capacity
model (lp_models.fluid.solve_fluid_lp(cluster, "exclusive"): servers with g NICs, one flow per
NIC direction at the slower end's speed, NVLink row 2(g−1)/(g·s_nv)), the ratio to it (target
≤ 1.03), the ratio to Theorem 3's bound (paper) beside it, and for reading Figure 10 the ratios
to T0 (hierarchical optimum) and to NCCLNoFailure (flat multi-channel ring, no failure,
derived reading in PAPER.md), plus the hierarchical ring with the straggler (baseline).
Rows with p above --generate-up-to (default 256) print the closed form only and say so.
Second table, two servers (q = 2; Figure 22's g = 8, p = 16, and g = 4, p = 8; ℓ ∈ {8/7, 2}):
the same columns, the k-segment pipelined exchange of optcc_servers (NVLink-bound rows equal the
LP's NVLink row 2(g−1)/(g·s_nv) exactly; NIC-bound rows are ℓ/g + 2(g−1)/(g·s_nv·k)).
--tables fig10|q2|all (default all) picks the tables.
--sweep N [--seed S]: instead, N random small clusters (g ∈ {2,4,8}, q ≤ 11, ℓ ∈ [1, 3],
k ≤ 20, s_nv from (g−1)/2 to 2(g−1)): generated slot time vs `optcc_server_slot_time`; a
mismatch where the closed form does not refuse is a failure.
Run: /work/venv/bin/python benchmarks/optcc_server_targets.py [--generate-up-to P] [--k K] [--tables q2]
     /work/venv/bin/python benchmarks/optcc_server_targets.py --sweep 400 --seed 1
"""
from __future__ import annotations

import argparse
import sys
import time
from fractions import Fraction as F

from bounds.closed_form import fault_free_optimum, lower_bound_straggler_server
from lp_models.fluid import solve_fluid_lp
from optcc.algorithms.baselines import flat_ring_slot_time, hierarchical_ring_slot_time
from optcc.algorithms.servers.build import optcc_server_allreduce, optcc_server_slot_time
from optcc.cluster import Cluster
from optcc.timing import IntegerTimes, check_capacity, slot_time

ELLS = [("8/7", F(8, 7)), ("2", F(2))]


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--generate-up-to", type=int, default=256)
    ap.add_argument("--k", type=int, default=64)
    ap.add_argument("--g", type=int, default=4)
    ap.add_argument("--p", default="16,64,256")
    ap.add_argument("--sweep", type=int, default=0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--tables", choices=("all", "fig10", "q2"), default="all")
    a = ap.parse_args(argv)
    if a.sweep:
        return sweep(a.sweep, a.seed)
    failures = 0
    if a.tables in ("all", "fig10"):
        failures += table(a.g, [(a.g, int(p)) for p in a.p.split(",")], a.k, a.generate_up_to)
    if a.tables in ("all", "q2"):
        failures += table(None, [(8, 16), (4, 8)], a.k, a.generate_up_to)
    print("all targets met, port rule holds, closed form agrees" if not failures else f"{failures} FAILURES")
    return 1 if failures else 0


def table(g_title, rows, k: int, generate_up_to: int) -> int:
    """One table: (g, p) rows × ELLS; returns the number of failed checks."""
    if g_title is None:
        print(f"two servers (q = 2), k={k}, straggler server 1 (all g GPUs at ℓ), NVLink 9x NIC; times in n/B")
    else:
        print(f"g={g_title}, k={k}, straggler server 1 (all {g_title} GPUs at ℓ), NVLink 9x NIC; times in n/B")
    print(f"{'g':>2} {'p':>4} {'ell':>4} {'flows':>8} {'slot':>9} {'source':>9} {'ports':>5} {'=cf':>4} {'LP':>8} "
          f"{'/LP':>7} {'/Thm3':>7} {'/T0':>7} {'/NCCLnf':>7} {'hring/T0':>8} {'gen_s':>6}  target")
    failures = 0
    for g, p in rows:
        for name, ell in ELLS:
            c = Cluster.build(p, g, {r: ell for r in range(g, 2 * g)})
            cf = optcc_server_slot_time(c, k)
            flows, ports, cf_ok, gen = "-", "-", "-", float("nan")
            if p <= generate_up_to:
                t = time.perf_counter()
                s = optcc_server_allreduce(c, k)
                grid = IntegerTimes(s)
                st = slot_time(s, grid)
                ports_ok = check_capacity(s, grid=grid) is None
                gen = time.perf_counter() - t
                flows, source = len(s.flows), "generated"
                ports, cf_ok = ("ok" if ports_ok else "BAD"), ("ok" if st == cf else "BAD")
                failures += (not ports_ok) + (st != cf)
                del s, grid
            else:
                st, source = cf, "closed"
            lp = solve_fluid_lp(c, "exclusive")
            if not lp.optimal:
                print(f"{g:>2} {p:>4} {name:>4}  LP not optimal: {lp.status}")
                failures += 1
                continue
            r_lp = float(st) / lp.objective
            ok = r_lp <= 1.03
            failures += not ok
            t0 = fault_free_optimum(p, g)
            nccl_nf = flat_ring_slot_time(Cluster.build(p, g))
            print(f"{g:>2} {p:>4} {name:>4} {flows:>8} {float(st):>9.5f} {source:>9} {ports:>5} {cf_ok:>4} "
                  f"{lp.objective:>8.5f} {r_lp:>7.4f} {float(st / lower_bound_straggler_server(p, g, ell)):>7.4f} "
                  f"{float(st / t0):>7.4f} {float(st / nccl_nf):>7.4f} "
                  f"{float(hierarchical_ring_slot_time(c) / t0):>8.4f} {gen:>6.1f}  "
                  f"LP {'met' if ok else 'MISSED'}")
    return failures


def sweep(n: int, seed: int) -> int:
    import random
    from optcc.errors import OptccError
    rng = random.Random(seed)
    ells = [F(1), F(101, 100), F(8, 7), F(5, 4), F(3, 2), F(7, 4), F(19, 10), F(199, 100), F(2), F(9, 4), F(3)]
    agree = refused = bad = 0
    for _ in range(n):
        g = rng.choice([2, 4, 8])
        q = rng.choice([3, 4, 5, 6, 8, 11])
        k = rng.choice([1, 2, 3, 6, 12, 20])
        ell = rng.choice(ells)
        s_nv = F(rng.randint((g - 1) * 10, (g - 1) * 40), 20)
        c = Cluster.build(g * q, g, {r: ell for r in range(g, 2 * g)} if ell != 1 else None,
                          bandwidth=1, nvlink_bandwidth=s_nv)
        s = optcc_server_allreduce(c, k)
        st = slot_time(s)
        ok_ports = check_capacity(s) is None
        try:
            cf = optcc_server_slot_time(c, k)
        except OptccError:
            refused += 1
            bad += not ok_ports
            continue
        if st == cf and ok_ports:
            agree += 1
        else:
            bad += 1
            print(f"MISMATCH g={g} q={q} ℓ={ell} k={k} s_nv={s_nv}: generated {st}, closed form {cf}, "
                  f"ports {'ok' if ok_ports else 'BAD'}")
    print(f"sweep seed {seed}: {n} clusters, closed form = generated in {agree}, refused (conditions "
          f"false) in {refused}, failures {bad}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
