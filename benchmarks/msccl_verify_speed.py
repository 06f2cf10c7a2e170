"""MSCCL verify speed, and the round trip on a larger grid (a table, not a test).

Target (issue 15, on the 2-core dev machine): an 8-GPU XML with ~1,000 steps verified (parse,
both buffer models, Z3, determinism) in under 5 s. Inputs: the real 8-GPU ring from
../shared/msccl-xml (960 steps) when present, and exported OptCC / ring schedules on 8 GPUs
of about 1,000 steps and more. --grid also exports and verifies ring and OptCC for p up to 16,
several k, ℓ and g (the tests run a smaller grid).

Run:  python benchmarks/msccl_verify_speed.py [--grid] [--max-steps 64|256]
"""
from __future__ import annotations

import argparse
import time
from fractions import Fraction
from pathlib import Path

from optcc.algorithms import build_schedule
from optcc.cluster import Cluster
from optcc.errors import OptccError
from verifier.msccl import verify_xml
from verifier.msccl.export import export_xml

TARGET_SECONDS = 5.0
REAL = Path(__file__).resolve().parents[1].parent / "shared" / "msccl-xml" / "msccl-scheduler_ndv4_r48ll.xml"


def _row(label, text, max_steps):
    t = time.perf_counter()
    proof = verify_xml(text, max_steps)
    seconds = time.perf_counter() - t
    f = proof.facts
    return [label, f["ranks"], f["thread_blocks"], f["steps"], f["z3_queries"], f"{seconds:.3f}",
            "proved" if proof.proved else "REFUTED " + ",".join(k for k, v in proof.properties.items() if not v)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grid", action="store_true", help="also run the round trip on the larger grid")
    ap.add_argument("--max-steps", type=int, choices=(64, 256), default=64)
    args = ap.parse_args()
    rows = []
    if REAL.exists():
        rows.append(_row("real: ndv4 r48ll (8 GPUs)", REAL.read_text(), args.max_steps))
    for algo, p, k in (("optcc", 8, 5), ("ring", 8, 4), ("optcc", 8, 16), ("ring", 8, 16)):
        text, _ = export_xml(build_schedule(algo, Cluster.build(p, 1, {0: 2}), k), args.max_steps)
        rows.append(_row(f"export: {algo} p={p} k={k} ℓ=2", text, args.max_steps))
    if args.grid:
        for algo in ("ring", "optcc"):
            for p, g, stragglers in ((4, 1, {0: 2}), (8, 1, {0: Fraction(8, 7)}), (8, 1, {0: 4}), (12, 1, {0: 2, 7: 3}),
                                     (16, 1, {3: 2}), (16, 2, {0: 2, 1: 2}), (16, 4, {4: 3, 5: 3, 6: 3, 7: 3})):
                for k in (1, 2, 4, 8):
                    c = Cluster.build(p, g, stragglers)
                    label = f"export: {algo} {c.describe()} k={k}"
                    try:
                        text, _ = export_xml(build_schedule(algo, c, k), args.max_steps)
                    except OptccError as e:
                        rows.append([label, p, "-", "-", "-", "-", f"refused ({e.message[:70]})"])
                        continue
                    rows.append(_row(label, text, args.max_steps))
    header = ["xml", "ranks", "thread blocks", "steps", "z3 queries", "verify s", "result"]
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    for r in [header] + rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)))
    near = [float(r[5]) for r in rows if r[1] == 8 and 800 <= r[3] <= 1500]
    if near:
        worst = max(near)
        print(f"\n# 8-GPU XMLs with 800..1,500 steps: slowest verify {worst:.3f} s; target < {TARGET_SECONDS:.0f} s: "
              + ("met" if worst < TARGET_SECONDS else "MISSED"))
    refused = [r for r in rows if r[-1].startswith("refused")]
    bad = [r for r in rows if r[-1].startswith("REFUTED") and not r[0].startswith("real")]
    proved = [r for r in rows if r[-1] == "proved" and not r[0].startswith("real")]
    print(f"# round trip: {len(proved)} exported XMLs proved, {len(bad)} refuted, {len(refused)} refused by export "
          f"(more than {args.max_steps} steps per thread block even after splitting over channels)")


if __name__ == "__main__":
    main()
