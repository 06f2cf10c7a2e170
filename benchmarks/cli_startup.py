"""Start-up time of `optcc` commands (the issue's target: `optcc schedule --algo ring --p 4` in
≤ 0.3 s): median wall time of N fresh interpreters per command, beside `python -c pass`.

    python benchmarks/cli_startup.py [--repeats 7] [--json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time

COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "optcc --version": [sys.executable, "-m", "optcc", "--version"],
    "optcc schedule --algo ring --p 4": [sys.executable, "-m", "optcc", "schedule", "--algo", "ring", "--p", "4",
                                         "-o", "{tmp}/r.json"],
    "optcc bound --p 16 --straggler 0:2": [sys.executable, "-m", "optcc", "bound", "--p", "16", "--straggler", "0:2"],
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, argv in COMMANDS.items():
            argv = [x.format(tmp=tmp) for x in argv]
            times = []
            for _ in range(a.repeats):
                t = time.perf_counter()
                subprocess.run(argv, check=True, capture_output=True)
                times.append(time.perf_counter() - t)
            rows.append({"command": name, "median_s": statistics.median(times), "min_s": min(times)})
    if a.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'command':40s} {'median_s':>9s} {'min_s':>7s}")
    for r in rows:
        print(f"{r['command']:40s} {r['median_s']:9.3f} {r['min_s']:7.3f}")


if __name__ == "__main__":
    main()
