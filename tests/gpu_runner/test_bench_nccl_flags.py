"""`optcc bench` takes nccl-tests' flags with their meanings: -d TYPE (nccl-tests' names), -o sum,
-c 1, -t 1, -g 1, -f 1 with -i STEPBYTES; what optcc does not run is refused naming the flag."""
from __future__ import annotations

import json

import pytest

from gpu_runner.bench import sweep
from optcc_app.cli import main


def test_step_factor_one_steps_by_stepbytes_as_nccl_tests_does():
    assert sweep(1024, 4096, 1, 1024) == [1024, 2048, 3072, 4096]
    assert sweep(8, 64, 2) == [8, 16, 32, 64]


@pytest.mark.parametrize("argv,flag,message", [
    (["-o", "max"], "-o", "sum only"), (["-c", "0"], "-c", "always checks"), (["-t", "2"], "-t", "-t 1 -g 1"),
    (["-g", "4"], "-g", "-t 1 -g 1"), (["-d", "double"], "-d", "got 'double'"), (["-f", "0"], "-f", "factor ≥ 1")])
def test_what_optcc_does_not_run_is_refused_naming_the_flag(argv, flag, message, capsys):
    assert main(["bench", "--nproc", "2", "--algo", "torch", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"optcc: error: {flag}:") and message in err, err


def test_nccl_tests_flags_run(capsys):
    pytest.importorskip("torch")
    assert main(["bench", "--nproc", "2", "--algo", "ring", "-d", "half", "-o", "sum", "-c", "1", "-t", "1", "-g", "1",
                 "-b", "4K", "-e", "12K", "-f", "1", "-i", "4K", "-n", "1", "-w", "0", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["size"] for r in out["rows"]] == [4096, 8192, 12288]
    assert all(r["wrong"] == 0 and r["type"] == "float16" for r in out["rows"]), out["rows"]


def test_auto_k_is_chosen_per_size_one_launch_per_run_of_sizes(monkeypatch, capsys):
    """`optcc bench --algo optcc` with auto k: each size gets the k auto chooses for it (once it
    was the k of -e for every size: 64 KiB ran with 1 MiB's k), consecutive sizes with one k share
    a launch. The launches are replaced after the schedules were built, proved and attested."""
    from fractions import Fraction

    from optcc.cluster import Cluster
    from optcc.schedule import Schedule
    from optcc.segments import HOST_POST_S, choose_segments
    launches = []

    def fake_launch(nproc, worker_args, timeout_s, **kw):
        sizes = [int(x) for x in worker_args[worker_args.index("--sizes") + 1].split(",")]
        launches.append((Schedule.load(worker_args[worker_args.index("--schedule") + 1]).meta["segments"], sizes,
                         "--alternate-torch" in worker_args))

        class Res:
            ok = True
            result = {"world_size": 4, "backend": "gloo", "runner": "streaming",
                      "rows": [{"size": s, "count": s // 4, "type": "float32", "seconds": 1e-3, "wrong": 0,
                                "torch_seconds": 2e-3} for s in sizes]}
        return Res()
    monkeypatch.setattr("gpu_runner.launch.launch", fake_launch)
    assert main(["bench", "--nproc", "4", "--algo", "optcc", "--straggler", "0:2", "--latency-model", "simai",
                 "-b", "64K", "-e", "64M", "-f", "16", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    c = Cluster.build(4, stragglers={0: Fraction(2)}, latency_model="simai")
    want = [choose_segments("auto", "optcc", c, s, host_post_s=HOST_POST_S)[0] for s in (2**16, 2**20, 2**24)]
    assert len(set(want)) > 1                                   # the sweep crosses a change of k
    assert [k for k, sizes, _ in launches for _ in sizes] == want
    assert [s for _, sizes, _ in launches for s in sizes] == [2**16, 2**20, 2**24]
    assert all(alt for _, _, alt in launches)
    assert [r["segments"] for r in out["rows"]] == want and all(r["vs_torch"] == 0.5 for r in out["rows"])


def test_torch_rounds_alternate_in_one_run(capsys):
    """A real gloo run: every row carries torch's all_reduce timed in rounds alternating with the
    schedule's, and their ratio."""
    pytest.importorskip("torch")
    assert main(["bench", "--nproc", "2", "--algo", "ring", "-b", "4K", "-e", "4K", "-n", "2", "-w", "1", "--json"]) == 0
    row, = json.loads(capsys.readouterr().out)["rows"]
    assert row["wrong"] == 0 and row["torch_us"] > 0 and row["segments"] >= 1
    assert row["vs_torch"] == pytest.approx(row["time_us"] / row["torch_us"])
