"""The DDP hook without a schedule file: `OptccHookState.auto(cluster)` picks k per bucket size
from the cluster's measured per-message cost (never one k for every bucket: a probe file that
said o = 0 once gave k = 1024 for a 4 MB bucket), builds and admits each schedule through the
same gate, and over several steps the gradients equal the default all-reduce hook's bit for bit.

Each rank is this file run as a script (`python tests/gpu_runner/test_ddp_auto_k_gloo.py OUT`).
"""
import json
import sys
from fractions import Fraction

import pytest
from script_ranks import run_script_ranks

torch = pytest.importorskip("torch")

WORLD = 4          # dividing integer gradients by 4 is exact: both hooks' averages agree bit for bit
STEPS = 3


def _cluster():
    from optcc.cluster import Cluster
    return Cluster.build(WORLD, stragglers={0: Fraction(2)}, bandwidth=5 * 10**7, overhead=Fraction(1, 10**5))


def test_auto_state_picks_k_per_bucket_and_matches_default_allreduce(tmp_path):
    from optcc.segments import HOST_POST_S, choose_segments
    out = tmp_path / "result.json"
    run_script_ranks(__file__, [str(out)], WORLD, timeout=150)
    res = json.loads(out.read_text())
    assert res["steps"] == STEPS and res["grad_mismatches"] == 0 and res["grad_nonzero"] > 0, res
    chosen = {int(b): k for b, k in res["chosen"].items()}
    assert len(chosen) >= 2 and len(set(chosen.values())) >= 2, chosen      # one k per bucket size, not one for all
    want = {b: choose_segments("auto", "optcc", _cluster(), b, build=False, host_post_s=HOST_POST_S)[0] for b in chosen}
    assert chosen == want
    assert res["closed_clean"] is True


def _rank_main(out_path):
    from datetime import timedelta

    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    from gpu_runner.ddp_hook import OptccHookState, optcc_hook

    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    rank = dist.get_rank()
    model = nn.Sequential(nn.Linear(64, 512, bias=False), nn.Linear(512, 32, bias=False))
    with torch.no_grad():                      # integer weights and inputs: integer gradients, exact sums
        gen = torch.Generator().manual_seed(0)
        for w in model.parameters():
            w.copy_(torch.randint(-2, 3, w.shape, generator=gen).float())
    ref_model = nn.Sequential(nn.Linear(64, 512, bias=False), nn.Linear(512, 32, bias=False))
    ref_model.load_state_dict(model.state_dict())
    # a 50 KiB cap: each layer (64 KiB, 128 KiB of gradients) is a bucket of its own size
    ddp = DDP(model, bucket_cap_mb=0.05)
    ref = DDP(ref_model, bucket_cap_mb=0.05)
    state = OptccHookState.auto(_cluster())
    ddp.register_comm_hook(state, optcc_hook)
    mismatches, nonzero = 0, 0
    for step in range(STEPS):
        x = torch.randint(-3, 4, (4, 64), generator=torch.Generator().manual_seed(10 * step + rank)).float()
        for m in (ddp, ref):
            m.zero_grad()
            m(x).sum().backward()
        for a, b in zip(ddp.parameters(), ref.parameters()):
            mismatches += int(not torch.equal(a.grad, b.grad))
            nonzero += int(a.grad.abs().sum() > 0)
    state.close(timeout=30)
    closed = state._comm is None or not state._comm[1].is_alive()
    if rank == 0:
        with open(out_path, "w") as fh:
            json.dump({"steps": STEPS, "grad_mismatches": mismatches, "grad_nonzero": nonzero,
                       "chosen": state.chosen, "closed_clean": closed}, fh)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    _rank_main(sys.argv[1])
