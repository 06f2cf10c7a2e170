"""The adaptive hook state (`OptccHookState.adaptive()`): its verdict is the probe's rule read off
the gradients' own timed messages; on 4 gloo ranks whose receives pace themselves like a link, with
rank 0's link at half rate for a few steps,
it switches to OptCC within 3 steps and back within 3 steps of the repair, every rank records
the same switches, and the parameters equal the default hook's within 1e-5; ranks that plan
different clusters all stop with an error naming them.

Each rank is this file run as a script (`python tests/test_ddp_adaptive_gloo.py MODE OUT_DIR`).
"""
import json
import os
import sys

import pytest

torch = pytest.importorskip("torch")

WORLD = 4
STEPS = 14
SLOW = (3, 8)            # rank 0's link at half rate in steps 3..7
LINK_BYTES_PER_S = 4e6   # the links: each receive lasts at least its bytes / this rate (loopback alone is µs
                         # of work under ms of scheduling noise, where the rule rightly cannot tell)


def _row(p, seconds, nbytes):
    """FlowTimes.row() of one receiving rank: seconds, bytes, messages per source (2 messages each)."""
    return list(seconds) + list(nbytes) + [0.0 if b == 0 else 2.0 for b in nbytes]


def _step(p, slow_rank=None, ell=1.0, chunk=1e6, rate=5e6, jitter=()):
    """One timed step's gathered rows: every flow `chunk` bytes at `rate`, the flows into and out
    of `slow_rank` at rate/ell; jitter: {(src, dst): factor} on a flow's time."""
    jit = dict(jitter)
    rows = []
    for d in range(p):
        secs, nb = [0.0] * p, [0.0] * p
        for s in range(p):
            if s != d:
                slow = ell if slow_rank in (s, d) else 1.0
                secs[s] = 2 * chunk / (rate / slow) * jit.get((s, d), 1.0)
                nb[s] = 2 * chunk
        rows.append(_row(p, secs, nb))
    return rows


def test_verdict_names_the_slow_host_with_its_ell():
    from gpu_runner.adaptive import verdict
    hosts = [f"node{r}" for r in range(4)]
    est = verdict([_step(4, 0, 2.0), _step(4, 0, 2.0, jitter={(1, 2): 1.05}), _step(4, 0, 2.0)], hosts)
    assert [r["straggler"] for r in est["ranks"]] == [True, False, False, False]
    assert est["ranks"][0]["ell"] == pytest.approx(2.0, rel=1e-9)
    assert est["cluster"]["stragglers"] == [{"rank": 0, "ell": 2}]
    assert est["cluster"]["bandwidth"] == 5 * 10**6


def test_verdict_names_nobody_on_even_links_or_after_one_slow_step():
    from gpu_runner.adaptive import verdict
    hosts = [f"node{r}" for r in range(4)]
    even = verdict([_step(4), _step(4, jitter={(0, 1): 1.08}), _step(4)], hosts)
    assert not any(r["straggler"] for r in even["ranks"]) and even["cluster"]["stragglers"] == []
    # the best reading counts (errors are one-sided): a host slow in the last two steps only is not named
    once = verdict([_step(4), _step(4, 0, 2.0), _step(4, 0, 2.0)], hosts)
    assert not any(r["straggler"] for r in once["ranks"])


def test_verdict_is_the_probes_rule():
    """A slowdown inside the spread is not named (ℓ·(1 − spread) < min_ell), as the probe decides."""
    from gpu_runner.adaptive import verdict
    hosts = [f"node{r}" for r in range(4)]
    slower = {(s, 1): 1.6 for s in (0, 2, 3)}
    noisy = [_step(4, 0, 1.4), _step(4, 0, 1.4, jitter=slower), _step(4, 0, 1.4, jitter=slower)]
    est = verdict(noisy, hosts, min_ell=1.25)
    assert est["ranks"][0]["ell"] == pytest.approx(1.4, rel=1e-9)
    assert est["spread"] == pytest.approx(1 - 1 / 1.6, rel=1e-9)
    assert not est["ranks"][0]["straggler"] and est["ranks"][0]["decision"].startswith("within the spread")


def test_the_per_message_cost_is_taken_off_each_flow():
    from gpu_runner.adaptive import flow_rates
    rows = [_row(3, [0.0, 0.3, 0.3], [0, 1e6, 1e6]), _row(3, [0.3, 0.0, 0.3], [1e6, 0, 1e6]),
            _row(3, [0.3, 0.3, 0.0], [1e6, 1e6, 0])]
    rates, c = flow_rates([rows], 0.05)
    assert rates[0][1][2] == pytest.approx(1e6 / (0.3 - 2 * 0.05))
    assert c == 0.05 and rates[0][1][0] == pytest.approx(1e6 / (0.3 - 2 * 0.05))
    _, capped = flow_rates([rows], 1.0)          # never more than half the shortest message time
    assert capped == pytest.approx(0.075)


def test_bad_settings_name_their_field():
    from gpu_runner.ddp_hook import OptccHookState
    from optcc.errors import OptccError
    with pytest.raises(OptccError) as e:
        OptccHookState.adaptive(min_ell=1.0)
    assert e.value.field == "min_ell"
    with pytest.raises(OptccError) as e:
        OptccHookState.adaptive(check_every=0)
    assert e.value.field == "check_every"


