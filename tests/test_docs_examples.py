"""The `$ optcc …` examples of README.md and docs/*.md stay true: each fast example runs as its
own process (in a fresh directory per document, in document order, so that later examples find
the files earlier ones wrote) and every line of the shown output that carries a number must be
in what the command prints now. Whitespace is compared collapsed; wall-clock times are masked;
lines starting with "…" are the document's own notes on what it left out."""
from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
# Not run here: torch processes, network namespaces, or minutes of work (their own tests cover them).
SLOW = {"demo": "builds, proves and runs p = 16 with k = 64 on gloo", "run": "needs torch processes",
        "bench": "needs torch processes", "testbed": "needs root and network namespaces",
        "paper-checks": "about two minutes (the g = 8 Figure 21 row's auto k); tests/test_paper_checks.py "
                        "compares the example of docs/paper_checks.md with the report it computes anyway"}
VOLATILE = [re.compile(r"\b(proved|refuted)( \([^)]*\))? in [0-9.]+ s", re.I),   # wall-clock seconds
            re.compile(r"\(\d+(\.\d+)? s\)$")]


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
    for pattern in VOLATILE:
        line = pattern.sub("<seconds>", line)
    return " ".join(line.split())


def _break_flow0(directory: Path) -> None:
    """docs/verifier.md: "the same file with flows[0] (1→2, piece 6, an addition) turned into an overwrite"."""
    data = json.loads((directory / "optcc8.json").read_text())
    flow = data["flows"][0]
    assert (flow["src"], flow["dst"], flow["piece"], flow["op"]) == (1, 2, 6, "add")
    flow["op"] = "copy"
    (directory / "optcc8_bad.json").write_text(json.dumps(data))


# Files an example uses that the document makes by hand, not by an earlier `$ optcc` line.
SETUP = {"optcc8_bad.json": _break_flow0}


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
    for command, shown in examples(path):
        argv = shlex.split(command, comments=True)
        if argv[0] == "optcc" and argv[1] not in SLOW:
            yield command, argv[1:], shown


SHARED = ROOT.parent / "shared"


def shared_reachable(argv: list[str], workdir: Path) -> bool:
    """Arguments under ../shared/ name files beside the clone (as in CI): link workdir/../shared to
    them so the example runs as written; False when such a file is absent (the example is skipped)."""
    wanted = [arg[len("../shared/"):] for arg in argv if arg.startswith("../shared/")]
    if not wanted:
        return True
    if not all((SHARED / rel).exists() for rel in wanted):
        return False
    link = workdir.parent / "shared"
    if not link.exists():
        link.symlink_to(SHARED, target_is_directory=True)
    return True


def mismatches(path: Path, workdir: Path) -> list[str]:
    """The shown lines with a number that the document's examples no longer print."""
    wrong = []
    for command, shown in examples(path):          # `$ cat FILE` shows a file the reader writes by hand
        argv = shlex.split(command, comments=True)
        if argv[0] == "cat" and len(argv) == 2 and not (workdir / argv[1]).exists():
            (workdir / argv[1]).write_text("\n".join(shown) + "\n", encoding="utf-8")
    for command, argv, shown in runnable(path):
        if not shared_reachable(argv, workdir):
            continue
        for name, make in SETUP.items():
            if name in argv and not (workdir / name).exists():
                make(workdir)
        argv, not_written = without_figures(argv)
        printed = {normal(line) for line in run_cli(argv, workdir).splitlines()}
        for line in shown:
            if not re.search(r"\d", line) or line.lstrip().startswith("…"):
                continue
            if not_written and line.startswith(not_written):
                continue
            if normal(line) not in printed:
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
    assert "optcc demo" not in run and len(run) == len([c for c in readme if c.split()[1] not in SLOW])
