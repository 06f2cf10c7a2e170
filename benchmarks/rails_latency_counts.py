"""optcc_rails' closed-form counts (optcc.algorithms.rails.counts) against the event model: the largest
ratios on its grid (`clusters`, `KS`: p ∈ {8, 16, 32}, g ∈ {2, 4, 8}, two degraded servers with
uniform and with mixed ℓ, k ∈ {1, 2, 4, 8, 16}), which tests/optcc/test_model_time_rails.py tests.

Prints max (event − slot)/(B·λ) over λ ∈ {1/8, 1/2, 1} × the knee, max (event − slot)/(A·o)
over o ∈ {10⁻³, 10⁻², 1/30} n/B, and max event/model_time under the presets alpha, simai, nccl
at 64 MiB, 1 GiB, 8 GiB where model_time is valid. Each ≤ 1 means the count bounds the event
model there (a tested bound, not a proof). About a minute on a 2-core machine.
Run: python benchmarks/rails_latency_counts.py [--json]
"""
from __future__ import annotations

import json
import sys
from fractions import Fraction as F

from optcc.algorithms import build_schedule
from optcc.cluster import Cluster
from optcc.latency import units as latency_units
from optcc.model_time import knee, latency_count, model_time, overhead_count, slot
from optcc.timing import IntegerTimes, event_time

KS = (1, 2, 4, 8, 16)


def clusters():
    """(name, slowdowns, p, g): the test grid (two degraded servers, uniform and mixed ℓ)."""
    for p in (8, 16, 32):
        for g in (2, 4, 8):
            if p // g < 2:
                continue
            uniform = {**{i: F(2) for i in range(g)}, **{g + i: F(3, 2) for i in range(g)}}
            mixed = {i: (F(2) if i < g // 2 else F(4, 3)) for i in range(g)}
            mixed[g + 1] = F(3, 2)
            yield f"uniform-p{p}-g{g}", uniform, p, g
            yield f"mixed-p{p}-g{g}", mixed, p, g


def measure() -> dict:
    worst = {"latency_B": (0.0, ""), "overhead_A": (0.0, ""), "model_time": (0.0, "")}

    def keep(name, value, where):
        if value > worst[name][0]:
            worst[name] = (value, where)

    for name, slow, p, g in clusters():
        for k in KS:
            c = Cluster.build(p, g, slow)
            s = build_schedule("optcc", c, k)
            grid = IntegerTimes(s)
            base = slot("optcc", c, k)
            b, a, lim = latency_count("optcc", c, k), overhead_count("optcc", c, k), knee("optcc", c, k)
            for x in (F(1, 8), F(1, 2), F(1)):
                lam = x * lim
                keep("latency_B", float((event_time(s, F(0), grid, F(0), lam) - base) / (b * lam)),
                     f"{name} k={k} λ={x}·knee")
            for o in (F(1, 1000), F(1, 100), F(1, 30)):
                keep("overhead_A", float((event_time(s, o, grid) - base) / (a * o)), f"{name} k={k} o={o}")
            for model in ("alpha", "simai", "nccl"):
                cm = Cluster.build(p, g, slow, latency_model=model)
                for n in (64 * 2**20, 2**30, 8 * 2**30):
                    mt = model_time("optcc", cm, k, n)
                    if mt.valid:
                        o, li, lat = latency_units(cm, n)
                        keep("model_time", float(event_time(s, o, grid, li, lat) / mt.time),
                             f"{name} k={k} {model} n={n // 2**20} MiB")
    return {key: {"max_ratio": v, "at": where} for key, (v, where) in worst.items()}


def main(argv: list[str]) -> int:
    out = measure()
    if "--json" in argv:
        print(json.dumps(out, indent=2))
        return 0
    for key, r in out.items():
        print(f"{key:12s} max ratio {r['max_ratio']:.4f}  at {r['at']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
