"""The one algorithm table (optcc/algorithms/registry.py): every record is complete, every
algorithm can be scheduled through the CLI, and a throwaway record registered for one test
reaches every command (schedule incl. --segments auto, time, verify, simulate, compare)."""
import json
import math
import pathlib
from fractions import Fraction as F

import pytest

from optcc import latency_counts as LC
from optcc.algorithms import baselines as BL
from optcc.algorithms import build_schedule, registry
from optcc.algorithms.single.build import optcc_allreduce, optcc_slot_time
from optcc.algorithms.ring.build import ring_allreduce
from optcc_app.cli import main
from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.model_time import model_time, served_by
from optcc.latency import units as latency_units
from optcc.segments import auto_segments, knee_segments
from optcc.timing import slot_time
import lp_models.algorithms  # noqa: F401,E402  (registers lp_shared and lp_exclusive, as the CLI does)

ROOT = pathlib.Path(__file__).resolve().parents[2]
N = 2**30


def _only_p5(cluster):
    if cluster.p != 5:
        return False, "covers p = 5 only"
    return registry.construction("optcc_single").accepts(cluster)


@pytest.fixture
def p5_only():
    """A copy of the single-straggler construction that accepts only p = 5, tried before
    optcc_single; its counts record every call (so the test sees model_time read them)."""
    calls = []

    def overheads(c, k):
        calls.append(("A", c.p, k))
        return LC.single_overheads(c, k)

    def latencies(c, k):
        calls.append(("B", c.p, k))
        return LC.single_latencies(c, k)

    record = registry.Algorithm("optcc_single_p5", optcc_allreduce, optcc_slot_time, _only_p5,
                                registry.Latency(overheads, latencies, lambda c: F(3, 8), "derived: a test copy"),
                                "derived: a test copy of optcc_single", construction=True)
    with registry.registered(record, before="optcc_single"):
        yield calls
    assert "optcc_single_p5" not in registry.names()


@pytest.fixture
def uncounted_ring():
    """A segmented baseline without latency counts, shown in compare."""
    record = registry.Algorithm("ring_uncounted", ring_allreduce, lambda c, k: BL.flat_ring_slot_time(c),
                                lambda c: (True, "") if c.g == 1 else (False, "covers g = 1"),
                                "none derived: a test record", "derived: a test copy of the ring", compare=True)
    with registry.registered(record):
        yield record


def _json(capsys):
    return json.loads(capsys.readouterr().out)


def test_throwaway_construction_reaches_every_command(p5_only, tmp_path, capsys):
    path = str(tmp_path / "s.json")
    flags = ["--p", "5", "--straggler", "0:2", "--latency-model", "nccl"]
    cluster = Cluster.build(5, 1, {0: 2}, latency_model="nccl")
    assert served_by("optcc", cluster) == "optcc_single_p5"
    assert main(["schedule", "--algo", "optcc", *flags, "--segments", "auto", "-o", path]) == 0
    assert p5_only and all(p == 5 for _, p, _ in p5_only)           # model_time read its counts
    k, mt = auto_segments("optcc", cluster, N)
    assert f"k={k}," in capsys.readouterr().err
    # its knee 3/8 (half optcc_single's) bounds the k search: Li + L ≤ 3/8/(k·p), halved with o > 0
    o, li, lat = latency_units(cluster, N)
    assert knee_segments(cluster, N) == max(1, min(1024, math.floor(F(3, 8) / ((2 if o else 1) * (li + lat) * 5)))) >= k
    assert mt.valid and mt.latencies == 2 * 4 + 4 * k and mt.overheads == 2 * 4 * (k + 1)
    assert main(["time", path, "--json"]) == 0
    assert F(_json(capsys)["slot_time"]) == F(float(optcc_slot_time(cluster, k)))
    assert main(["verify", path, "--json"]) == 0 and _json(capsys)["proved"] is True
    assert main(["simulate", path, "--json"]) == 0 and _json(capsys)["correct"] is True
    assert main(["compare", *flags, "-k", "2", "--no-prove", "--json"]) == 0
    assert _json(capsys)["algorithms"]["optcc"]["source"] == "schedule (optcc_single_p5)"
    # by name: its accepts refuses p = 6 with the reason, naming --algo
    assert main(["schedule", "--algo", "optcc_single_p5", "--p", "6", "--straggler", "0:2", "-o", path]) == 2
    assert "--algo" in (err := capsys.readouterr().err) and "covers p = 5 only" in err
    # p = 6 is optcc_single's again
    assert served_by("optcc", Cluster.build(6, 1, {0: 2})) == "optcc_single"


