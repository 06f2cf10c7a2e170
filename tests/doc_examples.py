"""The `$ optcc …` examples of a doc and how their shown lines are compared (volatile figures
masked): shared by tests/project/test_docs_examples.py and the paper-checks report's example test."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VOLATILE = [(re.compile(r"\b(proved|refuted)( by the verifier)?( \([^)]*\))? in [0-9.]+ s", re.I), "<seconds>"),
            (re.compile(r'"(seconds|wall_s)": [0-9.e+-]+'), r'"\1": <wall>'),            # a run's JSON
            (re.compile(r"\(\d+(\.\d+)? s\)$"), "<seconds>"),
            (re.compile(r"\b\d+(\.\d+)? ms\b"), "<ms>"),                                  # a run's wall time
            (re.compile(r"(Avg bus bandwidth\s*:)\s*\S+"), r"\1 <wall>")]


def examples(path: Path) -> list[tuple[str, list[str]]]:
    """(command, shown output lines) of every `$ ` line inside a fenced block."""
    out, block, current = [], False, None
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            if block and current:
                out.append(current)
                current = None
            block = not block
        elif block and line.startswith("$ "):
            if current:
                out.append(current)
            current = (line[2:], [])
        elif block and current is not None:
            current[1].append(line)
    return out


def normal(line: str) -> str:
    for pattern, replacement in VOLATILE:
        line = pattern.sub(replacement, line)
    return " ".join(line.split())
