"""A training job whose link degrades and is repaired, on the shaped testbed (root): the scenario
of the adaptive hook's test, its benchmark and docs/guide.md.

`run_scenario(tb, hook, steps, events)` trains a small MLP with DDP on the testbed's ranks
(`python -m gpu_runner adaptive-train`, one rank per namespace) and reshapes the links between
steps: before step s of `events` (s -> rates in Mbit/s per rank), rank 0 stops at the step
boundary, this process calls `Testbed.shape` and lets it go on (a file handshake in a private
folder). Rank 0 returns each step's wall time (its own forward, backward and optimizer step; the
pauses at the handshakes excluded), the adaptive state's per-step mode and switches, whether
every rank holds the same parameters, and the parameters themselves (to compare hooks).
Hooks: `default` (DDP's own all-reduce), `adaptive` (OptccHookState.adaptive(cluster)),
`static` (OptccHookState of the OptCC schedule for `cluster` at k = `segments`).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from datetime import timedelta

from gpu_runner.watchdog import Watchdog, run_rank

HOOKS = ("default", "adaptive", "static")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m gpu_runner adaptive-train")
    ap.add_argument("--hook", choices=HOOKS, required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--pause-at", default="", help="comma-separated steps rank 0 stops before")
    ap.add_argument("--control", help="folder of the handshake files")
    ap.add_argument("--cluster", help="cluster JSON: the adaptive state's per-message cost, the static schedule's cluster")
    ap.add_argument("--segments", type=int, default=1)
    ap.add_argument("--sample-bytes", type=int, help="the adaptive state's sample_bytes (default: its own)")
    ap.add_argument("--check-every", type=int, help="the adaptive state's check_every (default: its own)")
    ap.add_argument("--width", type=int, default=256, help="hidden width of the MLP")
    ap.add_argument("--bucket-mb", type=float, default=0.5)
    ap.add_argument("--params-out", help="rank 0 writes the final parameters here (torch.save)")
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--result")
    return ap


def main(argv=None) -> int:
    return run_rank("optcc-adaptive-train", _main, build_parser().parse_args(argv))


def _model(width: int):
    import torch
    from torch import nn
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(64, width), nn.Tanh(), nn.Linear(width, width), nn.Tanh(),
                         nn.Linear(width, width), nn.Tanh(), nn.Linear(width, 8))


def _hook_state(args):
    from gpu_runner.ddp_hook import OptccHookState
    from optcc.cluster import Cluster
    cluster = None
    if args.cluster:
        with open(args.cluster) as fh:
            cluster = Cluster.from_json(json.load(fh))
    if args.hook == "adaptive":
        kw = {key: v for key, v in (("sample_bytes", args.sample_bytes), ("check_every", args.check_every)) if v}
        return OptccHookState.adaptive(cluster, timeout=args.timeout, **kw)
    from optcc.algorithms import build_schedule
    return OptccHookState(build_schedule("optcc", cluster, args.segments), timeout=args.timeout)


def _pause(control: str, step: int, watchdog) -> None:
    """Rank 0: say the step boundary is reached, wait for the go."""
    open(os.path.join(control, f"at{step}"), "w").close()
    go = os.path.join(control, f"go{step}")
    watchdog.waiting(f"the testbed to reshape before step {step}")
    while not os.path.exists(go):
        time.sleep(0.01)
    watchdog.beat()


def _main(args, rank: int) -> int:
    import hashlib

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from gpu_runner.ddp_hook import optcc_hook
    torch.set_num_threads(1)
    watchdog = Watchdog(rank, args.timeout, label="optcc-adaptive-train")
    watchdog.phase("the process group to form")
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.timeout))
    watchdog.beat()
    model = _model(args.width)
    ddp = DDP(model, bucket_cap_mb=args.bucket_mb)
    state = None
    if args.hook != "default":
        state = _hook_state(args)
        ddp.register_comm_hook(state, optcc_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    pauses = {int(s) for s in args.pause_at.split(",") if s}
    times = []
    for step in range(args.steps):
        if step in pauses:
            if rank == 0:
                _pause(args.control, step, watchdog)
            dist.barrier()
        watchdog.phase(f"step {step}")
        g = torch.Generator().manual_seed(1000 * rank + step)
        x, y = torch.randn(32, 64, generator=g), torch.randn(32, 8, generator=g)
        t0 = time.perf_counter()
        opt.zero_grad()
        ((ddp(x) - y) ** 2).mean().backward()
        opt.step()
        times.append(time.perf_counter() - t0)
    watchdog.phase("the end of the run")
    if state is not None:
        state.close(timeout=30)
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    shas: list = [None] * dist.get_world_size()
    dist.all_gather_object(shas, hashlib.sha256(flat.numpy().tobytes()).hexdigest())
    if rank == 0:
        res = {"hook": args.hook, "segments": args.segments if args.hook == "static" else None,
               "step_seconds": times, "params_identical": len(set(shas)) == 1, "params": flat.numel(),
               "modes": [t["mode"] for t in state.trace] if args.hook == "adaptive" else None,
               "verdicts": [t.get("verdict") for t in state.trace] if args.hook == "adaptive" else None,
               "sample_bytes": [t["sample_bytes"] for t in state.trace] if args.hook == "adaptive" else None,
               "switches": state.switches if args.hook == "adaptive" else None}
        if args.params_out:
            torch.save(flat, args.params_out)
        with open(args.result, "w") as fh:
            json.dump(res, fh)
    dist.barrier()
    watchdog.disable()
    sys.stdout.flush()
    os._exit(0)


def run_scenario(tb, hook: str, steps: int, events: dict, *, cluster: dict | None = None, segments: int = 1,
                 width: int = 256, timeout_s: float = 120.0, params_out: str | None = None,
                 sample_bytes: int | None = None, check_every: int | None = None) -> dict:
    """Run the scenario on Testbed `tb` (module docstring); rank 0's result."""
    from gpu_runner.testbed import measure
    with tempfile.TemporaryDirectory(prefix="optcc-adaptive-") as control:
        os.chmod(control, 0o777)
        args = ["adaptive-train", "--hook", hook, "--steps", str(steps), "--control", control,
                "--pause-at", ",".join(str(s) for s in sorted(events)), "--width", str(width),
                "--segments", str(segments)]
        if cluster is not None:
            path = os.path.join(control, "cluster.json")
            with open(path, "w") as fh:
                json.dump(cluster, fh)
            args += ["--cluster", path]
        if params_out:
            args += ["--params-out", params_out]
        if sample_bytes:
            args += ["--sample-bytes", str(sample_bytes)]
        if check_every:
            args += ["--check-every", str(check_every)]
        stop = threading.Event()
        shaper = threading.Thread(target=_shape_on_cue, args=(tb, control, events, stop), daemon=True)
        shaper.start()
        try:
            return measure(tb, args, timeout_s)
        finally:
            stop.set()
            shaper.join(10)


def _shape_on_cue(tb, control: str, events: dict, stop) -> None:
    for step in sorted(events):
        while not os.path.exists(os.path.join(control, f"at{step}")):
            if stop.wait(0.01):
                return
        tb.shape(events[step])
        open(os.path.join(control, f"go{step}"), "w").close()


def scenario_events(p: int, rate_mbit: float, degrade: int, restore: int, ell: float = 2.0) -> dict:
    """Before step `degrade` rank 0's link runs at rate/ℓ, before step `restore` at rate again."""
    slow = [rate_mbit / ell] + [rate_mbit] * (p - 1)
    return {degrade: slow, restore: [rate_mbit] * p}


def testbed_overhead(tb, size: int = 256 * 1024, repeats: int = 2, timeout_s: float = 60.0) -> dict:
    """The probe's cluster JSON on the testbed as it is shaped now (its measured per-message cost
    is what the adaptive state plans with; its stragglers are not used)."""
    from gpu_runner.probe import worker_args
    from gpu_runner.testbed import measure
    return measure(tb, ["probe", *worker_args(size, repeats, None, 1.1)], timeout_s)["cluster"]
