"""The import layers of shared/DESIGN.md, checked on every module's imports (ast, including
imports inside functions): each arrow must point down the table in `LAYERS`."""
from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

# layer name -> the layers it may import (besides itself). Order = the table of DESIGN.md.
LAYERS = {
    "core": set(),
    "bounds": {"core"},
    "verifier": {"core", "bounds"},
    "lp_models": {"core", "bounds"},
    "gpu_runner": {"core", "bounds", "verifier"},
    "compose": {"core", "bounds", "verifier", "lp_models", "gpu_runner"},
    "paper_checks": {"core", "bounds", "verifier", "lp_models", "gpu_runner", "compose"},
    "cli": {"core", "bounds", "verifier", "lp_models", "gpu_runner", "compose", "paper_checks"},
    "entry": {"cli"},            # optcc/__main__.py: `python -m optcc`, imported by nothing
    "benchmarks": {"core", "bounds", "verifier", "lp_models", "gpu_runner", "compose"},
}
PACKAGES = ("optcc", "bounds", "verifier", "lp_models", "gpu_runner", "optcc_app", "paper_checks", "benchmarks")
# Third-party imports a layer must never make (DESIGN.md: "bounds never imports torch").
FORBIDDEN_THIRD_PARTY = {"core": {"torch", "sympy", "z3", "ortools"}, "bounds": {"torch", "ortools"},
                         "verifier": {"torch", "ortools"}, "lp_models": {"torch", "z3"}}


def layer_of(module: str) -> str | None:
    """The layer of a dotted module name of ours, None for anything else (stdlib, third party)."""
    parts = module.split(".")
    top = parts[0]
    if top == "optcc":
        return "entry" if parts[1:] == ["__main__"] else "core"
    if top == "optcc_app":
        return "compose" if len(parts) > 1 and parts[1] == "compose" else "cli"
    if top in PACKAGES:
        return top
    return None


def module_name(root: pathlib.Path, path: pathlib.Path) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(tree: ast.AST, module: str, is_package: bool) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in the tree, at any depth."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base[:len(base) - node.level + (1 if is_package else 0)]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module
            # one entry per imported name: `from optcc_app import commands` is optcc_app.commands (the CLI)
            out.extend((node.lineno, name if a.name == "*" else f"{name}.{a.name}") for a in node.names)
    return out


def layering_violations(root: pathlib.Path) -> list[str]:
    """Every import under `root`'s packages that points against LAYERS, as 'file:line: a -> b'."""
    found = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            module = module_name(root, path)
            here = layer_of(module)
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            for line, target in imported_modules(tree, module, path.name == "__init__.py"):
                there = layer_of(target)
                where = f"{path.relative_to(root)}:{line}"
                if there is None:
                    if target.split(".")[0] in FORBIDDEN_THIRD_PARTY.get(here, ()):
                        found.append(f"{where}: {here} imports {target}")
                    continue
                if there != here and there not in LAYERS[here]:
                    found.append(f"{where}: {here} -> {there} ({module} imports {target})")
    return found


def test_the_package_respects_the_layers():
    assert layering_violations(ROOT) == []


def test_every_package_has_a_layer():
    tops = {p.parent.name for p in ROOT.glob("*/__init__.py")} | {"benchmarks"}
    assert tops - {"tests"} <= set(PACKAGES)


def _tree(tmp_path, files: dict[str, str]) -> pathlib.Path:
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_a_wrong_arrow_is_caught(tmp_path):
    """A deliberate violation in a throwaway tree: core importing bounds inside a function,
    the verifier importing the runner, and lp_models importing the verifier at module level."""
    root = _tree(tmp_path, {
        "optcc/__init__.py": "",
        "optcc/timing.py": ("from optcc.schedule import Schedule\n\n"
                            "def f():\n    from bounds.closed_form import lower_bound\n"),
        "optcc_app/commands/x.py": "import bounds\nimport verifier\n",  # the CLI may import anything
        "bounds/__init__.py": "from optcc.cluster import Cluster\n",
        "verifier/__init__.py": "import gpu_runner.launch\n",
        "lp_models/comparison.py": "from verifier import prove_allreduce\n",
        "lp_models/fluid.py": "from . import result\nfrom .result import X\n",  # relative, same layer
        "gpu_runner/__init__.py": "",
        "optcc_app/__init__.py": "",
        "optcc_app/compose/__init__.py": "",
        "paper_checks/__init__.py": "",
    })
    assert layering_violations(root) == [
        "optcc/timing.py:4: core -> bounds (optcc.timing imports bounds.closed_form.lower_bound)",
        "verifier/__init__.py:1: verifier -> gpu_runner (verifier imports gpu_runner.launch)",
        "lp_models/comparison.py:1: lp_models -> verifier (lp_models.comparison imports verifier.prove_allreduce)",
    ]


