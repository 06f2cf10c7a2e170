"""The `$ optcc …` examples of README.md and docs/*.md stay true: each example that finishes in
seconds runs as its own process (in a fresh directory per document, in document order, so that
later examples find the files earlier ones wrote) and every line of its shown output must be in
what the command prints now, words and numbers alike. Whitespace is compared collapsed; only
wall-clock figures are masked (proof seconds, run milliseconds, the time/algbw/busbw/eff columns
of bench tables, torch_us and vs_torch too); lines starting with "…" or "..." are the document's own notes on what it left
out. `optcc demo` runs as `optcc demo --no-run` (its real-run rows are not compared), and every
file an example reads must be made by an earlier example of the same document."""
from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from doc_examples import examples, normal

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
# Not run here: torch processes, network namespaces, or minutes of work (their own tests cover them).
SLOW = {"testbed": "needs root and network namespaces",
        "paper-checks": "about two minutes (127.5 s CPU measured); tests/paper_checks/test_paper_checks.py "
                        "compares the example of docs/paper_checks.md with the report it computes anyway"}
NEEDS_TORCH = {"run", "bench"}
# Columns of a benchmark table that are measured wall-clock figures (masked in its rows).
VOLATILE_COLUMNS = {"time", "time_us", "algbw", "busbw", "eff", "torch_us", "vs_torch"}


def masked(lines: list[str]) -> list[str]:
    """`normal` of each line, and in a table whose header names VOLATILE_COLUMNS, those columns
    of its rows (the rows with as many fields as the header) replaced by <wall>."""
    out, volatile, width = [], set(), 0
    for line in lines:
        fields = line.split()
        header = fields[1:] if fields[:1] == ["#"] else fields
        if VOLATILE_COLUMNS & set(header) and "size" in header:
            volatile, width = {i for i, h in enumerate(header) if h in VOLATILE_COLUMNS}, len(header)
        elif volatile and len(fields) == width and not line.lstrip().startswith("#"):
            line = " ".join("<wall>" if i in volatile else f for i, f in enumerate(fields))
        out.append(normal(line))
    return out


def _break_flow0(directory: Path) -> None:
    """docs/verifier.md: "the same file with flows[0] (1→2, piece 6, an addition) turned into an overwrite"."""
    data = json.loads((directory / "optcc8.json").read_text())
    flow = data["flows"][0]
    assert (flow["src"], flow["dst"], flow["piece"], flow["op"]) == (1, 2, 6, "add")
    flow["op"] = "copy"
    (directory / "optcc8_bad.json").write_text(json.dumps(data))


def _drop_last_flow(directory: Path) -> None:
    """docs/gpu_runner.md: "broken.json is the optcc4.json … with its last flow … deleted by hand"."""
    data = json.loads((directory / "optcc4.json").read_text())
    data["flows"].pop()
    (directory / "broken.json").write_text(json.dumps(data))


# Files an example uses that the document makes by hand, not by an earlier `$ optcc` line.
SETUP = {"optcc8_bad.json": _break_flow0, "broken.json": _drop_last_flow}


def without_figures(argv: list[str]) -> tuple[list[str], str | None]:
    """`paper-checks --figures DIR` prints the same rows without the flag; rendering takes a
    minute. Returns the argv to run and the prefix of the shown lines it then does not print."""
    if argv[0] == "paper-checks" and "--figures" in argv:
        i = argv.index("--figures")
        return argv[:i] + argv[i + 2:], f"wrote {argv[i + 1]}/"
    return argv, None


def run_cli(argv: list[str], cwd: Path) -> str:
    """stdout and stderr of `optcc ARGV` in a fresh process (a reused Z3 context may pick another model)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-m", "optcc", *argv], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)
    return done.stdout + done.stderr


def runnable(path: Path):
    """(command, argv to run, shown lines) of each example this test runs."""
    for command, shown in examples(path):
        argv = shlex.split(command, comments=True)
        if argv[0] != "optcc" or argv[1] in SLOW:
            continue
        if argv[1] in NEEDS_TORCH and importlib.util.find_spec("torch") is None:
            continue
        run = argv[1:] + (["--no-run"] if argv[1] == "demo" and "--no-run" not in argv else [])
        yield command, run, shown


def outside_the_repo(argv: list[str]) -> list[str]:
    """Arguments naming files outside the clone (../…): an example must make its own inputs or
    use files the repository holds, so these fail the test rather than skip the example."""
    return [arg for arg in argv if arg.startswith("../") or arg.startswith("/")]


def mismatches(path: Path, workdir: Path) -> list[str]:
    """The shown lines (every non-empty one, words and numbers; wall-clock figures masked) that the
    document's examples no longer print."""
    wrong = []
    for command, shown in examples(path):          # `$ cat FILE` shows a file the reader writes by hand
        argv = shlex.split(command, comments=True)
        if argv[0] == "cat" and len(argv) == 2 and not (workdir / argv[1]).exists():
            (workdir / argv[1]).write_text("\n".join(shown) + "\n", encoding="utf-8")
    for command, argv, shown in runnable(path):
        outside = outside_the_repo(argv)
        if outside:
            wrong.append(f"{command}: reads {', '.join(outside)}, outside the repository")
            continue
        for name, make in SETUP.items():
            if name in argv and not (workdir / name).exists():
                make(workdir)
        argv, not_written = without_figures(argv)
        printed = set(masked(run_cli(argv, workdir).splitlines()))
        real_run = argv[0] == "demo" and "--no-run" not in shlex.split(command)
        for line, norm in zip(shown, masked(shown)):
            if not line.strip() or line.lstrip().startswith(("…", "...")):
                continue
            if not_written and line.startswith(not_written):
                continue
            if real_run and line.startswith("real run"):      # what --no-run leaves out
                continue
            if norm not in printed:
                wrong.append(f"$ {command}\n    doc:  {line.strip()}")
    return wrong


