"""Asynchronous DDP hook on 4 gloo ranks: the hook returns before its communication completes
(a gate the test holds keeps the schedule from running), and over several training steps the
gradients equal the default all-reduce hook's bit for bit (integer-valued data: exact sums).

Each rank is this file run as a script (`python tests/gpu_runner/test_ddp_async.py RUNNER OUT`).
"""
import json
import os
import sys

import pytest
from script_ranks import run_script_ranks

torch = pytest.importorskip("torch")

WORLD = 4
STEPS = 5


NCCL = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < WORLD,
                          reason=f"NCCL side-stream path needs {WORLD} CUDA GPUs")


@pytest.mark.parametrize("runner,backend", [("streaming", "gloo"), ("step", "gloo"),
                                            pytest.param("streaming", "nccl", marks=NCCL)])
def test_async_hook_overlaps_and_matches_default_allreduce(tmp_path, runner, backend):
    out = tmp_path / "result.json"
    run_script_ranks(__file__, [runner, str(out), backend], WORLD, timeout=150)
    res = json.loads(out.read_text())
    assert res["ranks_ok"] == WORLD, res
    assert res["returned_before_done"] is True          # hook returned, Future not done, gate held
    assert res["ran_on_other_thread"] is True
    assert res["gated_result_exact"] is True           # once released, the Future holds the average
    assert res["buckets"] >= 2, res                     # several buckets went through the hook
    assert res["steps"] == STEPS and res["grad_mismatches"] == 0, res
    assert res["grad_nonzero"] > 0 and res["param_change"] > 0, res
    assert res["closed_clean"] is True                  # close() drained and joined every optcc thread


class _Bucket:
    def __init__(self, tensor):
        self._t = tensor

    def buffer(self):
        return self._t

    def is_last(self):
        return True


def _rank_main(runner, out_path, backend):
    import threading
    from datetime import timedelta

    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    from gpu_runner.ddp_hook import OptccHookState, optcc_hook
    from optcc.algorithms import build_schedule
    from optcc.cluster import Cluster

    dist.init_process_group(backend, timeout=timedelta(seconds=60))
    rank = dist.get_rank()
    dev = torch.device("cpu")
    if backend == "nccl":
        torch.cuda.set_device(rank)
        dev = torch.device("cuda", rank)
    schedule = build_schedule("optcc", Cluster.build(WORLD, stragglers={0: 2}), 2)

    # 1. the hook returns before the schedule runs: the test holds a gate in front of run()
    state = OptccHookState(schedule, runner=runner)
    ex = state.executor()
    real_run, gate, entered, where = ex.run, threading.Event(), threading.Event(), {}

    def gated(tensor):
        where["thread"] = threading.get_ident()
        entered.set()
        gate.wait()
        return real_run(tensor)
    ex.run = gated
    x = torch.arange(1000, dtype=torch.float32, device=dev) * (rank + 1)
    want = x.clone()
    dist.all_reduce(want)
    fut = optcc_hook(state, _Bucket(x))
    returned_before_done = not fut.done()
    entered.wait(30)
    still_not_done = not fut.done()
    gate.set()
    got = fut.wait()
    ex.run = real_run
    gated_exact = bool(torch.equal(got, want / WORLD)) and got.data_ptr() == x.data_ptr()
    state.close()

    # 2. DDP: the loss is linear in each layer's weights with integer data, so every gradient is
    # an integer matrix c^T x whatever the weights: the averages are exact in float32, and any
    # difference from the default hook is the hook's fault, not rounding
    class Branches(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(8, 4, bias=False)
            self.b = nn.Linear(8, 4, bias=False)
            self.c = nn.Linear(8, 4)

        def forward(self, x):
            return self.a(x) + self.b(x * 2) + self.c(x - 1)

    def make():
        torch.manual_seed(0)
        m = Branches()
        with torch.no_grad():
            for p in m.parameters():
                p.copy_(torch.randint(-2, 3, p.shape).float())
        return m

    def train(hook):
        model = make().to(dev)
        ddp = DDP(model, bucket_cap_mb=0.0001)          # ~100 bytes: about one bucket per layer
        seen = set()
        if hook:
            st = OptccHookState(schedule, runner=runner)

            def counting(s, bucket):
                seen.add(bucket.index())
                return optcc_hook(s, bucket)
            ddp.register_comm_hook(st, counting)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.125)
        grads = []
        for step in range(STEPS):
            g = torch.Generator().manual_seed(100 * rank + step)
            xb = torch.randint(-3, 4, (6, 8), generator=g).float().to(dev)
            c = torch.randint(-2, 3, (6, 4), generator=g).float().to(dev)
            opt.zero_grad()
            (ddp(xb) * c).sum().backward()
            grads.append([p.grad.clone() for p in model.parameters()])
            opt.step()
        if hook:
            st.close()                                  # before destroy_process_group: joins the threads
        params = torch.cat([p.detach().flatten() for p in model.parameters()])
        return grads, params, len(seen)

    ref_grads, ref_params, _ = train(False)
    got_grads, got_params, buckets = train(True)
    mismatches = sum(0 if torch.equal(a, b) else 1 for ga, gb in zip(ref_grads, got_grads) for a, b in zip(ga, gb))
    mismatches += 0 if torch.equal(ref_params, got_params) else 1
    optcc_threads = [t.name for t in threading.enumerate() if t.name.startswith("optcc-")]
    flags = torch.tensor([int(returned_before_done and still_not_done), int(where["thread"] != threading.get_ident()),
                          int(gated_exact), mismatches, 1, int(not optcc_threads)], device=dev)
    dist.all_reduce(flags)
    start = torch.cat([p.detach().flatten() for p in make().to(dev).parameters()])
    if rank == 0:
        with open(out_path, "w") as fh:
            json.dump({"returned_before_done": int(flags[0]) == WORLD, "ran_on_other_thread": int(flags[1]) == WORLD,
                       "gated_result_exact": int(flags[2]) == WORLD, "grad_mismatches": int(flags[3]),
                       "ranks_ok": int(flags[4]), "closed_clean": int(flags[5]) == WORLD, "buckets": buckets, "steps": len(got_grads),
                       "grad_nonzero": sum(int((g != 0).sum()) for g in got_grads[-1]),
                       "param_change": float((got_params - start).abs().max())}, fh)
    dist.destroy_process_group()
    # Every optcc thread is joined by now (closed_clean) and the result is written. torch's own
    # teardown at interpreter exit aborted a rank in 2 of 6 full-suite runs on the shared 2-core
    # machine ("terminate called without an active exception"; once both runners in one run),
    # never in 3 runs of this file alone: that would fail the test for what it does not test
    # (docs/gpu_runner.md, DDP hook), so the rank ends here without interpreter teardown.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    _rank_main(sys.argv[1], sys.argv[2], sys.argv[3])
