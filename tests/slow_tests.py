"""Write tests/slow_tests.txt from the `--durations=N` section of a pytest log: every item of at
least MIN_SECONDS (tests/conftest.py marks those `slow`, the fast tier deselects them).

    python -m pytest -q --durations=120 > durations.log; python tests/slow_tests.py durations.log > tests/slow_tests.txt
"""
from __future__ import annotations

import re
import sys

MIN_SECONDS = 3.0
LINE = re.compile(r"^(\d+\.\d+)s (call|setup|teardown)\s+(\S.*)$")


def main(path: str) -> None:
    rows = [m.groups() for m in map(LINE.match, open(path, encoding="utf-8").read().splitlines()) if m]
    print("# Tests marked `slow` by tests/conftest.py: measured durations (seconds, pytest phase, node id)")
    print(f"# of every item ≥ {MIN_SECONDS} s in {path}; tests reading the paper-checks report are slow by fixture too.")
    print("# Regenerate: python tests/slow_tests.py DURATIONS_LOG > tests/slow_tests.txt")
    for seconds, phase, node in rows:
        if float(seconds) >= MIN_SECONDS:
            print(f"{seconds}\t{phase}\t{node}")


if __name__ == "__main__":
    main(sys.argv[1])
