"""Both forms of a schedule implement one protocol (optcc.schedule.ScheduleForm), and every run
path finds how to admit a form in one table (gpu_runner.admission), never by isinstance."""
from __future__ import annotations

import ast
import pathlib

import pytest

from gpu_runner.admission import ADMISSIONS, FlowListAdmission, GeneratedAdmission, admission_of
from optcc.algorithms import build_schedule
from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.generated import GeneratedSchedule, load_any
from optcc.schedule import Schedule
from optcc_app.commands import time as time_command
from optcc_app.commands import verify as verify_command

ROOT = pathlib.Path(__file__).resolve().parents[2]
FORMS = (Schedule, GeneratedSchedule)


def _both(tmp_path):
    cluster = Cluster.build(5, stragglers={0: 2})
    flows, gen = build_schedule("optcc", cluster, 2), GeneratedSchedule.of("optcc", cluster, 2)
    for name, s in (("f.json", flows), ("g.json", gen)):
        s.save(str(tmp_path / name))
    return flows, gen


def test_each_form_has_one_row_in_every_table_that_dispatches_on_it():
    forms = {cls.form for cls in FORMS}
    assert forms == {"flows", "generated"}
    assert set(ADMISSIONS) == forms
    assert set(verify_command._BY_FORM) == forms and set(time_command._TIMED_BY_FORM) == forms


def test_files_load_as_their_form_and_find_their_row(tmp_path):
    flows, gen = _both(tmp_path)
    f, g = load_any(str(tmp_path / "f.json")), load_any(str(tmp_path / "g.json"))
    assert (f.form, g.form) == ("flows", "generated")
    assert isinstance(admission_of(f), FlowListAdmission) and isinstance(admission_of(g), GeneratedAdmission)
    assert f.flow_list() is f
    assert g.flow_list().sha256() == flows.sha256()           # the generated form denotes the same flows
    assert g.sha256() != f.sha256()                           # but is its own identity (its parameters)


@pytest.mark.parametrize("thing", [None, {"format": "optcc-schedule/1"}, "s.json", 3])
def test_anything_else_is_refused_naming_the_schedule(thing):
    with pytest.raises(OptccError) as e:
        admission_of(thing)
    assert e.value.field == "schedule" and type(thing).__name__ in e.value.message


def test_a_generated_schedule_takes_no_certificate_and_no_step_runner_at_every_door(tmp_path):
    _, gen = _both(tmp_path)
    row = admission_of(gen)
    with pytest.raises(OptccError) as e:
        row.before_launch(gen, str(tmp_path / "c.json"), None, False)
    assert e.value.field == "certificate"
    for door in (lambda: row.runner_note(gen, "step"), lambda: row.here(gen, None, None, False, "step"),
                 lambda: row.attest(gen, str(tmp_path / "a.json"), "graph", None, False, None)):
        with pytest.raises(OptccError) as e:
            door()
        assert e.value.field == "runner" and "streaming runners" in e.value.message
    assert not (tmp_path / "a.json").exists()                 # nothing half-written


def _isinstance_of_a_form(path: pathlib.Path) -> list[int]:
    lines = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance" and len(node.args) == 2:
            names = {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)}
            names |= {n.attr for n in ast.walk(node.args[1]) if isinstance(n, ast.Attribute)}
            if names & {"GeneratedSchedule"}:
                lines.append(node.lineno)
    return lines


def test_no_run_path_or_command_tells_the_forms_apart_by_isinstance():
    found = {str(p.relative_to(ROOT)): lines for pkg in ("gpu_runner", "optcc_app", "optcc")
             for p in sorted((ROOT / pkg).rglob("*.py")) if (lines := _isinstance_of_a_form(p))}
    assert found == {}
