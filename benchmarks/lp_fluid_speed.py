"""Fluid LP speed: equivalence classes vs the full model (target: p = 10 000 well under 2 s).

Run: /work/venv/bin/python benchmarks/lp_fluid_speed.py
"""
import time
from fractions import Fraction as F

from bounds.closed_form import lower_bound
from lp_models.fluid import solve_fluid_lp
from optcc.cluster import Cluster
from optcc_app.compose.tables import print_table

rows = []
for p in (8, 48, 256, 1000, 10000):
    cluster = Cluster.build(p, stragglers={0: F(3, 2), 1: F(8, 7)})
    for capacity in ("shared", "exclusive"):
        for reduce_classes in (True, False):
            if not reduce_classes and p > 256:
                continue
            t = time.perf_counter()
            res = solve_fluid_lp(cluster, capacity, reduce_classes=reduce_classes)
            wall = time.perf_counter() - t
            lb = float(lower_bound(cluster))
            rows.append([p, capacity, "classes" if reduce_classes else "full", len(res.classes), res.status,
                         res.objective, res.objective / lb, wall])
print_table(["p", "capacity", "model", "classes", "status", "T (n/B)", "T/bound", "seconds"], rows)
