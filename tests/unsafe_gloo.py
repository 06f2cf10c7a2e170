"""Run a schedule the verifier refuses on real gloo processes (the runner's `unsafe=True` test path).

`run_unsafe_on_gloo(schedule, runner, tmp)` starts p local processes (a file rendezvous, no
network), each executing its rank with gpu_runner's Executor ("step") or StreamingExecutor
("streaming") on int64 inputs x_r[e] = 1000·(r + 1) + e, and returns every rank's final tensor
as a list of ints. `python unsafe_gloo.py SCHEDULE RUNNER RANK WORLD STORE OUT` is one rank.
"""
import json
import os
import subprocess
import sys

NUMEL = 7


def inputs(rank: int) -> list[int]:
    return [1000 * (rank + 1) + e for e in range(NUMEL)]


def run_unsafe_on_gloo(schedule, runner: str, tmp, timeout: float = 120) -> list[list[int]]:
    path = os.path.join(str(tmp), f"schedule_{runner}.json")
    schedule.save(path)
    store = os.path.join(str(tmp), f"store_{runner}")
    p = schedule.cluster.p
    outs = [os.path.join(str(tmp), f"out_{runner}_{r}.json") for r in range(p)]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), path, runner, str(r), str(p), store, outs[r]],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(p)]
    errors = []
    for r, proc in enumerate(procs):
        try:
            _, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
        if proc.returncode != 0:
            errors.append(f"rank {r} exited {proc.returncode}: {err[-1500:]}")
    assert not errors, "\n".join(errors)
    result = []
    for out in outs:
        with open(out) as fh:
            result.append(json.load(fh))
    return result


def _rank(path, runner, rank, world, store, out) -> None:
    import torch
    import torch.distributed as dist

    from gpu_runner.executor import Executor
    from gpu_runner.streaming import StreamingExecutor
    from optcc.schedule import Schedule

    schedule = Schedule.load(path)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    try:
        x = torch.tensor(inputs(rank), dtype=torch.int64)
        if runner == "step":
            ex = Executor(schedule, rank, unsafe=True)
        else:
            ex = StreamingExecutor(schedule, rank, unsafe=True)
        ex.run(x)
        if runner != "step":
            ex.close()
        dist.barrier()
    finally:
        dist.destroy_process_group()
    with open(out, "w") as fh:
        json.dump(x.tolist(), fh)


if __name__ == "__main__":
    a = sys.argv[1:]
    _rank(a[0], a[1], int(a[2]), int(a[3]), a[4], a[5])
