"""Fuzz: malformed input to every subcommand, in process through optcc_app.cli.main.

Every case must exit 2 with an error line and no traceback, and write no file. Cases are
drawn from a fixed seed (bounded count); each is rejected before any heavy work starts.
"""
import contextlib
import io
import json
import os
import random
from fractions import Fraction

import pytest

from optcc.algorithms import build_schedule
from optcc_app.cli import build_parser, main
from optcc.cluster import Cluster
from optcc.schedule import LocalOp

SEED = 12
N_SCHEDULE_CASES = 160
N_FLAG_CASES = 160

BAD_INT = ["x", -1, 1.5, None, [], {}, True, "--4", 10**30, "1e999999999"]
BAD_TIME = ["x", -1, "-1/2", None, [], "1e999999999", "nan", "1/0", True, "9" * 300]
BAD = {
    "src": BAD_INT, "dst": BAD_INT, "piece": BAD_INT, "rank": BAD_INT,
    "start": BAD_TIME, "time": BAD_TIME,
    "coef": [0, "x", 1.5, None, 2**70, True, []],
    "op": ["mul", 1, None, []], "link": ["pcie", 1, None, []],
    "rate": [0, 2, "x", -1, None, "1e999999999"],
    "p": ["x", -1, 0, 1, 1.5, None, [], True, "--4", 10**30, 10**10],
    "g": ["x", -1, 0, 1.5, None, 10**30, 2],
    "ell": [0, "1/2", "x", None, -3, "1e999999999", "nan", "1e-999999999"],
    "bandwidth": [0, -1, "x", None, "inf", "1e999999999"],
    "nvlink_bandwidth": [0, -1, "x", None, "-inf"],
    "alpha": [-1, "x", None, "nan", "1e99999"],
    "format": ["x", None, 1],
    "piece_size": [0, -1, "x", None, "1e999999999", [], 2],
}


def _base_schedule():
    s = build_schedule("ring", Cluster.build(3, stragglers={0: 2}), 1)
    data = s.to_json()
    data["local_ops"] = [{"rank": 1, "piece": 0, "time": 0, "coef": 1}]
    return data


def _mutate(data, rng):
    """One field of a valid schedule replaced with a value that is invalid for it."""
    d = json.loads(json.dumps(data))
    where = rng.choice(["flow", "flow", "local_op", "cluster", "straggler", "piece", "top"])
    if where == "flow":
        f = rng.choice(d["flows"])
        key = rng.choice(["src", "dst", "piece", "start", "coef", "op", "link", "rate"])
        if key == "coef" and f["op"] == "add":
            f[key] = rng.choice(BAD["coef"])
        elif key == "coef":
            f[key] = rng.choice([2, -1] + BAD["coef"])       # any coef but 1 is bad on a copy
        else:
            f[key] = rng.choice(BAD[key])
    elif where == "local_op":
        key = rng.choice(["rank", "piece", "time", "coef"])
        d["local_ops"][0][key] = rng.choice(BAD[key])
    elif where == "cluster":
        key = rng.choice(["p", "g", "bandwidth", "nvlink_bandwidth", "alpha"])
        d["cluster"][key] = rng.choice(BAD[key])
    elif where == "straggler":
        key = rng.choice(["rank", "ell"])
        d["cluster"]["stragglers"][0][key] = rng.choice(BAD[key])
    elif where == "piece":
        d["pieces"][rng.randrange(len(d["pieces"]))] = rng.choice(BAD["piece_size"])
    else:
        key = rng.choice(["format", "unknown", "drop"])
        if key == "format":
            d["format"] = rng.choice(BAD["format"])
        elif key == "unknown":
            d[rng.choice(["flow", "Flows", "x"])] = 1
        else:
            del d[rng.choice(["cluster", "pieces", "flows"])]
    return d


def _raw_files(tmp):
    """Files that are not schedules at all."""
    out = {}
    specs = {"empty": b"", "binary": b"\xff\xfe\x00\x80", "truncated": b'{"format": "optcc-sch',
             "deep": b"[" * 5000 + b"]" * 5000, "deep_small": b"[" * 100 + b"]" * 100,
             "bigint": b'{"p": ' + b"9" * 5000 + b"}", "list": b"[1, 2]", "nan": b'{"x": NaN}'}
    for name, content in specs.items():
        path = os.path.join(tmp, name + ".json")
        with open(path, "wb") as fh:
            fh.write(content)
        out[name] = path
    out["directory"] = tmp
    out["missing"] = os.path.join(tmp, "missing.json")
    return out