def test_record_without_counts_makes_auto_take_k_1_and_say_why(uncounted_ring, tmp_path, capsys):
    """auto (the default --segments) has nothing to minimise without latency counts: k = 1, with
    a note naming the record's reason, given or not."""
    path = str(tmp_path / "s.json")
    flags = ["--p", "4", "--straggler", "1:3/2"]
    for given in (["--segments", "auto"], []):
        assert main(["schedule", "--algo", "ring_uncounted", *flags, *given, "-o", path]) == 0
        err = capsys.readouterr().err
        assert "--segments auto: nothing to minimise" in err and "none derived: a test record" in err, err
        assert "k=1," in err and "internal error" not in err
    with pytest.raises(OptccError) as e:
        model_time("ring_uncounted", Cluster.build(4), 1, N)
    assert e.value.field == "segments"
    assert main(["schedule", "--algo", "ring_uncounted", *flags, "-k", "2", "-o", path]) == 0
    capsys.readouterr()
    assert main(["time", path, "--json"]) == 0 and F(_json(capsys)["slot_time"]) == F(float(F(3, 2) * F(6, 4)))
    assert main(["verify", path, "--json"]) == 0 and _json(capsys)["proved"] is True
    assert main(["simulate", path, "--json"]) == 0 and _json(capsys)["correct"] is True
    assert main(["compare", *flags, "-k", "2", "--no-prove", "--json"]) == 0
    row = _json(capsys)["algorithms"]["ring_uncounted"]
    assert row["time"] == float(F(3, 2) * F(6, 4)) and row["source"] == "schedule"
    assert main(["compare", "--p", "4", "--g", "2", "--no-prove", "--json"]) == 0
    assert _json(capsys)["algorithms"]["ring_uncounted"]["source"] == "not available: covers g = 1"


def test_unsegmented_record_auto_is_one_and_k_is_refused(tmp_path, capsys):
    path = str(tmp_path / "s.json")
    flags = ["--p", "8", "--g", "2", "--straggler", "0:2", "--straggler", "1:2"]
    assert main(["schedule", "--algo", "hierarchical_ring", *flags, "--segments", "auto", "-o", path]) == 0
    assert "k=1," in capsys.readouterr().err
    assert main(["schedule", "--algo", "r2ccl", *flags, "-k", "2", "-o", path]) == 2
    assert "--segments" in capsys.readouterr().err


G1 = ["--p", "5", "--straggler", "0:3/2"]
G2 = ["--p", "8", "--g", "2", "--straggler", "0:2", "--straggler", "1:2"]
CASES = {"optcc": G1, "optcc_servers": G2, "few_servers": [*G2, "--latency-model", "simai"], "optcc_rails": ["--p", "8", "--g", "2", "--straggler", "0:2"],
         "all_slow": ["--p", "4", *(f for r in range(4) for f in ("--straggler", f"{r}:{r + 2}"))],
         "optcc_multi": ["--p", "5", "--straggler", "0:2", "--straggler", "1:3/2"], "optcc_single": G1,
         "ring": G1, "hierarchical_ring": G2, "r2ccl": G1, "direct": G1, "lp_shared": G1, "lp_exclusive": G1}


def test_every_record_is_complete_and_cited():
    assert set(registry.names()) == set(CASES)
    for a in registry.table():
        assert a.choose is not None or a.source.startswith(("paper: ", "derived: ")), a.name
        assert isinstance(a.latency, registry.Latency) or a.latency.startswith("none derived: ") \
            or a.choose is not None, a.name
        if isinstance(a.latency, registry.Latency):
            assert a.latency.source.startswith("derived: "), a.name


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_record_schedules_and_verifies_through_the_cli(name, tmp_path, capsys):
    """--algo takes every name of the table; the built schedule's slot time is the record's."""
    path = str(tmp_path / "s.json")
    k = 2 if registry.algorithm(name).segmented else 1
    assert main(["schedule", "--algo", name, *CASES[name], "-k", str(k), "-o", path]) == 0
    capsys.readouterr()
    assert main(["verify", path, "--json"]) == 0
    proof = _json(capsys)
    assert proof["proved"] is True
    from optcc.schedule import Schedule
    s = Schedule.load(path)
    record = registry.algorithm(name)
    assert slot_time(s) == record.slot_time(s.cluster, k)
    assert s.to_json() == build_schedule(name, s.cluster, k).to_json()
    if record.closed_form:               # the file states the closed form, and `time` proves it
        assert s.stated_slot_time == record.slot_time(s.cluster, k)
        assert proof["properties"]["time"] is True and proof["not_stated"] == []
    else:                                # the LP schedules: their time is no formula
        assert s.stated_slot_time is None and "slot_time" not in s.to_json()
        assert "time" not in proof["properties"] and proof["not_stated"] == ["time"]


def test_register_refuses_a_taken_name_and_unknown_names_name_algo():
    with pytest.raises(OptccError) as e:
        registry.register(registry.algorithm("ring"))
    assert e.value.field == "algo"
    with pytest.raises(OptccError) as e:
        build_schedule("quantum", Cluster.build(4))
    assert e.value.field == "algo" and "optcc_single" in e.value.message and "r2ccl" in e.value.message


def test_model_time_has_no_second_set_of_names():
    """The counts are read from the table: no per-construction branches in model_time."""
    for module in ("optcc/model_time.py", "optcc/segments.py"):
        text = (ROOT / module).read_text(encoding="utf-8")
        assert "kind ==" not in text and '"rails"' not in text and '"flat_ring"' not in text, module
