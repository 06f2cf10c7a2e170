"""Bad generated inputs are refused when the file is read, exit 2 naming the field, in every
command a user types (`optcc time`, `optcc verify`, `optcc run`), never a traceback or a rank
that dies later."""
from __future__ import annotations

import json

import pytest

from optcc.cluster import Cluster
from optcc.generated import GeneratedSchedule
from optcc_app.cli import main

HUGE = "1000000000000000000000000000001/1000000000000000000000000000000"


def _file(tmp_path, **changes):
    data = GeneratedSchedule.of("optcc", Cluster.build(5, stragglers={0: 3}), 2).to_json()
    data.update(changes)
    path = tmp_path / "g.json"
    path.write_text(json.dumps(data))
    return str(path)


COMMANDS = [["time"], ["verify"], ["run", "--nproc", "5", "--generated-check", "per-rank", "--schedule"]]


@pytest.mark.parametrize("algo", [[], {}, ["optcc"], {"optcc": 1}])
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_an_algo_that_is_not_a_name_exits_2(tmp_path, capsys, algo, command):
    path = _file(tmp_path, algo=algo)
    assert main([*command, path]) == 2
    err = capsys.readouterr().err
    assert err.startswith("optcc: error: schedule.algo: unknown construction"), err


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_an_ell_beyond_the_start_grid_is_refused_at_load(tmp_path, capsys, command):
    """ℓ = (10³⁰ + 1)/10³⁰ is a valid real, but a rank's starts would not fit int64: refused at
    load, before any proof or rank, instead of every rank dying with OverflowError."""
    cluster = GeneratedSchedule.of("optcc", Cluster.build(5, stragglers={0: 3}), 2).to_json()["cluster"]
    cluster["stragglers"] = [{"rank": 0, "ell": HUGE}]
    path = _file(tmp_path, cluster=cluster)
    assert main([*command, path]) == 2
    err = capsys.readouterr().err
    assert err.startswith("optcc: error: schedule.cluster: ℓ = " + HUGE) and "beyond int64" in err, err


def test_schedule_refuses_to_write_such_a_file(tmp_path, capsys):
    out = tmp_path / "g.json"
    assert main(["schedule", "--algo", "ring", "--p", "5", "--straggler", f"0:{HUGE}", "--form", "generated",
                 "-o", str(out)]) == 2
    assert "beyond int64" in capsys.readouterr().err and not out.exists()


@pytest.fixture(scope="module")
def optcc_certificate(tmp_path_factory):
    """A genuine OptCC generator certificate, written by the documented command once."""
    cert = tmp_path_factory.mktemp("cert") / "c.json"
    assert main(["prove-all", "--algo", "optcc", "--certificate", str(cert)]) == 0
    return cert


def test_a_generator_certificate_with_a_bad_algo_is_refused_not_a_traceback(tmp_path, capsys, optcc_certificate):
    from optcc.algorithms import build_schedule
    sched = tmp_path / "s.json"
    build_schedule("optcc", Cluster.build(5, stragglers={0: 3}), 2).save(str(sched))
    cert = optcc_certificate
    for algo in ([], {}):
        data = json.loads(cert.read_text())
        data["algo"] = algo
        bad = tmp_path / "bad.json"
        bad.write_text(json.dumps(data))
        assert main(["run", "--nproc", "5", "--schedule", str(sched), "--certificate", str(bad)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("optcc: error: --certificate:") and f"certificate is for {algo!r}" in err, err
        from verifier.parametric.certificate import generator_certificate_check
        from optcc.schedule import Schedule
        ok, why = generator_certificate_check(Schedule.load(str(sched)), str(bad))
        assert not ok and f"certificate is for {algo!r}" in why


def test_a_certificate_whose_range_text_was_edited_is_refused(tmp_path, optcc_certificate):
    """The note printed on acceptance is what the check established (the obligations' own range),
    never the file's text; a file that claims another range is refused."""
    import shutil

    from optcc.algorithms import build_schedule
    from verifier.parametric.certificate import generator_certificate_check
    sched = build_schedule("optcc", Cluster.build(5, stragglers={0: 3}), 2)
    cert = tmp_path / "c.json"
    shutil.copy(optcc_certificate, cert)
    ok, note = generator_certificate_check(sched, str(cert))
    from verifier.parametric.optcc import FOR_ALL
    assert ok and f"re-proved for {FOR_ALL};" in note
    data = json.loads(cert.read_text())
    data["for_all"] = "all p ≥ 1 and every number of stragglers"
    cert.write_text(json.dumps(data))
    ok, why = generator_certificate_check(sched, str(cert))
    assert not ok and "the certificate says it covers 'all p ≥ 1 and every number of stragglers'" in why