def _file_commands(path):
    return [["verify", path], ["simulate", path], ["time", path], ["verify", path, "--json"],
            ["run", "--nproc", "3", "--schedule", path],
            ["bench", "--nproc", "3", "--schedule", path],
            ["bound", "--cluster", path], ["compare", "--cluster", path, "--no-prove"],
            ["msccl", "verify", path], ["msccl", "export", path, "-o", path + ".xml"]]


def _flag_cases(tmp, good):
    o = os.path.join(tmp, "out.json")
    cluster_flags = {"--p": ["x", "0", "1", "-3", "10000000000", "1e3", ""],
                     "--g": ["0", "-1", "5", "x"],
                     "--straggler": ["a", "0", "0:0.5", "99:2", "0:nan", "0:1e999999999", "0:2:3", "x:2",
                                     "0:" + "1" * 300],
                     "--bandwidth": ["0", "-1", "x", "inf", "nan", "1e999999999"],
                     "--nvlink-bandwidth": ["0", "x", "-inf"],
                     "--alpha": ["-1", "nan", "x"]}
    base = {"schedule": ["schedule", "--algo", "ring", "-o", o], "bound": ["bound"],
            "compare": ["compare", "--no-prove"], "demo": ["demo", "--no-run"],
            "bench": ["bench", "--nproc", "3", "--algo", "ring"]}
    cases = []
    for cmd, argv in base.items():
        for flag, values in cluster_flags.items():
            for v in values:
                extra = [] if flag == "--p" or cmd in ("demo", "bench") else ["--p", "3"]
                cases.append(argv + extra + [flag, v])
    cases += [
        ["schedule", "--algo", "ring", "--p", "3", "--segments", s, "-o", o] for s in ("0", "-1", "100000000", "x")]
    cases += [["schedule", "--algo", "ring", "--p", "4000", "--form", "flows", "-o", o],
              ["schedule", "--algo", "ring", "--p", "3", "--form", "bogus", "-o", o],
              ["schedule", "--algo", "optcc", "--p", "8", "--straggler", "0:2", "--straggler", "1:2",
               "--form", "generated", "-o", o],
              ["schedule", "--algo", "bogus", "--p", "3", "-o", o],
              ["schedule", "--algo", "ring", "--p", "3", "-o", "/dev/null"],
              ["schedule", "--algo", "ring", "--p", "3", "-o", tmp],
              ["schedule", "--algo", "ring", "--p", "3", "-o", os.path.join(tmp, "no", "such", "dir.json")],
              ["schedule", "--algo", "ring", "--cluster", good, "--p", "3", "-o", o],
              ["bound", "--p", "3", "--n", "0"], ["bound", "--p", "3", "--n", "-5"],
              ["time", good, "--n", "0"], ["simulate", good, "--seed", "-1"],
              ["simulate", good, "--seed", str(2**64)],
              ["paper-checks", "--figures", good],
              ["compare", "--p", "4", "--ilp-time-limit", "nan"], ["compare", "--p", "4", "--ilp-time-limit", "-1"],
              ["compare", "--p", "4", "--segments", "0"],
              ["compare", "--p", "3", "--segments", "100000000", "--no-prove"],
              ["bench", "--nproc", "3", "--algo", "optcc", "--segments", "100000000"],
              ["verify", good, "--certificate", "/dev/null"], ["verify", good, "--certificate", tmp],
              ["verify", good, "--certificate", os.path.join(tmp, "no", "c.json")]]
    for flag, values in {"--nproc": ["1", "0", "2", "x"], "--size": ["0", "-1", "1", "3"],
                         "--timeout": ["nan", "inf", "0", "-1"], "--iters": ["0"], "--warmup": ["-1"],
                         "--dtype": ["float8"], "--backend": ["mpi"]}.items():
        for v in values:
            cases.append(["run", "--nproc", "3", "--schedule", good, flag, v])
    for flag, values in {"--nproc": ["1", "x"], "-b": ["x", "0", "1", "-8"], "-e": ["4"], "-f": ["0", "-1"],
                         "-n": ["0"], "--timeout": ["nan", "-1"], "--segments": ["0", "100000000"],
                         "--p": ["4"]}.items():
        for v in values:
            cases.append(["bench", "--nproc", "3", "--algo", "ring", flag, v])
    for flag, values in {"--p": ["0", "1"], "--straggler": ["x", "0:1", "5:2", "0:nan"],
                         "--rate": ["0", "nan", "-1", "inf"], "--size": ["0"], "--timeout": ["nan"]}.items():
        for v in values:
            args = {"--p": "3", "--straggler": "0:2", "--rate": "10"}
            args[flag] = v
            cases.append(["testbed", *[x for kv in args.items() for x in kv]]
                         + ([flag, v] if flag not in ("--p", "--straggler", "--rate") else []))
    return cases


