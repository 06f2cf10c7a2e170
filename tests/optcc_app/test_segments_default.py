"""One default of --segments (issue 25 item 10): every command that takes --segments has the same
default, DEFAULT_SEGMENTS ('auto'), read from its parser; its --help says the same text; the
docs state that value; and what the default implies (auto on every cluster and record) works."""
from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.segments import AUTO_DEFAULT_LATENCY_MODEL, choose_segments
from optcc_app.cli import build_parser, main
from optcc_app.commands._common import DEFAULT_SEGMENTS, SEGMENTS_HELP

ROOT = Path(__file__).resolve().parents[2]
# The commands that build a schedule: each must take --segments (testbed used its own flag).
BUILDERS = {"time", "compare", "bench", "schedule", "demo", "testbed"}


def _segments_actions() -> dict[str, argparse.Action]:
    """command -> its --segments action, from the full parser (every command registered)."""
    parser = build_parser([])
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    out = {}
    for name, command in sub.choices.items():
        for action in command._actions:
            if "--segments" in action.option_strings:
                out[name] = action
    return out


def test_every_command_has_the_one_default():
    actions = _segments_actions()
    assert BUILDERS <= set(actions), BUILDERS - set(actions)
    defaults = {name: str(a.default) for name, a in actions.items()}
    assert set(defaults.values()) == {DEFAULT_SEGMENTS}, defaults
    assert DEFAULT_SEGMENTS == "auto"
    for name, a in actions.items():
        assert a.option_strings == ["--segments", "-k"], name
        assert a.metavar == "K|auto", name


def test_every_help_says_the_same_default_text():
    parser = build_parser([])
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, action in _segments_actions().items():
        assert action.help.startswith(SEGMENTS_HELP), name
        assert action.help.endswith(f"(default {DEFAULT_SEGMENTS})"), name
        shown = " ".join(sub.choices[name].format_help().split())
        assert " ".join(SEGMENTS_HELP.split()) in shown, name
    assert f"the '{AUTO_DEFAULT_LATENCY_MODEL}' preset where it has none" in SEGMENTS_HELP


def _documented_defaults() -> dict[str, list[str]]:
    """doc -> every value a sentence "`--segments` defaults to `X`" gives it."""
    out = {}
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        found = re.findall(r"`--segments`[^.`]*? defaults to `([^`]+)`", doc.read_text(encoding="utf-8"))
        if found:
            out[doc.name] = found
    return out


def test_the_docs_state_the_default_the_parsers_have():
    documented = _documented_defaults()
    assert {"README.md", "latency.md"} <= set(documented), documented
    values = {v for vs in documented.values() for v in vs}
    assert values == {str(a.default) for a in _segments_actions().values()} == {DEFAULT_SEGMENTS}


def test_no_doc_states_another_numeric_default():
    stale = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for line in doc.read_text(encoding="utf-8").splitlines():
            if re.search(r"(--segments|-k)\b[^.]*\(default \d+\)", line):
                stale.append(f"{doc.name}: {line.strip()}")
    assert stale == []


def test_default_is_told_apart_from_a_typed_auto(tmp_path, capsys):
    """time FILE takes no --segments (the file has its k): the default passes, a typed one not."""
    path = str(tmp_path / "r.json")
    assert main(["schedule", "--algo", "ring", "--p", "4", "-o", path]) == 0
    capsys.readouterr()
    assert main(["time", path, "--json"]) == 0
    capsys.readouterr()
    assert main(["time", path, "--segments", "auto"]) == 2
    assert capsys.readouterr().err.startswith("optcc: error: --segments:")


def test_the_default_preset_is_said_only_when_auto_is_asked_for(tmp_path, capsys):
    path = str(tmp_path / "s.json")
    assert main(["schedule", "--algo", "optcc", "--p", "8", "--straggler", "0:2", "-o", path]) == 0
    quiet = capsys.readouterr().err
    assert main(["schedule", "--algo", "optcc", "--p", "8", "--straggler", "0:2", "-k", "auto", "-o", path]) == 0
    said = capsys.readouterr().err
    k = choose_segments("auto", "optcc", Cluster.build(8, stragglers={0: 2}), 2**30)[0]
    assert k > 1 and f"k={k}," in quiet and f"k={k}," in said
    assert "note" not in quiet
    assert f"under the '{AUTO_DEFAULT_LATENCY_MODEL}' latency model" in said


def test_auto_refuses_a_record_that_does_not_accept_the_cluster():
    """Before: optcc_rails on g = 1 was timed anyway (an internal ZeroDivisionError)."""
    with pytest.raises(OptccError) as e:
        choose_segments("auto", "optcc_rails", Cluster.build(8, stragglers={0: 2}), 2**30)
    assert e.value.field == "algo" and "does not accept this cluster" in e.value.message


def test_auto_without_a_closed_form_takes_k_1_and_says_why(capsys):
    """optcc_servers with NVLink only 2× a NIC at g = 4 has no closed form: nothing to minimise."""
    c = Cluster.build(16, 4, stragglers={i: 2 for i in range(4)}, bandwidth=5 * 10**10, nvlink_bandwidth=10**11)
    k, notes = choose_segments("auto", "optcc", c, 2**30)
    assert k == 1 and len(notes) == 1 and "nothing to minimise" in notes[0] and "NVLink" in notes[0]
    assert main(["compare", "--p", "16", "--g", "4", *[f"--straggler={i}:2" for i in range(4)],
                 "--nvlink-bandwidth", "1e11", "--no-prove", "--json"]) == 0
    assert '"segments": 1' in capsys.readouterr().out
