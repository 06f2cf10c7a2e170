"""Exact event time of OptCC (optcc_rails) at one point of the paper check's Figure 21 g = 8 row,
at a k you give (e.g. the closed form's auto k from `optcc paper-checks --json`): a note beside
the row's `undecided` upper bounds, not a verdict (one k is not a search over k).

    python -m paper_checks.event_point P MODEL K [P MODEL K ...] [--json]

Prints the overhead over NCCLNoFailure's event time, CPU seconds and peak memory per point.
"""
from __future__ import annotations

import argparse
import json
import resource
import time
from fractions import Fraction

from optcc.errors import OptccError
from optcc.latency import PRESET_NAMES, units
from paper_checks import event_checks as E
from paper_checks import settings as S


def point(p: int, model: str, k: int) -> dict:
    """The row's cluster at p under `model`, timed at k (OptccError naming the field on bad input)."""
    c = E.cluster(p, S.G_FIGURE21, tuple(Fraction(e) for e in S.FIGURE21_ELLS), model)
    t = time.process_time()
    prep = E.SCHEDULES.get(c, k, cap=10**9)
    if prep is None:
        raise OptccError("K", f"no schedule at p = {p}, k = {k}")
    ev = prep.event_time(*units(c, S.MESSAGE_BYTES))
    ring = E.nccl_event(p, S.G_FIGURE21, model, S.MESSAGE_BYTES)
    return {"p": p, "model": model, "k": k, "overhead": float(ev / ring - 1),
            "cpu_s": round(time.process_time() - t, 2),
            "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("points", nargs="+", help="P MODEL K triples")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if len(a.points) % 3:
        ap.error("points: give P MODEL K triples")
    out = []
    for i in range(0, len(a.points), 3):
        p, model, k = a.points[i:i + 3]
        if not (p.isdigit() and k.isdigit() and int(k) >= 1):
            ap.error(f"points: P and K must be positive integers, got P = {p!r}, K = {k!r}")
        if model not in PRESET_NAMES:
            ap.error(f"points: unknown latency model {model!r} (one of {', '.join(PRESET_NAMES)})")
        p, k = int(p), int(k)
        try:
            r = point(p, model, k)
        except OptccError as e:
            ap.error(f"points: {e}")
        out.append(r)
        if not a.json:
            print(f"p = {p:5d}  {model:6s} k = {k:4d}  {100 * r['overhead']:6.2f}%  "
                  f"{r['cpu_s']:6.1f} s CPU  peak {r['peak_mib']} MiB", flush=True)
    if a.json:
        print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