def test_forbidden_third_party_and_relative_imports(tmp_path):
    root = _tree(tmp_path, {
        "bounds/__init__.py": "def f():\n    import torch\n",
        "verifier/proof.py": "from ..gpu_runner import launch\n",
        "optcc_app/compose/table.py": "from paper_checks import report\n",   # nothing but the CLI imports paper_checks
        "optcc/schedule.py": "from optcc_app import commands\n",   # the core importing the CLI
    })
    assert layering_violations(root) == [
        "optcc/schedule.py:1: core -> cli (optcc.schedule imports optcc_app.commands)",
        "bounds/__init__.py:2: bounds imports torch",
        "verifier/proof.py:1: verifier -> gpu_runner (verifier.proof imports gpu_runner.launch)",
        "optcc_app/compose/table.py:1: compose -> paper_checks (optcc_app.compose.table imports paper_checks.report)",
    ]


def _module_level_imports(package: str) -> dict[str, set[str]]:
    """Module -> the modules of `package` its top-level statements import (what runs at import)."""
    mods = {}
    for path in (ROOT / package).rglob("*.py"):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        mods[name.removesuffix(".__init__")] = path
    from optcc.proof_sources import top_level_imports
    return {m: {x for x in top_level_imports(path) if x in mods and x != m} for m, path in mods.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict = {}
    low: dict = {}
    stack: list = []
    on: set = set()
    out = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_no_import_cycle_inside_the_core_at_module_level():
    """Inside optcc/ the modules a module imports at its top form no cycle (imports inside
    functions are deferred and not counted here)."""
    assert _cycles(_module_level_imports("optcc")) == []


def test_the_cycle_check_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _runtime_imports(tree: ast.AST, module: str, is_package: bool) -> list[tuple[int, str]]:
    """imported_modules, at any depth (imports inside functions too), without `if TYPE_CHECKING:`
    blocks: the imports that can run."""
    checking = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
                for stmt in node.body for n in ast.walk(stmt)}
    pruned = ast.Module(body=[], type_ignores=[])
    pruned.body = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)) and id(n) not in checking]
    return imported_modules(pruned, module, is_package)


def _all_imports(package: str, root: pathlib.Path = ROOT) -> dict[str, set[str]]:
    """Module -> the modules of `package` it can import at run time, at any depth (a name imported
    from a module counts as that module)."""
    files = {module_name(root, path): path for path in (root / package).rglob("*.py")}
    graph = {}
    for m, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        out = set()
        for _, target in _runtime_imports(tree, m, path.name == "__init__.py"):
            while target and target not in files:
                target = target.rpartition(".")[0]
            if target and target != m:
                out.add(target)
        graph[m] = out
    return graph


@pytest.mark.parametrize("package", ["optcc", "verifier", "bounds", "lp_models", "optcc_app"])
def test_no_import_cycle_counting_imports_inside_functions(package):
    """No cycle even through deferred imports: a construction never reaches back to the table
    that lists it (the registry imports the constructions, none imports the registry)."""
    assert _cycles(_all_imports(package)) == []


def test_deferred_cycle_is_found_and_type_checking_imports_are_not(tmp_path):
    root = _tree(tmp_path, {
        "optcc/__init__.py": "",
        "optcc/algorithms/__init__.py": "",
        "optcc/algorithms/registry.py": "from optcc.algorithms import rails\n",
        "optcc/algorithms/rails.py": "def f():\n    from optcc.algorithms.registry import choose\n",
        "optcc/cluster.py": "from optcc import hosts\n",
        "optcc/hosts.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from optcc.cluster import Cluster\n",
    })
    assert _cycles(_all_imports("optcc", root)) == [["optcc.algorithms.rails", "optcc.algorithms.registry"]]


def test_tests_mirror_the_packages_and_import_no_other_folders_test_module():
    tests = ROOT / "tests"
    folders = set(PACKAGES) - {"benchmarks"} | {"project"}
    files = sorted(tests.rglob("test_*.py"))
    assert not [p.name for p in tests.glob("test_*.py")]            # every test module lies in a folder
    assert {p.parent.name for p in files} == folders
    folder_of = {p.stem: p.parent.name for p in files}
    crossing = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module in folder_of \
                    and folder_of[node.module] != path.parent.name:
                crossing.append(f"{path.relative_to(tests)} imports {node.module}")
    assert crossing == []


def test_plain_pytest_imports_the_packages_not_the_test_folders_of_their_names(tmp_path):
    """`pytest` (not `python -m pytest`: no checkout on the path but what conftest adds) imports
    the real verifier, not tests/verifier as an empty namespace package."""
    import subprocess
    import sys
    probe = ROOT / "tests" / "verifier" / "test_trust_files.py"
    r = subprocess.run([sys.executable, "-c", "import sys, pytest; sys.exit(pytest.main(sys.argv[1:]))",
                        "-q", "-p", "no:cacheprovider", "-o", "addopts=", f"{probe}::test_every_writer_writes_the_tables_current_format"],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
