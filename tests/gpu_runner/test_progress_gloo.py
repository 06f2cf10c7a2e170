"""Long runner work is not silent: `optcc run` says what it is doing on stderr while it starts,
and `optcc bench` prints each size's row as it finishes (nccl-tests' layout), heard from rank 0
while the ranks still run."""
import subprocess
import sys
import time

import pytest

pytest.importorskip("torch")

from gpu_runner.bench import nccl_header, nccl_row, table_rows  # noqa: E402
from gpu_runner.launch import attested_worker_args, launch, prepare_schedule  # noqa: E402
from optcc.algorithms import build_schedule  # noqa: E402
from optcc.cluster import Cluster  # noqa: E402


def test_rank_zeros_events_arrive_in_order_while_the_ranks_run(tmp_path):
    schedule = build_schedule("optcc", Cluster.build(3, stragglers={0: 2}), 2)
    path = str(tmp_path / "s.json")
    schedule.save(path)
    prepare_schedule(path, 3)
    sizes = [4 * 1000, 4 * 4000, 4 * 16000, 4 * 64000]
    heard = []
    t0 = time.monotonic()
    res = launch(3, [*attested_worker_args(schedule, path, str(tmp_path)), "--mode", "bench",
                     "--sizes", ",".join(map(str, sizes)), "--iters", "3", "--warmup", "1"], 60,
                 progress=lambda event: heard.append((time.monotonic() - t0, event)))
    assert res.ok, res.describe_failure()
    kinds = [e["event"] for _, e in heard]
    assert kinds == ["group", "ready", "row", "row", "row", "row"]
    assert heard[0][1]["backend"] == "gloo" and heard[0][1]["world_size"] == 3
    assert [e["row"] for _, e in heard[2:]] == res.result["rows"]     # the same rows, as they finished
    assert heard[2][0] < res.exit_s[0]                  # the first row was heard before rank 0 exited
    assert [t for t, _ in heard] == sorted(t for t, _ in heard)


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "optcc", *args], capture_output=True, text=True, timeout=180)


def test_optcc_run_says_what_it_does_on_stderr(tmp_path):
    path = str(tmp_path / "o.json")
    build_schedule("optcc", Cluster.build(3, stragglers={0: 2}), 2).save(path)
    done = _cli("run", "--nproc", "3", "--schedule", path, "--size", "4004", "--json")
    assert done.returncode == 0, done.stderr
    steps = [line.split(": ", 1)[1].rsplit(" (", 1)[0] for line in done.stderr.splitlines()
             if line.startswith("optcc run: ")]
    assert steps == ["accepted; starting 3 ranks",          # checking is said only when it takes > 2 s
                     "process group formed: gloo, 3 ranks", "every rank has its proved program; running"]
    assert done.stdout.lstrip().startswith("{")           # stdout is the JSON alone


def test_optcc_bench_prints_the_table_of_nccl_tests_row_by_row(tmp_path):
    done = _cli("bench", "--nproc", "3", "--algo", "optcc", "--p", "3", "--straggler", "0:2", "--segments", "2",
                "-b", "1K", "-e", "4K", "-n", "2", "-w", "1")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    header = nccl_header("x", ("y", "z"))
    assert lines[len(header) - 3:len(header)] == header[-3:]          # the column heads, then the rows
    rows = lines[len(header):len(header) + 3]
    assert [int(r.split()[0]) for r in rows] == [1024, 2048, 4096]
    assert lines[len(header) + 3].startswith("# Out of bounds values : 0 OK")
    cluster = Cluster.build(3, stragglers={0: 2})
    fake = {"size": 1024, "count": 256, "type": "float32", "seconds": 1e-3, "wrong": 0}
    assert len(nccl_row(table_rows({"world_size": 3, "rows": [fake]}, cluster)[0])) == len(rows[0])
    assert "optcc bench: process group formed (gloo, 3 ranks)" in done.stderr