@pytest.mark.parametrize("path", [p for p in DOCS if any(runnable(p))], ids=lambda p: p.name)
def test_doc_examples_print_what_the_doc_shows(path, tmp_path):
    wrong = mismatches(path, tmp_path)
    assert not wrong, f"{path.name}: lines the command no longer prints:\n" + "\n".join(wrong)


def test_a_wrong_number_in_a_doc_is_caught(tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text("```\n$ optcc bound --p 8 --straggler 0:2\n"
                   "bound / T0 = 1.1429; binding term: cut\n"      # true: 2 / (7/4)
                   "bound / T0 = 1.2000; binding term: cut\n"      # wrong
                   "… (a note, not output: 3 lines left out)\n```\n", encoding="utf-8")
    (tmp_path / "run").mkdir()
    assert mismatches(doc, tmp_path / "run") == [
        "$ optcc bound --p 8 --straggler 0:2\n    doc:  bound / T0 = 1.2000; binding term: cut"]


def test_the_examples_are_found():
    """The parser sees the README's examples and the slow ones are the only ones left out."""
    readme = [c for c, _ in examples(ROOT / "README.md")]
    assert "optcc demo" in readme and any(c.startswith("optcc compare --p 8") for c in readme)
    run = [c for c, _, _ in runnable(ROOT / "README.md")]
    assert "optcc demo" in run and any(c.startswith("optcc run") for c in run)
    assert len(run) == len([c for c in readme if c.split()[1] not in SLOW])


# Flags whose value is a file the command writes (every other .json/.xml argument is read).
WRITES = {"-o", "--output", "--out", "--plot"}
WRITES_BY_COMMAND = {"verify": {"--certificate"}, "prove-all": {"--certificate"}}
FILE_SUFFIXES = (".json", ".xml")


def _words(command: str) -> list[str]:
    """The command's words without leading VAR=value assignments and sudo."""
    argv = shlex.split(command, comments=True)
    while argv and (re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", argv[0]) or argv[0] == "sudo"):
        argv = argv[1:]
    return [a for a in argv if a != "&"]


def unmade_files(path: Path) -> list[str]:
    """Files an example reads that no earlier example of the same document makes: each example
    must be runnable in a fresh folder by running the document's commands in order."""
    made = set(SETUP)
    missing = []
    for command, shown in examples(path):
        argv = _words(command)
        if not argv:
            continue
        if argv[0] == "cat" and len(argv) == 2:      # the document shows the file's whole text
            made.add(argv[1])
            continue
        sub = argv[1] if argv[0] == "optcc" and len(argv) > 1 else ""
        writes = WRITES | WRITES_BY_COMMAND.get(sub, set())
        for i, arg in enumerate(argv):
            if not arg.endswith(FILE_SUFFIXES) or arg.startswith("../shared/"):
                continue
            if i and argv[i - 1] in writes:
                made.add(arg)
            elif arg not in made:
                missing.append(f"{path.name}: $ {command}\n    reads {arg}, which no earlier example makes")
    return missing


def test_every_example_reads_only_files_an_earlier_example_makes():
    assert [m for doc in DOCS for m in unmade_files(doc)] == []


def test_an_example_reading_an_unmade_file_is_caught(tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text("```\n$ optcc schedule --algo ring --p 4 -o r.json\n$ optcc verify r.json --certificate r.cert.json\n"
                   "$ torchrun --nproc-per-node 4 -m gpu_runner --schedule r.json --certificate r.cert.json\n"
                   "$ optcc run --nproc 5 --schedule oc5.json\n```\n", encoding="utf-8")
    assert unmade_files(doc) == ["doc.md: $ optcc run --nproc 5 --schedule oc5.json\n"
                                 "    reads oc5.json, which no earlier example makes"]
