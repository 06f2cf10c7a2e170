"""Runner on schedules with several flows between one ordered pair at one start time (the g > 1
baselines): the runner posts in the verifier's order, and real gloo runs are exact."""
import json
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from gpu_runner.executor import run_virtual  # noqa: E402
from verifier.step_check import check_plans  # noqa: E402
from gpu_runner.launch import launch, prepare_schedule, worker_certificate  # noqa: E402
from optcc.lowering.step import build_all_plans  # noqa: E402
from optcc.algorithms import baselines, build_schedule  # noqa: E402
from optcc.cluster import Cluster  # noqa: E402
from optcc.timing import IntegerTimes  # noqa: E402
from verifier.port_checks import runner_posts  # noqa: E402

from verifier_cases import two_per_pair_p2  # noqa: E402

BASELINES = {
    "flat ring p=4 g=2": lambda: build_schedule("ring", Cluster.build(4, g=2)),
    "flat ring p=6 g=3": lambda: baselines.flat_ring_allreduce(Cluster.build(6, g=3, stragglers={0: 2, 1: 2, 2: 2})),
    "hierarchical ring p=4 g=2": lambda: baselines.hierarchical_ring_allreduce(Cluster.build(4, g=2, stragglers={0: 2})),
    "r2ccl p=4 g=2": lambda: baselines.r2ccl_server_allreduce(Cluster.build(4, g=2, stragglers={0: 2, 1: 2})),
    "two per pair p=2": two_per_pair_p2,
}


@pytest.mark.parametrize("name", list(BASELINES))
def test_runner_posts_in_the_order_the_verifier_checks(name):
    """Each rank's plan posts its flows in posting order (runner_posts) and passes the 'runnable'
    check of verifier.step_check, and every pair's transfers line up on both ends (same flow,
    same element range) for any length."""
    s = BASELINES[name]()
    plans = build_all_plans(s, 10**6)                  # every piece gets an element: no flow skipped
    assert [[t.flow for t in plan.transfers] for plan in plans] == runner_posts(s, IntegerTimes(s))
    for numel in (5, 1001):                            # 5: most pieces get no element
        plans = build_all_plans(s, numel)
        assert check_plans(s, plans) == (True, None)
        pair_seq = {}
        for plan in plans:
            for t in plan.transfers:
                pair_seq.setdefault((plan.rank, t.peer), []).append((t.flow, t.lo, t.hi, t.start, t.send))
        for (a, b), mine in pair_seq.items():
            theirs = pair_seq.get((b, a), [])
            assert [x[:4] for x in mine] == [y[:4] for y in theirs]
            assert all(x[4] != y[4] for x, y in zip(mine, theirs))   # send on one end, receive on the other


@pytest.mark.parametrize("name", list(BASELINES))
def test_virtual_run_is_exact(name):
    s = BASELINES[name]()
    p = s.cluster.p
    inputs = [torch.randint(-1000, 1000, (1003,), dtype=torch.int64, generator=torch.Generator().manual_seed(r))
              for r in range(p)]
    expected = sum(inputs)
    outs = run_virtual(s, [x.clone() for x in inputs])
    assert all(torch.equal(o, expected) for o in outs)


def test_optcc_run_flat_ring_g2_p4_on_gloo(tmp_path):
    path = str(tmp_path / "flat.json")
    build_schedule("ring", Cluster.build(4, g=2, stragglers={0: 2, 1: 2})).save(path)
    out = subprocess.run([sys.executable, "-m", "optcc", "run", "--nproc", "4", "--schedule", path,
                          "--size", str(4 * 1003), "--dtype", "int32", "--json", "--timeout", "60"],
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout)
    assert res["correct"] and res["wrong"] == 0 and res["backend"] == "gloo" and res["world_size"] == 4
    assert res["algorithm"] == "flat_ring" and res["proof"].startswith("proved by the verifier (sum, causality")


@pytest.mark.parametrize("name,dtype", [("hierarchical ring p=4 g=2", "int32"), ("two per pair p=2", "int64")])
def test_several_flows_per_pair_per_instant_on_gloo(tmp_path, name, dtype):
    """Two or more messages between one ordered pair in one batch (different sizes for p = 2)."""
    s = BASELINES[name]()
    p = s.cluster.p
    path = str(tmp_path / "s.json")
    s.save(path)
    s, _ = prepare_schedule(path, p)                    # the real verifier proves it first
    elem = 4 if dtype == "int32" else 8
    res = launch(p, ["--schedule", path, "--certificate", worker_certificate(s, str(tmp_path)), "--mode", "bench",
                     "--sizes", f"{elem * 3},{elem * 1001}", "--dtype", dtype, "--warmup", "0",
                     "--iters", "1"], timeout_s=60)
    assert res.ok, res.describe_failure()
    assert [r["count"] for r in res.result["rows"]] == [3, 1001]
    assert all(r["wrong"] == 0 and r["correct"] for r in res.result["rows"]), res.result["rows"]
