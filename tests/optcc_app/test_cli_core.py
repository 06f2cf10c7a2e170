"""CLI: schedule/time/simulate end to end, --json twins, bad input exits 2 naming the field."""
import json

import pytest

from optcc_app.cli import main


def test_schedule_time_simulate(tmp_path, capsys):
    path = str(tmp_path / "ring.json")
    assert main(["schedule", "--algo", "ring", "--p", "5", "--straggler", "0:2", "-k", "2", "-o", path]) == 0
    capsys.readouterr()
    assert main(["time", path, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["slot_time"] == pytest.approx(3.2) and out["t0"] == pytest.approx(1.6)
    assert out["lower_bound"] == pytest.approx(2.0) and out["ratio_to_lower_bound"] == pytest.approx(1.6)
    assert out["seconds"]["slot"] == pytest.approx(3.2 * 2**30 / 50e9)
    assert main(["simulate", path, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"correct": True, "first_wrong": None}


@pytest.mark.parametrize("argv, field", [
    (["--p", "1"], "--p"),
    (["--p", "4", "--straggler", "0:0.5"], "--straggler"),
    (["--p", "4", "--straggler", "4:2"], "--straggler"),
    (["--p", "4", "--straggler", "0:nan"], "--straggler"),
    (["--p", "4", "--straggler", "1:2", "--straggler", "1:3"], "--straggler"),
    (["--p", "6", "--g", "4"], "--g"),
    (["--p", "4", "--segments", "0"], "--segments"),
    (["--p", "4", "--bandwidth", "abc"], "--bandwidth"),
    (["--p", "4", "--bandwidth", "0"], "--bandwidth"),
    (["--p", "4", "--alpha", "nan"], "--alpha"),
])
def test_bad_input_exits_2_and_names_the_field(argv, field, tmp_path, capsys):
    out = tmp_path / "s.json"
    assert main(["schedule", "--algo", "ring", "-o", str(out)] + argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"optcc: error: {field}:")
    assert not out.exists()


def test_loading_a_bad_file_exits_2(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "optcc-schedule/1", "cluster": {"p": 3}, "pieces": [1], "flows": [{"src": 0}]}')
    assert main(["time", str(bad)]) == 2
    assert "flows[0].dst: missing" in capsys.readouterr().err


@pytest.mark.parametrize("argv, flag", [
    (["schedule", "--algo", "optcc", "--p", "8", "--g", "2", "--straggler", "0:2", "--straggler", "0:3", "-o", "x.json"],
     "--straggler"),   # rank given twice (a mixed-ℓ server itself is optcc_rails' since issue 17)
    (["schedule", "--algo", "optcc", "--p", "8", "-k", "0", "-o", "x.json"], "--segments"),
    (["compare", "--p", "4", "--solver", "cplex"], "--solver"),
    (["compare", "--p", "4", "--ilp", "--ilp-pieces", "9", "--no-prove"], "--ilp-pieces"),
])
def test_library_fields_reach_the_user_as_flags(argv, flag, capsys, tmp_path, monkeypatch):
    """The library names model fields ("stragglers", "segments", "solver", "p"); the CLI shows the flag."""
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    assert not (tmp_path / "x.json").exists()
    assert capsys.readouterr().err.startswith(f"optcc: error: {flag}:")


def test_field_flag_table():
    from optcc_app.commands._fields import flag_for
    assert flag_for("stragglers[2].ell") == "--straggler" and flag_for("nvlink_bandwidth") == "--nvlink-bandwidth"
    assert flag_for("ilp.pieces") == "--ilp-pieces" and flag_for("segments") == "--segments"
    assert flag_for("cluster.p") == "cluster.p" and flag_for("flows[3].src") == "flows[3].src"   # file paths stay


def test_a_closed_pipe_ends_quietly():
    """`optcc … | head`: the reader is gone before the output is written; no traceback, exit 141."""
    import os
    import subprocess
    import sys
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run([sys.executable, "-m", "optcc", "bound", "--p", "8", "--straggler", "0:2", "--json"],
                              stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write_end)
    assert done.stderr == "" and done.returncode == 141


@pytest.mark.parametrize("argv, line", [
    (["run", "--nproc", "2"], "optcc: error: --schedule: required (see optcc run --help)"),
    (["run", "--nproc", "x", "--schedule", "s.json"], "optcc: error: --nproc: invalid int value: 'x' (see optcc run --help)"),
    (["bound", "--p", "3", "--bogus"], "optcc: error: --bogus: unrecognized argument (see optcc --help)"),
    (["bench", "--nproc", "2"], "optcc: error: --schedule: one of --schedule, --algo is required (see optcc bench --help)"),
    ([], "optcc: error: COMMAND: required (see optcc --help)"),
])
def test_usage_errors_are_one_line_naming_the_flag(argv, line, capsys):
    assert main(argv) == 2
    assert capsys.readouterr().err.splitlines() == [line]


@pytest.mark.parametrize("value", [[1], True, {"a": 1}, "abc", "1/0", 1e400])
def test_meta_slot_time_of_the_wrong_type_exits_2(value, tmp_path, capsys):
    import json as _json
    path = tmp_path / "s.json"
    assert main(["schedule", "--algo", "ring", "--p", "3", "-o", str(path)]) == 0
    data = _json.loads(path.read_text())
    data["meta"]["slot_time"] = value
    path.write_text(_json.dumps(data))
    capsys.readouterr()
    for command in ("verify", "time"):
        assert main([command, str(path)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("optcc: error: meta.slot_time: ") and len(err.splitlines()) == 1


@pytest.mark.parametrize("argv, package", [
    (["run", "--nproc", "2", "--schedule", "s.json"], "torch"),
    (["bench", "--nproc", "2", "--algo", "torch"], "torch"),
    (["probe", "--nproc", "2"], "torch"),
    (["testbed", "--p", "3", "--straggler", "0:2", "--rate", "100"], "torch"),
])
def test_a_missing_torch_is_named_with_its_install_command_before_any_work(argv, package, monkeypatch, capsys):
    import sys as _sys
    import gpu_runner.launch as launch_mod
    monkeypatch.setitem(_sys.modules, package, None)          # `import torch` fails, find_spec finds nothing
    monkeypatch.setattr(launch_mod, "launch", lambda *a, **k: pytest.fail("a rank was started"))
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith(f"optcc: error: {argv[0]}: needs torch")
    assert "pip install torch==2.13.0, then pip install 'optcc-allreduce[runner]'" in err


def test_a_missing_matplotlib_stops_testbed_and_paper_checks_before_they_measure(monkeypatch, capsys):
    import sys as _sys
    monkeypatch.setitem(_sys.modules, "matplotlib", None)
    import paper_checks.report as report
    monkeypatch.setattr(report, "run_paper_checks", lambda *a: pytest.fail("the checks ran"))
    assert main(["paper-checks", "--figures", "figs-never-made"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("optcc: error: paper-checks: needs matplotlib") and "pip install matplotlib" in err
    if "torch" in _sys.modules or __import__("importlib").util.find_spec("torch"):
        assert main(["testbed", "--p", "3", "--straggler", "0:2", "--rate", "100"]) == 2
        assert "optcc: error: testbed: needs matplotlib" in capsys.readouterr().err


def test_testbed_prints_its_table_before_a_failing_chart(tmp_path, monkeypatch, capsys):
    """Minutes of measurement are never lost to a plotting error: the table is out first, then exit 3."""
    import gpu_runner.testbed as testbed
    rows = [{"name": n, "seconds": s, "correct": True, "ratio_to_fault_free": s / 1.0, "ratio_to_lower_bound": s / 0.9}
            for n, s in (("torch fault-free", 1.0), ("torch straggler", 2.0), ("optcc straggler", 1.1))]
    measured = {"p": 3, "straggler": 0, "ell": 2.0, "rate_mbit": 40, "straggler_rate_mbit": 20, "size": 1 << 20,
                "iters": 1, "lower_bound_seconds": 0.9, "t0_seconds": 0.8, "optcc_schedule_seconds": 1.0, "rows": rows,
                "speedup_optcc_vs_torch": 2.0 / 1.1, "optcc_over_lower_bound": 1.1 / 0.9,
                "targets": {"speedup_ge_1.5": True, "within_15pct_of_bound": True}}
    seen = {}

    def fake_run(*args, **kw):
        seen["plot"] = args[9]
        return dict(measured)
    monkeypatch.setattr(testbed, "run_testbed", fake_run)

    def broken_chart(result, path):
        raise RuntimeError("no display")
    monkeypatch.setattr(testbed, "write_chart", broken_chart)
    png = str(tmp_path / "tb.png")
    assert main(["testbed", "--p", "3", "--straggler", "0:2", "--rate", "40", "-k", "32", "--plot", png]) == 3
    out, err = capsys.readouterr()
    assert seen["plot"] is None                               # run_testbed itself draws nothing
    assert "optcc straggler" in out and "1.100" in out        # the measured table is printed
    assert err.strip().splitlines() == ["optcc: error: --plot: the results above were measured and printed, but "
                                        "the chart could not be drawn: RuntimeError: no display"]
