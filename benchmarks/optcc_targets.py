"""OptCC (single straggler) against the issue-2 targets, slot model, α = 0.

Prints, for k ∈ {1,4,16,64}, p ∈ {5,8,16,64}, ℓ ∈ {8/7, 1.5, 2, 3}: the measured slot time of
the generated schedule (n/B), its ratio to Theorem 1's lower bound (paper), to the
exclusive-model fluid optimum T_ex (derived, bounds.closed_form.exclusive_single_straggler_optimum) and to T0,
whether the one-flow-per-port check passes and the closed form agrees, and generation seconds.
Targets at k = 64: ℓ ≥ 2: slot/LB ≤ 1.03; ℓ < 2: slot/T_ex ≤ 1.03.
Run: /work/venv/bin/python benchmarks/optcc_targets.py [--quick]
"""
from __future__ import annotations

import sys
import time
from fractions import Fraction as F

from bounds.closed_form import exclusive_single_straggler_optimum as exclusive_fluid_optimum
from bounds.closed_form import fault_free_optimum, lower_bound_single_straggler
from optcc.algorithms.single.build import optcc_allreduce, optcc_slot_time
from optcc.cluster import Cluster
from optcc.timing import IntegerTimes, check_capacity, slot_time

ELLS = [("8/7", F(8, 7)), ("1.5", F(3, 2)), ("2", F(2)), ("3", F(3))]


def main(argv):
    ks = [1, 4, 16] if "--quick" in argv else [1, 4, 16, 64]
    print(f"{'k':>3} {'p':>3} {'ell':>4} {'flows':>7} {'slot':>9} {'/LB':>7} {'/T_ex':>7} {'/T0':>7} "
          f"{'ports':>5} {'=cf':>4} {'gen_s':>6}  target")
    failures = 0
    for k in ks:
        for p in (5, 8, 16, 64):
            for name, ell in ELLS:
                c = Cluster.build(p, stragglers={0: ell})
                t = time.perf_counter()
                s = optcc_allreduce(c, k)
                gen = time.perf_counter() - t
                grid = IntegerTimes(s)
                st = slot_time(s, grid)
                ports_ok = check_capacity(s, grid=grid) is None
                cf_ok = st == optcc_slot_time(c, k)
                lb = lower_bound_single_straggler(p, ell)
                tex = exclusive_fluid_optimum(p, ell)
                target = ""
                if k == 64:
                    ok = (st / lb if ell >= 2 else st / tex) <= F(103, 100)
                    target = ("LB " if ell >= 2 else "T_ex ") + ("met" if ok else "MISSED")
                    failures += not ok
                failures += (not ports_ok) + (not cf_ok)
                print(f"{k:>3} {p:>3} {name:>4} {len(s.flows):>7} {float(st):>9.5f} {float(st / lb):>7.4f} "
                      f"{float(st / tex):>7.4f} {float(st / fault_free_optimum(p)):>7.4f} "
                      f"{'ok' if ports_ok else 'BAD':>5} {'ok' if cf_ok else 'BAD':>4} {gen:>6.2f}  {target}")
    print("all targets met, port rule holds, closed form agrees" if not failures else f"{failures} FAILURES")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
