"""Schedule: exact JSON round trip and validation that names the first bad field by its path."""
import json
from fractions import Fraction

import pytest

from optcc.algorithms.ring.build import ring_allreduce
from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.schedule import Flow, LocalOp, Schedule


def small_schedule():
    c = Cluster.build(3, stragglers={0: "8/7"})
    flows = [Flow(1, 0, 0, "add", Fraction(0)), Flow(2, 0, 0, "add", Fraction(8, 21), rate=Fraction(1, 2)),
             Flow(0, 1, 0, "copy", Fraction(3)), Flow(0, 2, 0, "add", Fraction(3), coef=-2)]
    return Schedule(c, [Fraction(1)], flows, [LocalOp(2, 0, Fraction(3), 3)], meta={"algorithm": "hand"})


@pytest.mark.parametrize("make", [small_schedule, lambda: ring_allreduce(Cluster.build(5, stragglers={2: "3/2"}), 3)])
def test_round_trip_is_exact(make, tmp_path):
    s = make()
    path = tmp_path / "s.json"
    s.save(str(path))
    back = Schedule.load(str(path))
    assert back.to_json() == s.to_json()
    assert back.flows == s.flows and back.pieces == s.pieces and back.local_ops == s.local_ops
    assert back.sha256() == s.sha256()


def test_fractions_are_written_as_exact_strings(tmp_path):
    path = tmp_path / "s.json"
    small_schedule().save(str(path))
    flow = json.loads(path.read_text())["flows"][1]
    assert flow["start"] == "8/21" and flow["rate"] == "1/2"


def test_flows_are_a_top_level_list():
    data = small_schedule().to_json()
    assert data["format"] == "optcc-schedule/1"
    assert isinstance(data["flows"], list) and data["flows"][0] == {"src": 1, "dst": 0, "piece": 0, "op": "add", "start": 0}


def _mutated(path_and_value):
    data = small_schedule().to_json()
    target = data
    *keys, last = path_and_value[0]
    for k in keys:
        target = target[k]
    if path_and_value[1] is KeyError:
        del target[last]
    else:
        target[last] = path_and_value[1]
    return data


@pytest.mark.parametrize("change, field", [
    ((("format",), "optcc-schedule/0"), "format"),
    ((("flows", 2, "dst"), 7), "flows[2].dst"),
    ((("flows", 2, "dst"), 0), "flows[2].dst"),
    ((("flows", 1, "piece"), 1), "flows[1].piece"),
    ((("flows", 1, "op"), "mul"), "flows[1].op"),
    ((("flows", 1, "start"), "-1/2"), "flows[1].start"),
    ((("flows", 1, "start"), "soon"), "flows[1].start"),
    ((("flows", 1, "rate"), "3/2"), "flows[1].rate"),
    ((("flows", 1, "link"), "nvlink"), "flows[1].link"),
    ((("flows", 0, "src"), KeyError), "flows[0].src"),
    ((("flows", 0, "speed"), 3), "flows[0].speed"),
    ((("pieces",), ["1/2"]), "pieces"),
    ((("pieces",), ["0"]), "pieces[0]"),
    ((("cluster", "p"), 1), "cluster.p"),
    ((("local_ops", 0, "coef"), 0), "local_ops[0].coef"),
])
def test_loading_reports_first_bad_field(change, field):
    with pytest.raises(OptccError) as err:
        Schedule.from_json(_mutated(change))
    assert err.value.field == field


def test_save_leaves_nothing_half_written(tmp_path):
    s = small_schedule()
    s.flows.append(object())  # not serializable: the write fails midway
    with pytest.raises(AttributeError):
        s.save(str(tmp_path / "s.json"))
    assert list(tmp_path.iterdir()) == []
