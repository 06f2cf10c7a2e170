"""DDP hook: 20 training steps on 4 gloo ranks match the default all-reduce hook, with a flow
list (ring, optcc) and with a generated schedule (optcc-generated: its parameters only; each rank
builds and checks its own part, and a materialize that raises shows no rank built the instance).

Run by pytest; each rank is this file run as a script (`python tests/gpu_runner/test_runner_ddp.py ALGO OUT`).
"""
import json
import sys

import pytest
from script_ranks import run_script_ranks

torch = pytest.importorskip("torch")

WORLD = 4
STEPS = 20


@pytest.mark.slow
def test_ddp_hook_matches_default_allreduce(tmp_path):
    algos = "ring,optcc,optcc-generated"
    out = tmp_path / "result.json"
    run_script_ranks(__file__, [algos, str(out)], WORLD, timeout=120)
    results = json.loads(out.read_text())
    assert sorted(results) == sorted(algos.split(","))
    for algo, res in results.items():
        assert res["buckets_seen"] >= 2, res       # several buckets (odd sizes) went through the hook
        assert res["param_change"] > 1e-3, res     # training moved the parameters
        assert res["max_diff"] <= 1e-5, res        # same parameters as the default all-reduce
        assert res["max_rank_spread"] == 0.0, res  # every rank holds identical parameters


def _rank_main(algos, out_path):
    from datetime import timedelta

    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    from gpu_runner.ddp_hook import OptccHookState, optcc_hook
    from optcc.algorithms import build_schedule
    from optcc.cluster import Cluster

    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    rank = dist.get_rank()

    def make():
        torch.manual_seed(0)
        # ~1.5 MB of parameters: more than DDP's 1 MiB first bucket, so ≥ 2 buckets of odd sizes
        return nn.Sequential(nn.Linear(8, 600), nn.ReLU(), nn.Linear(600, 600), nn.ReLU(), nn.Linear(600, 4))

    def train(model, hook, schedule=None):
        ddp = DDP(model, bucket_cap_mb=1)
        seen = set()
        if hook:
            state = OptccHookState(schedule)

            def counting_hook(st, bucket):
                seen.add((bucket.index(), bucket.buffer().numel()))
                return optcc_hook(st, bucket)
            ddp.register_comm_hook(state, counting_hook)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
        for step in range(STEPS):
            g = torch.Generator().manual_seed(100 * rank + step)
            x = torch.randn(16, 8, generator=g)
            y = torch.randn(16, 4, generator=g)
            opt.zero_grad()
            nn.functional.mse_loss(ddp(x), y).backward()
            opt.step()
        if hook:
            state.close()       # joins the hook's threads before the process group goes away
        seen_all.update(seen)
        return torch.cat([p.detach().flatten() for p in model.parameters()]), len(seen)

    seen_all = set()
    start = torch.cat([p.detach().flatten() for p in make().parameters()])
    ref, _ = train(make(), hook=False)
    results = {}
    for algo in algos.split(","):
        stragglers = {} if algo == "ring" else {0: 2}
        if algo == "optcc-generated":
            from optcc.generated import GeneratedSchedule

            def no_instance(*a, **k):
                raise AssertionError("the DDP hook built the whole instance")
            GeneratedSchedule.materialize = no_instance
            schedule = GeneratedSchedule.of("optcc", Cluster.build(WORLD, stragglers=stragglers), 2)
        else:
            schedule = build_schedule(algo, Cluster.build(WORLD, stragglers=stragglers), 2)
        seen_all.clear()
        got, buckets = train(make(), hook=True, schedule=schedule)
        spread = got.clone()
        dist.all_reduce(spread, op=dist.ReduceOp.MAX)
        low = got.clone()
        dist.all_reduce(low, op=dist.ReduceOp.MIN)
        results[algo] = {"max_diff": float((ref - got).abs().max()), "buckets_seen": buckets,
                         "bucket_sizes": sorted(n for _, n in seen_all),
                         "param_change": float((ref - start).abs().max()),
                         "max_rank_spread": float((spread - low).abs().max())}
    if rank == 0:
        with open(out_path, "w") as fh:
            json.dump(results, fh)
    dist.destroy_process_group()


if __name__ == "__main__":
    _rank_main(sys.argv[1], sys.argv[2])
