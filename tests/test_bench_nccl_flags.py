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