def _results(tmp_path, mode):
    from script_ranks import launch_script_ranks
    codes, logs, _ = launch_script_ranks(__file__, [mode, str(tmp_path)], WORLD, timeout=240)
    assert all(c == 0 for c in codes), "\n".join(logs)
    return [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(WORLD)], logs


@pytest.mark.slow
def test_switches_within_three_steps_each_way_and_trains_like_default(tmp_path):
    res, logs = _results(tmp_path, "train")
    modes = res[0]["modes"]
    assert all(r["modes"] == modes and r["switches"] == res[0]["switches"] for r in res)   # one decision
    to_optcc = modes.index("optcc")
    back = modes.index("default", to_optcc)
    assert SLOW[0] < to_optcc <= SLOW[0] + 3, modes
    assert SLOW[1] < back <= SLOW[1] + 3, modes
    assert "optcc" not in modes[back:], modes
    sw = res[0]["switches"]
    assert [s["to"] for s in sw] == ["optcc", "default"] and [s["step"] for s in sw] == [to_optcc, back]
    # ℓ reads high here (a late peer adds its wait to a receive: one-sided), never low
    assert sw[0]["hosts"] == ["node0"] and 1.6 < sw[0]["ell"]["node0"] < 3.5
    assert any("optcc adaptive: from step" in line and "node0 ℓ =" in line for line in logs[0].splitlines())
    assert all(r["params_sha"] == res[0]["params_sha"] for r in res)       # identical on every rank
    assert max(r["max_diff_to_default"] for r in res) <= 1e-5
    assert res[0]["param_norm"] > 0


@pytest.mark.slow
def test_ranks_that_plan_different_clusters_all_stop_naming_them(tmp_path):
    res, _ = _results(tmp_path, "disagree")
    for r in res:
        assert "the ranks hold different schedules" in r["error"] and "ranks 2 hold" in r["error"], r


def _rank_main(mode, out_dir):
    import hashlib
    import time
    from datetime import timedelta

    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    from gpu_runner import adaptive
    from gpu_runner.ddp_hook import OptccHookState, optcc_hook

    rank = int(os.environ["RANK"])
    os.environ["OPTCC_HOSTNAME"] = f"node{rank}"     # one host per rank, as the adaptive state needs
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    held = {"on": False}
    real = adaptive._irecv

    class Paced:                          # a receive lasts its bytes / rate, at half rate on rank 0's link
        def __init__(self, tensor, src, group):
            self.work, self.src, self.nbytes = real(tensor, src, group), src, tensor.numel() * tensor.element_size()

        def wait(self):
            t0 = time.perf_counter()
            self.work.wait()
            ell = 2.0 if held["on"] and 0 in (rank, self.src) else 1.0
            time.sleep(max(0.0, self.nbytes * ell / LINK_BYTES_PER_S - (time.perf_counter() - t0)))
    adaptive._irecv = Paced
    if mode == "disagree" and rank == 2:
        real_plan = adaptive.plan_cluster

        def other(est, base=None):
            c = real_plan(est, base)
            from optcc.cluster import Cluster
            return Cluster.build(c.p, stragglers={r: l + 1 for r, l in c.stragglers.items()}, bandwidth=c.bandwidth)
        adaptive.plan_cluster = other

    def make():
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(32, 256), nn.Tanh(), nn.Linear(256, 256), nn.Tanh(), nn.Linear(256, 8))
    model, ref_model = make(), make()
    ddp = DDP(model, bucket_cap_mb=0.15)              # two buckets
    ref = DDP(ref_model, bucket_cap_mb=0.15)          # the default all-reduce hook
    state = OptccHookState.adaptive(timeout=60)
    ddp.register_comm_hook(state, optcc_hook)
    opts = [torch.optim.SGD(m.parameters(), lr=0.05) for m in (ddp, ref)]
    out = {}
    try:
        for step in range(STEPS):
            held["on"] = SLOW[0] <= step < SLOW[1]
            g = torch.Generator().manual_seed(100 * rank + step)
            x, y = torch.randn(16, 32, generator=g), torch.randn(16, 8, generator=g)
            for m, opt in zip((ddp, ref), opts):
                opt.zero_grad()
                ((m(x) - y) ** 2).mean().backward()
                opt.step()
    except Exception as e:  # noqa: BLE001 - the test reads what each rank was told
        out["error"] = str(e)
    try:
        state.close(timeout=30)
    except Exception as e:  # noqa: BLE001
        out.setdefault("error", str(e))
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    flat_ref = torch.cat([p.detach().reshape(-1) for p in ref_model.parameters()])
    out.update({"modes": [t["mode"] for t in state.trace], "switches": state.switches,
                "params_sha": hashlib.sha256(flat.numpy().tobytes()).hexdigest(),
                "max_diff_to_default": float((flat - flat_ref).abs().max()), "param_norm": float(flat.norm())})
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as fh:
        json.dump(out, fh)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)            # no process-group teardown after a rank stopped on the error


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    _rank_main(sys.argv[1], sys.argv[2])
