"""Is OptCC's own timing optimal for its flows? CP-SAT re-times them (p ≤ 6, k ≤ 4).

Run: /work/venv/bin/python benchmarks/lp_slot_optcc.py [time_limit_s (default 10)]
'given' = OptCC's slot time; 'best' = CP-SAT's best (optimal when status is OPTIMAL);
'bound' = CP-SAT's proven lower bound for these flows; excess = given/best − 1.
"""
import sys
from fractions import Fraction as F

from lp_models.slot_timing import optimal_timing
from optcc.algorithms.single.build import optcc_allreduce
from optcc.cluster import Cluster
from optcc_app.compose.tables import print_table

limit = float(sys.argv[1]) if len(sys.argv) > 1 else 10.0
rows = []
for p in (3, 4, 5, 6):
    for ell in (F(8, 7), F(3, 2), F(2)):
        for k in (1, 2, 4):
            sched = optcc_allreduce(Cluster.build(p, stragglers={0: ell}), k)
            res = optimal_timing(sched, time_limit_s=limit)
            verdict = {True: "optimal", False: "NOT optimal", None: "unknown"}[res.given_is_optimal]
            rows.append([p, str(ell), k, len(sched.flows), res.status, res.given_time, res.objective,
                         res.best_bound, res.excess, verdict, res.seconds])
            print(*rows[-1], file=sys.stderr, flush=True)
print_table(["p", "ℓ", "k", "flows", "status", "given", "best", "bound", "excess", "OptCC timing", "seconds"], rows)
