"""What a generator proof is a proof *of*: the source files that determine a proved
construction's schedules (its module, its families, the core model, the rank-local enumeration,
the generated-schedule form and every verifier/parametric module, with their import closure
inside this project), and their digest. A generator certificate and a generated schedule
(optcc.generated) both carry it, so any edit to those files invalidates them.

Pure Python (ast, hashlib): the core reads the verifier's files as bytes, it imports none of them.
"""
from __future__ import annotations

import ast
import hashlib
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[1]
_COMMON = ["optcc/cluster.py", "optcc/timing.py", "optcc/schedule.py", "optcc/algorithms/__init__.py",
           "optcc/algorithms/families/__init__.py", "optcc/algorithms/families/local.py", "optcc/generated.py"]
# generator (a record's `generator`, optcc.algorithms.record) -> its construction's folder: every file in it
SOURCES = {"ring": "optcc/algorithms/ring", "optcc": "optcc/algorithms/single"}
MIN_P = {"ring": 2, "optcc": 3}
_OURS = ("optcc", "verifier", "bounds")


def _module_file(name: str) -> Path | None:
    base = _ROOT.joinpath(*name.split("."))
    for cand in (base.with_suffix(".py"), base / "__init__.py"):
        if cand.is_file():
            return cand
    return None


def source_files(algo: str) -> list[str]:
    """The roots for `algo` (construction, families, core model, every verifier/parametric module)
    and the module-level import closure of those within this project, with package __init__s."""
    todo = [_ROOT / r for r in _COMMON]
    if algo in SOURCES:
        todo += sorted((_ROOT / SOURCES[algo]).glob("*.py"))
    todo += sorted((_ROOT / "verifier" / "parametric").glob("*.py"))
    seen: set[Path] = set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        rel = path.relative_to(_ROOT)
        for i in range(1, len(rel.parts)):          # the packages a module import executes
            init = _ROOT.joinpath(*rel.parts[:i], "__init__.py")
            if init.is_file():
                todo.append(init)
        for name in top_level_imports(path):
            if name.split(".")[0] in _OURS and (f := _module_file(name)) is not None:
                todo.append(f)
    return sorted(str(p.relative_to(_ROOT)) for p in seen)


def top_level_imports(path: Path) -> list[str]:
    """The dotted names a module's top-level import statements name (`from a import b` gives a and
    a.b; relative imports are left out): what runs when the module is imported."""
    names: list[str] = []
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names += [node.module] + [f"{node.module}.{a.name}" for a in node.names]
    return names


def sources_digest(algo: str) -> str:
    """sha256 over `source_files(algo)` (names and contents)."""
    h = hashlib.sha256()
    for rel in source_files(algo):
        h.update(rel.encode() + b"\0" + (_ROOT / rel).read_bytes() + b"\0")
    return h.hexdigest()
