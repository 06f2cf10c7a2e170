"""`optcc bench` prints nccl-tests' all_reduce_perf layout: a parser written the way scripts parse
nccl-tests output (skip '#' lines, split on whitespace, fixed column positions, regex footers)
reads every size, the out-of-place and in-place columns, the wrong counts and the footers."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_runner.bench import nccl_lines

ROOT = Path(__file__).resolve().parents[2]
# all_reduce_perf's column positions (0-based, whitespace split), as such scripts hard-code them
SIZE, COUNT, TYPE, REDOP, ROOT_COL = 0, 1, 2, 3, 4
OOP_TIME, OOP_ALGBW, OOP_BUSBW, OOP_WRONG = 5, 6, 7, 8
IP_TIME, IP_ALGBW, IP_BUSBW, IP_WRONG = 9, 10, 11, 12


def parse_nccl_tests(text: str) -> dict:
    rows, header, units = [], None, None
    for line in text.splitlines():
        if line.startswith("#"):
            if line.split()[1:3] == ["size", "count"]:
                header = line[1:].split()
            elif line.split()[1:3] == ["(B)", "(elements)"]:
                units = line[1:].split()
            continue
        f = line.split()
        if not f:
            continue
        rows.append({"size": int(f[SIZE]), "count": int(f[COUNT]), "type": f[TYPE], "redop": f[REDOP],
                     "root": int(f[ROOT_COL]),
                     "oop": (float(f[OOP_TIME]), float(f[OOP_ALGBW]), float(f[OOP_BUSBW]), int(f[OOP_WRONG])),
                     "ip": (float(f[IP_TIME]), float(f[IP_ALGBW]), float(f[IP_BUSBW]), int(f[IP_WRONG])),
                     "extra": f[13:]})
    oob = re.search(r"^# Out of bounds values : (\d+) (OK|FAILED)$", text, re.M)
    avg = re.search(r"^# Avg bus bandwidth\s+: ([0-9.eE+-]+)", text, re.M)
    return {"rows": rows, "header": header, "units": units, "oob": oob and (int(oob[1]), oob[2]),
            "avg_busbw": avg and float(avg[1])}


NCCL_HEADER = ["size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong",
               "time", "algbw", "busbw", "#wrong"]


def _row(size, time_us, wrong=0, dtype="float32", p=4):
    algbw = size / (time_us * 1e-6) / 1e9
    return {"size": size, "count": size // 4, "type": dtype, "time_us": time_us, "algbw": algbw,
            "busbw": algbw * 2 * (p - 1) / p, "wrong": wrong, "lb_us": size / 1e9 * 1e6, "eff": 0.5}


def test_layout_parses_like_nccl_tests_output():
    rows = [_row(65536, 1673.04), _row(1 << 30, 12345678.0, wrong=7), _row(8, 3.5)]
    text = "\n".join(nccl_lines(rows, "nThread 1 nGpus 1 minBytes 8 maxBytes 1073741824", ["a note"]))
    got = parse_nccl_tests(text)
    assert got["header"][:13] == NCCL_HEADER and got["header"][13:] == ["lb_us", "eff", "torch_us", "vs_torch", "k"]
    assert got["units"] == ["(B)", "(elements)", "(us)", "(GB/s)", "(GB/s)", "(us)", "(GB/s)", "(GB/s)", "(us)", "(us)"]
    assert [r["size"] for r in got["rows"]] == [65536, 1 << 30, 8]
    first = got["rows"][0]
    assert (first["count"], first["type"], first["redop"], first["root"]) == (16384, "float", "sum", -1)
    assert first["oop"] == first["ip"] == (1673.04, 0.04, 0.06, 0)   # nccl-tests' 2-decimal bandwidths
    assert got["rows"][1]["ip"][0] == 1.2e7 and got["rows"][1]["ip"][3] == 7   # 1.2e+07 us
    assert got["rows"][2]["ip"][0] == 3.5
    assert first["extra"][:2] == ["65.54", "0.5000"] and first["extra"][2:] == ["-", "-", "-"]
    assert got["oob"] == (7, "FAILED")
    assert got["avg_busbw"] == pytest.approx(sum(r["busbw"] for r in rows) / 3, rel=1e-5)
    # nccl-tests' columns line up: each value ends where its header name ends
    lines = text.splitlines()
    head = next(line for line in lines if line.startswith("#") and "redop" in line)
    data = next(line for line in lines if not line.startswith("#"))
    ends = [m.end() for m in re.finditer(r"\S+", head)][1:]
    assert ends == [m.end() for m in re.finditer(r"\S+", data)]


def test_type_names_are_nccl_tests_names():
    names = {d: parse_nccl_tests("\n".join(nccl_lines([_row(64, 10.0, dtype=d)], "x")))["rows"][0]["type"]
             for d in ("float32", "float16", "bfloat16", "int32", "int64")}
    assert names == {"float32": "float", "float16": "half", "bfloat16": "bfloat16", "int32": "int32",
                     "int64": "int64"}


def test_real_bench_run_parses_like_nccl_tests_output():
    pytest.importorskip("torch")
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-m", "optcc", "bench", "--nproc", "2", "--algo", "optcc",
                           "--straggler", "0:2", "-b", "4K", "-e", "16K", "-f", "4", "-w", "1", "-n", "2"],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    got = parse_nccl_tests(done.stdout)
    assert got["header"][:13] == NCCL_HEADER
    assert [(r["size"], r["count"], r["type"], r["redop"], r["root"]) for r in got["rows"]] == [
        (4096, 1024, "float", "sum", -1), (16384, 4096, "float", "sum", -1)]
    for r in got["rows"]:
        assert r["ip"][0] > 0 and r["ip"][3] == 0 and r["oop"] == r["ip"]
        lb, eff, torch_us, vs, k = r["extra"]       # torch's all_reduce timed in alternating rounds
        assert float(lb) > 0 and float(torch_us) > 0 and float(vs) == pytest.approx(r["ip"][0] / float(torch_us), rel=2e-2)
        assert int(k) >= 1
    assert got["oob"] == (0, "OK")
    assert got["avg_busbw"] >= 0
    assert done.stdout.splitlines()[0].startswith("# nThread 1 nGpus 1 minBytes 4096 maxBytes 16384 step: 4(factor)")