def _later_command_cases(tmp, good):
    """msccl, prove-all and probe: every case is checked (each is refused before any work)."""
    o = os.path.join(tmp, "out.json")
    cases = []
    for bad in ("/dev/null", tmp, os.path.join(tmp, "no", "such", "c.json")):
        cases += [["prove-all", "--algo", "ring", "--certificate", bad],
                  ["msccl", "export", good, "-o", bad],
                  ["probe", "--nproc", "2", "-o", bad]]
    cases += [["prove-all", "--algo", "bogus"], ["msccl", "verify", good, "--max-steps", "7"],
              ["msccl", "export", good, "-o", o, "--proto", "x"], ["msccl", "bogus"]]
    for flag, values in {"--nproc": ["1", "0", "x", "10000000000"], "--size": ["0", "-1"], "--repeats": ["0"],
                         "--timeout": ["nan", "inf", "0", "-1"], "--bandwidth": ["0", "nan", "inf", "-1"],
                         "--min-ell": ["0.5", "nan", "inf"], "--rate": ["10"], "--delay-ms": ["5"],
                         "--straggler": ["0:2"]}.items():
        for v in values:
            cases.append(["probe", "--nproc", "2", flag, v])
    for flag, values in {"--p": ["1", "x"], "--rate": ["0", "nan", "inf", "-1"], "--delay-ms": ["-1", "nan", "1e9"],
                         "--straggler": ["x", "5:2", "0:0.5"]}.items():
        for v in values:
            args = {"--p": "3", "--rate": "10", flag: v}
            cases.append(["probe", "--testbed", *[x for kv in args.items() for x in kv]])
    cases.append(["probe", "--testbed", "--p", "3"])
    return cases


def _call(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as e:               # argparse usage errors
            code = e.code
    return code, out.getvalue(), err.getvalue()


def _check(argv, tmp):
    before = set(os.listdir(tmp))
    code, out, err = _call(argv)
    assert code == 2, f"{argv}: exit {code}\nstdout: {out[-500:]}\nstderr: {err[-1500:]}"
    assert "Traceback" not in err and "internal error" not in err, (argv, err)
    last = err.strip().splitlines()[-1]
    assert "error:" in last and len(last) < 600, (argv, err)
    assert set(os.listdir(tmp)) == before, f"{argv} left files behind"


def test_every_subcommand_is_covered():
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    covered = {"verify", "simulate", "time", "run", "bench", "bound", "compare", "schedule", "demo",
               "paper-checks", "testbed", "msccl", "prove-all", "probe"}
    assert set(sub.choices) <= covered, set(sub.choices) - covered


def test_fuzz_malformed_schedules(tmp_path):
    rng = random.Random(SEED)
    data = _base_schedule()
    tmp = str(tmp_path)
    path = os.path.join(tmp, "s.json")
    files = _raw_files(tmp)
    for name, f in files.items():
        for argv in _file_commands(f):
            _check(argv, tmp)
    for _ in range(N_SCHEDULE_CASES):
        with open(path, "w") as fh:
            json.dump(_mutate(data, rng), fh)
        argv = rng.choice(_file_commands(path))
        _check(argv, tmp)


def test_fuzz_bad_flags(tmp_path):
    tmp = str(tmp_path)
    good = os.path.join(tmp, "good.json")
    build_schedule("ring", Cluster.build(3), 1).save(good)
    cases = _flag_cases(tmp, good)
    rng = random.Random(SEED)
    picked = cases if len(cases) <= N_FLAG_CASES else [c for c in cases if c[0] != "demo"][:40] + rng.sample(cases, N_FLAG_CASES)
    for argv in picked:
        _check(argv, tmp)


def test_fuzz_later_subcommands(tmp_path):
    tmp = str(tmp_path)
    good = os.path.join(tmp, "good.json")
    build_schedule("ring", Cluster.build(3), 1).save(good)
    cases = _later_command_cases(tmp, good)
    assert {c[0] for c in cases} == {"msccl", "prove-all", "probe"}
    for argv in cases:
        _check(argv, tmp)


def test_local_op_type_errors_name_the_field():
    from optcc.errors import OptccError
    s = build_schedule("ring", Cluster.build(3), 1)
    zero = Fraction(0)
    for op, field in [(LocalOp("a", 0, zero, 2), "local_ops[0].rank"), (LocalOp(True, 0, zero, 2), "local_ops[0].rank"),
                      (LocalOp(0, [0], zero, 2), "local_ops[0].piece"), (LocalOp(0, 0, zero, 2.0), "local_ops[0].coef"),
                      (LocalOp(0, 0, zero, 2**63), "local_ops[0].coef")]:
        s.local_ops = [op]
        with pytest.raises(OptccError) as e:
            s.validate()
        assert e.value.field == field
