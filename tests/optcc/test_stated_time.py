"""`time` means something (issue 22 item 2): every generator states its closed-form slot time in
the schedule (top-level "slot_time"), `optcc verify` proves the schedule ends exactly then, a
schedule 400× slower than its formula is refuted, and one stating no time shows "not stated"."""
from __future__ import annotations

import json
from fractions import Fraction as F

import pytest

from optcc.algorithms.single.build import optcc_slot_time
from optcc.cluster import Cluster


def _schedule(run_optcc, path, *args):
    res = run_optcc("schedule", *args, "-o", path)
    assert res.returncode == 0, res.stderr
    return json.loads(open(path).read())


def _verify(run_optcc, path, *extra):
    return run_optcc("verify", path, *extra)


def test_the_file_states_the_closed_form_and_verify_proves_it(run_optcc, tmp_path):
    path = str(tmp_path / "s.json")
    data = _schedule(run_optcc, path, "--algo", "optcc", "--p", "8", "--straggler", "0:2", "--segments", "4")
    closed = optcc_slot_time(Cluster.build(8, stragglers={0: 2}), 4)
    assert F(data["slot_time"]) == closed == F(5, 2)
    res = _verify(run_optcc, path)
    assert res.returncode == 0
    rows = {line.split()[0]: line.split()[1] for line in res.stdout.splitlines()[1:8] if line.split()}
    assert rows["time"] == "proved"
    assert "time: ends at 5/2 n/B, states 5/2 n/B, lower bound 2 n/B" in res.stdout


def test_a_schedule_400_times_slower_than_its_formula_is_refuted(run_optcc, tmp_path):
    path = str(tmp_path / "s.json")
    data = _schedule(run_optcc, path, "--algo", "ring", "--p", "4", "--segments", "2")
    for flow in data["flows"]:                      # the same flows, every start 400× later: still the sum
        flow["start"] = str(F(flow["start"]) * 400)
    slow = str(tmp_path / "slow.json")
    open(slow, "w").write(json.dumps(data))
    res = _verify(run_optcc, slow, "--json")
    out = json.loads(res.stdout)
    assert res.returncode == 1 and out["proved"] is False
    assert out["properties"]["sum"] is True and out["properties"]["time"] is False
    assert out["counterexample"]["message"] == "the schedule states slot time 3/2 n/B but ends at 4401/8 n/B"
    del data["slot_time"]                           # stating nothing: not refuted, never proved
    open(slow, "w").write(json.dumps(data))
    res = _verify(run_optcc, slow, "--json")
    out = json.loads(res.stdout)
    assert res.returncode == 0 and "time" not in out["properties"] and out["not_stated"] == ["time"]
    assert out["facts"]["stated_slot_time"] == "not stated" and out["facts"]["finish"] == "4401/8"
    table = _verify(run_optcc, slow).stdout
    assert "time not stated (reported, never proved)" in " ".join(table.split())
    assert "time: ends at 4401/8 n/B; the schedule states no slot time" in table


def test_the_old_meta_slot_time_is_read_as_the_stated_time(run_optcc, tmp_path):
    path = str(tmp_path / "s.json")
    data = _schedule(run_optcc, path, "--algo", "ring", "--p", "3", "--segments", "1")
    data["meta"]["slot_time"] = data.pop("slot_time")
    open(path, "w").write(json.dumps(data))
    assert json.loads(_verify(run_optcc, path, "--json").stdout)["properties"]["time"] is True
    data["meta"]["slot_time"] = "1"
    open(path, "w").write(json.dumps(data))
    out = json.loads(_verify(run_optcc, path, "--json").stdout)
    assert out["properties"]["time"] is False and "states slot time 1 n/B but ends at 4/3" in out["counterexample"]["message"]
    data["slot_time"] = "4/3"                       # both places, disagreeing: a clear error naming the field
    open(path, "w").write(json.dumps(data))
    res = _verify(run_optcc, path)
    assert res.returncode == 2 and res.stderr.strip() == "optcc: error: meta.slot_time: states 1 but slot_time states 4/3"


@pytest.mark.parametrize("value", ["0", "-1", "true", '"x"'])
def test_a_bad_stated_time_exits_2_naming_the_field(run_optcc, tmp_path, value):
    path = str(tmp_path / "s.json")
    data = _schedule(run_optcc, path, "--algo", "ring", "--p", "3")
    text = json.dumps(data).replace(f'"slot_time": "{data["slot_time"]}"', f'"slot_time": {value}')
    open(path, "w").write(text)
    res = _verify(run_optcc, path)
    assert res.returncode == 2 and res.stderr.startswith("optcc: error: slot_time: "), res.stderr


def test_the_lp_schedules_state_no_time(run_optcc, tmp_path):
    path = str(tmp_path / "lp.json")
    data = _schedule(run_optcc, path, "--algo", "lp_shared", "--p", "4", "--straggler", "0:3/2", "--segments", "2")
    assert "slot_time" not in data
    out = json.loads(_verify(run_optcc, path, "--json").stdout)
    assert out["proved"] is True and out["not_stated"] == ["time"]
