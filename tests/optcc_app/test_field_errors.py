"""Library errors name model fields, never CLI flags (DESIGN.md): every OptccError raised
outside the CLI (optcc_app/cli.py, optcc_app/commands/) whose field is a literal must not start with
"-"; the CLI maps fields to flags (optcc_app/commands/_fields.py)."""
from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
LIBRARY = ("optcc", "bounds", "verifier", "lp_models", "gpu_runner", "optcc_app/compose", "paper_checks")


def flag_named_errors(root: pathlib.Path) -> list[str]:
    found = []
    for package in LIBRARY:
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root)
            if rel.as_posix() == "optcc/__main__.py":
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "OptccError" and node.args
                        and isinstance(node.args[0], ast.Constant) and str(node.args[0].value).startswith("-")):
                    found.append(f"{rel}:{node.lineno}: {node.args[0].value}")
    return found


def test_library_errors_name_fields_not_flags():
    assert flag_named_errors(ROOT) == []


def test_a_flag_named_error_is_caught(tmp_path):
    (tmp_path / "optcc").mkdir()
    (tmp_path / "optcc_app" / "commands").mkdir(parents=True)
    (tmp_path / "optcc" / "x.py").write_text('raise OptccError("--g", "no")\nraise OptccError("g", "ok")\n')
    (tmp_path / "optcc_app" / "commands" / "y.py").write_text('raise OptccError("--n", "the CLI may")\n')
    assert flag_named_errors(tmp_path) == ["optcc/x.py:1: --g"]


def test_every_field_the_cli_maps_is_a_flag():
    from optcc_app.commands._fields import FIELD_FLAGS
    assert all(flag.startswith("-") and not field.startswith("-") for field, flag in FIELD_FLAGS.items())
