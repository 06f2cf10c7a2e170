"""The DDP hook, called as docs/gpu_runner.md shows it (`OptccHookState(schedule)`,
`register_comm_hook(state, optcc_hook)`), decides what `optcc run` decides before any message:
numerics for the bucket's dtype, the same schedule on every rank, and a watchdog by default.

Each rank is this file run as a script (`python tests/gpu_runner/test_ddp_gate_gloo.py CASE WORKDIR`); a
rank prints one line RESULT: ... or ERROR: ... and exits."""
import json
import os
import sys
import time

import pytest
from script_ranks import launch_script_ranks

torch = pytest.importorskip("torch")


def _launch(case, world, tmp_path, timeout=120):
    return launch_script_ranks(__file__, [case, str(tmp_path)], world, timeout)


def _schedules(tmp_path):
    from fractions import Fraction as F

    from optcc.algorithms import build_schedule
    from optcc.cluster import Cluster
    from optcc.schedule import Flow, Schedule
    cancel = Schedule(Cluster.build(2), [F(1)], [Flow(0, 1, 0, "add", F(0), coef=2**20),
                                                 Flow(0, 1, 0, "add", F(1), coef=1 - 2**20),
                                                 Flow(1, 0, 0, "copy", F(2))], meta={"algorithm": "hand-cancel"})
    cancel.save(str(tmp_path / "cancel.json"))
    build_schedule("ring", Cluster.build(2), 1).save(str(tmp_path / "ring1.json"))
    build_schedule("ring", Cluster.build(2), 2).save(str(tmp_path / "ring2.json"))


def test_the_hook_refuses_what_optcc_run_refuses_on_numerics(tmp_path):
    """A proved flow list whose float32 sums cancel catastrophically (x0·2²⁰ − x0·(2²⁰ − 1)):
    `optcc run` refuses it (tests/verifier/test_trust_numerics.py); so does the hook, on every rank, at the
    first bucket; with allow_worse_numerics=True it trains."""
    _schedules(tmp_path)
    codes, logs, _ = _launch("numerics", 2, tmp_path)
    assert codes == [0, 0], logs
    for log in logs:
        line = [x for x in log.splitlines() if x.startswith("ERROR:")]
        assert line and "numerics: float32: not a summation tree" in line[0] and "allow" in line[0], log
    codes, logs, _ = _launch("numerics-allowed", 2, tmp_path)
    assert codes == [0, 0] and all("RESULT: trained" in log for log in logs), logs


def test_ranks_handed_different_proved_schedules_are_refused_naming_them(tmp_path):
    """Rank 0 holds ring k = 1, rank 1 ring k = 2 (each proved): every rank stops with the ranks
    named, none trains, none hangs."""
    _schedules(tmp_path)
    codes, logs, _ = _launch("disagree", 2, tmp_path)
    assert codes == [0, 0], logs
    for log in logs:
        line = [x for x in log.splitlines() if x.startswith("ERROR:")]
        assert line and "the ranks hold different schedules: ranks 0 hold sha256" in line[0], log
        assert "ranks 1 hold sha256" in line[0], log


def test_the_hook_times_out_by_default_instead_of_hanging(tmp_path):
    """Rank 1 never reaches its backward pass: rank 0's bucket waits, and the hook's default
    watchdog (given 3 s here; the default is 60 s and on) ends it with an error before the peer
    gives up at 10 s."""
    _schedules(tmp_path)
    import re
    codes, logs, _ = _launch("stuck", 2, tmp_path, timeout=90)
    assert codes[0] == 124, logs
    got = re.search(r"optcc-ddp-hook rank 0: error: timed out after ([0-9.]+) s \(timeout 3 s\)", logs[0])
    assert got and float(got.group(1)) < 9 and "a peer rank is dead or hung" in logs[0], logs


def test_the_default_state_has_a_watchdog():
    from gpu_runner.ddp_hook import DEFAULT_TIMEOUT_S, OptccHookState
    from optcc.algorithms import build_schedule
    from optcc.cluster import Cluster
    from optcc.errors import OptccError
    state = OptccHookState(build_schedule("ring", Cluster.build(2), 1))
    assert state.timeout == DEFAULT_TIMEOUT_S == 60.0
    with pytest.raises(OptccError, match="timeout"):
        OptccHookState(build_schedule("ring", Cluster.build(2), 1), timeout=0)


def _rank_main(case, workdir):
    from datetime import timedelta

    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    from gpu_runner.ddp_hook import OptccHookState, optcc_hook
    from optcc.schedule import Schedule

    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    rank = dist.get_rank()
    name = {"numerics": "cancel", "numerics-allowed": "cancel", "disagree": f"ring{rank + 1}",
            "stuck": "ring1"}[case]
    schedule = Schedule.load(os.path.join(workdir, f"{name}.json"))
    kwargs = {"allow_worse_numerics": True} if case == "numerics-allowed" else {}
    if case == "stuck":
        kwargs["timeout"] = 3
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
    ddp_model = DDP(model)
    state = OptccHookState(schedule, **kwargs)
    ddp_model.register_comm_hook(state, optcc_hook)       # the documented call
    opt = torch.optim.SGD(ddp_model.parameters(), lr=0.1)
    try:
        if case == "stuck" and rank == 1:
            time.sleep(10)                                # a peer that sends nothing for 10 s
            raise RuntimeError("the stuck peer gives up")
        for step in range(2):
            x = torch.randn(8, 4, generator=torch.Generator().manual_seed(10 * rank + step))
            opt.zero_grad()
            nn.functional.mse_loss(ddp_model(x), torch.zeros(8, 2)).backward()
            opt.step()
        print("RESULT: trained", json.dumps(float(next(model.parameters()).sum())), flush=True)
        state.close()
    except Exception as e:  # noqa: BLE001 - the test reads the line
        print(f"ERROR: {type(e).__name__}: {e}", flush=True)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    _rank_main(sys.argv[1], sys.argv[2])
