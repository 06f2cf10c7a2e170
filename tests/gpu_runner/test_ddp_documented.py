"""The DDP hook exactly as docs/gpu_runner.md shows it, `ddp_model.register_comm_hook(state, optcc_hook)`
(no wrapper: DDP checks the hook's own annotations), trains a Linear/Tanh/ReLU stack on gloo for
several steps with the same losses and parameters as DDP's default all-reduce hook.

p = 2, float32: bit-exact. Each element's sum is one addition x0 + x1, and IEEE addition is
commutative, so any schedule and gloo's own all-reduce give the same bits (both divide by p first).
p = 4, float32: within 1e-5 relative. Three additions in the schedule's order vs gloo's order
round differently (about 6e-8 relative per element and step, over a few steps of training; the
runners take float32, not float64).

Each rank is this file run as a script (`python tests/gpu_runner/test_ddp_documented.py DTYPE OUT`).
"""
import json
import os
import sys

import pytest
from script_ranks import run_script_ranks

torch = pytest.importorskip("torch")

STEPS = 6


@pytest.mark.parametrize("world,dtype,rtol", [(2, "float32", 0.0), (4, "float32", 1e-5)])
def test_documented_register_comm_hook_trains_like_default(tmp_path, world, dtype, rtol):
    out = tmp_path / "result.json"
    run_script_ranks(__file__, [dtype, str(out)], world, timeout=240)
    res = json.loads(out.read_text())
    assert res["comm_hook"] == "optcc_hook", res            # DDP registered our function itself
    # DDP's first step is one bucket, later ones several (rebuilt by size): all through the schedule
    assert res["runs"] > STEPS and len(set(res["bucket_sizes"])) >= 2, res
    assert res["param_change"] > 1e-2, res                   # training moved the parameters
    ref_l, got_l = res["ref_losses"], res["got_losses"]
    assert len(got_l) == STEPS
    if rtol == 0.0:
        assert got_l == ref_l                                # bit for bit (float -> JSON is exact)
        assert res["max_param_diff"] == 0.0, res
    else:
        assert got_l == pytest.approx(ref_l, rel=rtol, abs=0)
        assert res["max_param_diff"] <= rtol * res["max_param"], res
    assert res["max_rank_spread"] == 0.0, res                # every rank holds the same parameters


def _rank_main(dtype, out_path):
    from datetime import timedelta

    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    from gpu_runner.ddp_hook import OptccHookState, optcc_hook
    from optcc.algorithms import build_schedule
    from optcc.cluster import Cluster

    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    dt = getattr(torch, dtype)
    schedule = build_schedule("optcc", Cluster.build(world, stragglers={0: 2}), 2)

    def make():
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(8, 48), nn.Tanh(), nn.Linear(48, 48), nn.ReLU(), nn.Linear(48, 3)).to(dt)

    def train(hook):
        model = make()
        ddp_model = DDP(model, bucket_cap_mb=0.004)           # ~4 KB: several buckets of odd sizes
        runs = []
        if hook:
            state = OptccHookState(schedule)
            ddp_model.register_comm_hook(state, optcc_hook)    # the documented call
            ex = state.executor()
            real_run = ex.run

            def counted(tensor):
                runs.append(tensor.numel())
                return real_run(tensor)
            ex.run = counted
        opt = torch.optim.SGD(ddp_model.parameters(), lr=0.2)
        losses = []
        for step in range(STEPS):
            g = torch.Generator().manual_seed(100 * rank + step)
            x = torch.randn(16, 8, generator=g, dtype=dt)
            y = torch.randn(16, 3, generator=g, dtype=dt)
            opt.zero_grad()
            loss = nn.functional.mse_loss(ddp_model(x), y)
            loss.backward()
            opt.step()
            total = loss.detach().clone()
            dist.all_reduce(total)                            # the global loss, same on every rank
            losses.append(float(total))
        name = ddp_model._get_ddp_logging_data().get("comm_hook", "")
        if hook:
            state.close()                                     # before destroy_process_group
        return torch.cat([p.detach().flatten() for p in model.parameters()]), losses, runs, name

    start = torch.cat([p.detach().flatten() for p in make().parameters()])
    ref, ref_losses, _, _ = train(False)
    got, got_losses, sizes, name = train(True)
    high, low = got.clone(), got.clone()
    dist.all_reduce(high, op=dist.ReduceOp.MAX)
    dist.all_reduce(low, op=dist.ReduceOp.MIN)
    if rank == 0:
        with open(out_path, "w") as fh:
            json.dump({"comm_hook": name, "runs": len(sizes), "ref_losses": ref_losses, "got_losses": got_losses,
                       "bucket_sizes": sizes,
                       "max_param_diff": float((ref - got).abs().max()), "max_param": float(ref.abs().max()),
                       "param_change": float((got - start).abs().max()),
                       "max_rank_spread": float((high - low).abs().max())}, fh)
    dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)          # as tests/gpu_runner/test_ddp_async.py: no interpreter teardown after the result is written


if __name__ == "__main__":
    _rank_main(sys.argv[1], sys.argv[2])
