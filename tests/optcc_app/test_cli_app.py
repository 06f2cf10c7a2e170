"""The command line as its own top-level package (optcc_app): a command imports only its own
layers, usage errors are one line with a suggestion, `--version`, and the console script's
target is the package the layering test puts on top."""
from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import tomllib

import pytest

import optcc

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _modules_after(argv: list[str], tmp_path) -> set[str]:
    """The modules loaded by a fresh interpreter that runs `optcc ARGV` (and exits 0)."""
    script = ("import sys, json\nfrom optcc_app.cli import main\n"
              f"code = main({argv!r})\n"
              "print(json.dumps(sorted(sys.modules)))\nsys.exit(code)\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.splitlines()[-1]))


def test_schedule_imports_neither_z3_nor_numpy_nor_the_other_commands(tmp_path):
    loaded = _modules_after(["schedule", "--algo", "ring", "--p", "4", "-o", str(tmp_path / "r.json")], tmp_path)
    assert not {"z3", "numpy", "torch", "ortools", "sympy"} & {m.split(".")[0] for m in loaded}
    commands = {m for m in loaded if m.startswith("optcc_app.commands.") and not m.split(".")[-1].startswith("_")}
    assert commands == {"optcc_app.commands.schedule"}
    assert json.loads((tmp_path / "r.json").read_text())["cluster"]["p"] == 4


def test_help_lists_every_command(capsys):
    from optcc_app.cli import command_names, main
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in command_names())
    assert {"schedule", "verify", "prove-all", "paper-checks", "msccl"} <= set(command_names())


@pytest.mark.parametrize("argv, line", [
    (["shedule", "--p", "4"], "optcc: error: COMMAND: invalid choice: 'shedule'; did you mean schedule?"),
    (["schedule", "--algo", "ring", "--p", "4", "--stragler", "0:2", "-o", "x.json"],
     "optcc: error: --stragler: unrecognized argument; did you mean --straggler?"),
    (["schedule", "--algo", "rign", "--p", "4", "-o", "x.json"],
     "optcc: error: --algo: unknown algorithm 'rign'; did you mean ring? (known: {known})"),
    (["schedule", "--algo", "ring", "--p", "x", "-o", "x.json"], "optcc: error: --p: invalid int value: 'x' (see optcc schedule --help)"),
    (["schedule", "--p", "4", "-o", "x.json"], "optcc: error: --algo: required (see optcc schedule --help)"),
])
def test_usage_errors_are_one_line_naming_the_flag(argv, line, capsys, tmp_path, monkeypatch):
    from optcc_app.cli import main
    monkeypatch.chdir(tmp_path)
    from optcc.algorithms import algorithm_names
    assert main(argv) == 2
    assert capsys.readouterr().err.splitlines() == [line.format(known=", ".join(algorithm_names()))]
    assert not (tmp_path / "x.json").exists()


def test_version_is_the_distributions(capsys):
    from optcc_app.cli import main
    assert main(["--version"]) == 0
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert capsys.readouterr().out.strip() == f"optcc {project['version']}" == f"optcc {optcc.__version__}"


def test_the_console_script_and_python_dash_m_reach_the_app_package(tmp_path):
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["scripts"] == {"optcc": "optcc_app.cli:main"}
    for module in ("optcc", "optcc_app"):
        done = subprocess.run([sys.executable, "-m", module, "--version"], capture_output=True, text=True,
                              timeout=60, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
        assert (done.returncode, done.stdout.strip()) == (0, f"optcc {optcc.__version__}")


@pytest.mark.parametrize("argv, dest", [
    (["run", "--nproc", "2", "--schedule", "s.json", "--size", "4M"], "size"),
    (["probe", "--nproc", "2", "--size", "4M"], "size"),
    (["testbed", "--p", "3", "--straggler", "0:2", "--rate", "40", "--size", "4M"], "size"),
    (["schedule", "--algo", "ring", "--p", "4", "-o", "x.json", "--n", "4M"], "n"),
    (["bound", "--p", "4", "--n", "4M"], "n"),
    (["compare", "--p", "4", "--n", "4M"], "n"),
    (["time", "s.json", "--n", "4M"], "n"),
])
def test_every_size_flag_reads_k_m_g(argv, dest):
    """One size parser (optcc.sizes.parse_bytes) behind every size flag: --size 4M works for run too."""
    from optcc_app.cli import build_parser
    assert getattr(build_parser(argv).parse_args(argv), dest) == 4 << 20


def test_parse_bytes_units_and_errors():
    from optcc.errors import OptccError
    from optcc.sizes import parse_bytes
    assert [parse_bytes(t, "n") for t in ("8", "64K", "128M", "1G", "2MiB", "3kb", 5)] == \
        [8, 64 << 10, 128 << 20, 1 << 30, 2 << 20, 3 << 10, 5]
    for bad in ("0", "-4", "4Q", "", "1.5M", True):
        with pytest.raises(OptccError) as e:
            parse_bytes(bad, "n")
        assert e.value.field == "n"
