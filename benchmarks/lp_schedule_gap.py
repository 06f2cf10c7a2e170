"""LP → Schedule at k = 64: slot time vs the LP optimum (target ≤ 2%), proved by the verifier.

Run: /work/venv/bin/python benchmarks/lp_schedule_gap.py
"""
import time
from fractions import Fraction as F

from lp_models.to_schedule import lp_schedule
from optcc.cluster import Cluster
from optcc_app.compose.tables import print_table
from optcc_app.compose.timing_report import time_schedule
from verifier import prove_allreduce

rows = []
for capacity in ("shared", "exclusive"):
    for p in (5, 8, 16):
        for ell in (F(8, 7), F(3, 2), F(2)):
            t = time.perf_counter()
            sched = lp_schedule(Cluster.build(p, stragglers={0: ell}), 64, capacity)
            rep = time_schedule(sched)
            proof = prove_allreduce(sched)
            lp = sched.meta["lp_optimum"]
            rows.append([capacity, p, str(ell), lp, float(rep.slot_time), float(rep.slot_time) / lp - 1,
                         rep.violation is None, proof.proved, len(sched.flows), time.perf_counter() - t])
print_table(["capacity", "p", "ℓ", "LP optimum", "slot time", "excess", "capacity ok", "proved", "flows", "seconds"], rows)
