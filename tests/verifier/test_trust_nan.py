"""A non-finite result where the exact sum is finite is WRONG (run, bench, --json, worker exit)."""
import json
import math
import subprocess
import sys
from fractions import Fraction as F

import pytest

from optcc.cluster import Cluster
from optcc.jsonout import dumps, jsonable
from optcc.schedule import Flow, LocalOp, Schedule
from verifier import prove_allreduce

C = 2**62          # an int64 coefficient; C³ = 2**186 overflows float32 (max ≈ 2**128)


def cancelling_p2() -> Schedule:
    """Exactly correct over the integers, all NaN in float32.

    Rank 1 gets x0 + x1, rank 0 scales its x0 by C three times (inf in float32) and sends it
    to rank 1 once with coefficient +1 and once with −1: exactly x0 + x1, but inf − inf = NaN.
    """
    flows = [Flow(0, 1, 0, "add", F(0)), Flow(0, 1, 0, "add", F(1)), Flow(0, 1, 0, "add", F(2), coef=-1),
             Flow(1, 0, 0, "copy", F(3))]
    ops = [LocalOp(0, 0, F(1), C)] * 3
    return Schedule(Cluster.build(2), [F(1)], flows, ops, meta={"algorithm": "hand-cancel-p2"})


def _strict_loads(text):
    def refuse(token):
        raise ValueError(f"non-standard JSON token {token}")
    return json.loads(text, parse_constant=refuse)


def test_jsonout_never_writes_nan_or_infinity():
    obj = {"a": math.nan, "b": [math.inf, -math.inf, 1.5], "c": F(1, 3), "d": F(10**400, 3), 2: None}
    text = dumps(obj)
    data = _strict_loads(text)
    assert data == {"a": "nan", "b": ["inf", "-inf", 1.5], "c": 1 / 3, "d": str(F(10**400, 3)), "2": None}
    assert jsonable((1, 2)) == [1, 2]
    with pytest.raises(TypeError):
        dumps({"x": object()})


def test_count_wrong_counts_nan_and_inf_as_wrong():
    torch = pytest.importorskip("torch")
    from gpu_runner.worker import count_wrong
    ref = torch.tensor([1.0, 2.0, 3.0, 4.0])
    result = torch.tensor([1.0, math.nan, math.inf, 4.0])
    absref = ref.double().abs()
    wrong, max_err = count_wrong(result, ref, absref, "float32", 2, ref.double())
    assert wrong == 2 and math.isnan(max_err)
    ok, err = count_wrong(ref.clone(), ref, absref, "float32", 2, ref.double())
    assert ok == 0 and err == 0.0
    # where the exact sum itself overflows the dtype, ±inf is not blamed on the schedule
    exact = torch.tensor([1.0, 2.0, 1e300, 4.0], dtype=torch.float64)
    wrong, _ = count_wrong(torch.tensor([1.0, 2.0, math.inf, 4.0]), torch.tensor([1.0, 2.0, math.inf, 4.0]),
                           exact.abs(), "float32", 2, exact)
    assert wrong == 0


def test_cancelling_schedule_is_proved_over_the_integers():
    assert prove_allreduce(cancelling_p2()).proved


def test_nan_run_is_wrong_on_gloo_and_every_worker_exits_1(tmp_path):
    pytest.importorskip("torch")
    from gpu_runner.launch import launch_trusted
    s = cancelling_p2()
    path = str(tmp_path / "s.json")
    s.save(path)
    res = launch_trusted(path, s.sha256(), 2, 4 * 64, "float32", 60, backend="gloo", allow_worse_numerics=True)
    assert res.result is not None, res.describe_failure()
    row = res.result["rows"][0]
    assert res.result["correct"] is False and row["wrong"] == 2 * 64, row
    assert row["max_abs_error"] == "nan"                      # strict JSON: the string, not NaN
    assert res.returncodes == [1, 1]                          # EXIT_WRONG on every rank
    assert res.ok                                             # finished (wrong), not crashed


def test_optcc_run_json_reports_nan_as_wrong(tmp_path):
    pytest.importorskip("torch")
    path = str(tmp_path / "s.json")
    cancelling_p2().save(path)
    out = subprocess.run([sys.executable, "-m", "optcc", "run", "--nproc", "2", "--schedule", path,
                          "--size", "256", "--json", "--timeout", "60", "--allow-worse-numerics"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 1, out.stderr
    data = _strict_loads(out.stdout)
    assert data["correct"] is False and data["wrong"] == 2 * 64 and data["max_abs_error"] == "nan"


def test_optcc_bench_counts_nan_as_wrong(tmp_path):
    pytest.importorskip("torch")
    path = str(tmp_path / "s.json")
    cancelling_p2().save(path)
    out = subprocess.run([sys.executable, "-m", "optcc", "bench", "--nproc", "2", "--schedule", path,
                          "-b", "256", "-e", "256", "-w", "0", "-n", "1", "--json", "--timeout", "60",
                          "--allow-worse-numerics"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 1, out.stderr
    rows = _strict_loads(out.stdout)["rows"]
    assert [r["wrong"] for r in rows] == [2 * 64]
