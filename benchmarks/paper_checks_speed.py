"""Speed of `optcc paper-checks` (issue 24 item 6: the whole report in ≤ 90 s CPU on the project's
2-core machine): CPU and wall seconds of one full `python -m optcc paper-checks --json` in a
fresh interpreter (start-up included), and each row's CPU seconds as the command reports them
on stderr (its progress lines).

    python benchmarks/paper_checks_speed.py [--json] [--save OUT.json] [--compare REF.json]

--save writes the command's stdout (the report JSON) to OUT.json; --compare checks that stdout
is byte-identical to REF.json (a report saved before a speed change: the speed work must not
change one number) and exits 1 when it is not.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET_CPU_S = 90.0
PROGRESS = re.compile(r"^paper-checks: \[(\d+)/(\d+)\] (\S+): (.+) \(([\d.]+) s CPU\)$")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print the measurement as JSON")
    ap.add_argument("--save", metavar="OUT", help="write the report (the command's stdout) here")
    ap.add_argument("--compare", metavar="REF", help="exit 1 unless stdout is byte-identical to REF")
    a = ap.parse_args()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "optcc", "paper-checks", "--json"], capture_output=True,
                          env=env, check=False)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.stderr.write(done.stderr.decode())
        return done.returncode
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    rows = []
    for line in done.stderr.decode().splitlines():
        m = PROGRESS.match(line)
        if m:
            rows.append({"row": m.group(3), "verdict": m.group(4), "cpu_s": float(m.group(5))})
    identical = None
    if a.compare:
        identical = Path(a.compare).read_bytes() == done.stdout
    if a.save:
        Path(a.save).write_bytes(done.stdout)
    result = {"command": "python -m optcc paper-checks --json", "cpu_s": round(cpu, 2), "wall_s": round(wall, 2),
              "target_cpu_s": TARGET_CPU_S, "rows_cpu_s": round(sum(r["cpu_s"] for r in rows), 2),
              "rows": rows, "identical_to_reference": identical}
    if a.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"{'row':28s} {'verdict':>10s} {'cpu_s':>7s}")
        for r in sorted(rows, key=lambda r: -r["cpu_s"]):
            print(f"{r['row']:28s} {r['verdict']:>10s} {r['cpu_s']:7.1f}")
        print(f"{result['command']}: {cpu:.1f} s CPU (target ≤ {TARGET_CPU_S:g}), {wall:.1f} s wall; "
              f"the rows {result['rows_cpu_s']:.1f} s CPU, the rest start-up and JSON")
        if identical is not None:
            print(f"stdout byte-identical to {a.compare}: {'yes' if identical else 'NO'}")
    return 0 if identical in (None, True) else 1


if __name__ == "__main__":
    sys.exit(main())
