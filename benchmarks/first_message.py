"""A worker of `optcc run` at the paper's sizes, from its process start to its first message, then
its host cost per post; each (p, rank) in a fresh process, the transport removed.

The launcher's side runs here once per p (not timed): the generated schedule's file, its
generator re-proved and the per-rank attestation (as `optcc run` writes them). Each worker is
then a fresh Python process that does what gpu_runner.worker does for a generated schedule with
an attestation: import, join torch's fake process group (no rendezvous: its time depends on the
network), load the file and check the attestation (worker._load_schedule), build and check its
rank's part and program (worker._rank_part: check_rank_part, L1-L5 of verifier.streaming_local),
build the executor (worker.rank_executor), bind it to the tensor (prepare) and run
it. It stops the start-up clock inside the first send or receive the executor posts: CPU is the
process's own since it started (interpreter and imports included), peak RSS its high-water mark
then; `w/o torch` leaves out the CPU of `import torch` (gpu_runner.launch forks each rank from a
zygote that imported torch, so an `optcc run` rank does not pay it). Not included: the digest
all-gather and the host-name placement (collectives: network).

Then the same executor runs `--iters` more times on that fake group (every post completes at
once, moves no data; peak RSS after them in --json): CPU time per post (all of the process's threads) and wall time per post,
what the host alone spends per message (docs/gpu_runner.md, "Host cost per post"). "Per post" is
a run's CPU over its posts: it includes the run's landings, snapshots and scalings (about one
local op per two posts), not only the send/recv calls and their waits. The first run (the one
that posts the first message) is reported apart, its CPU per post: the streaming executor
records its events in that run and replays them in later runs.

    python benchmarks/first_message.py [--p 256 1024 4096] [--segments 25] [--iters 3]
    python benchmarks/first_message.py --baseline ../main-worktree [--repeat 3] [--iters 5]

Prints one row per (p, role): the rank's posts, start-up to the first message (CPU, wall, peak
RSS), then µs per post (CPU, wall; the first run's CPU last); the straggler is rank 0 (ℓ = 2), the healthy rank is 1.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ELEMENTS_PER_PIECE = 4          # a small tensor: the host's work, not the copies, is measured


def launcher(p: int, k: int, ell: str, tmp: str) -> tuple[str, str]:
    """What `optcc run` writes before it starts workers: the generated schedule and its attestation."""
    from fractions import Fraction

    from gpu_runner import proof
    from gpu_runner.runners import program_key
    from optcc.cluster import Cluster
    from optcc.generated import GeneratedSchedule
    gen = GeneratedSchedule.of("optcc", Cluster.build(p, 1, {0: Fraction(ell)}), k)
    path, att = os.path.join(tmp, f"s{p}.json"), os.path.join(tmp, f"a{p}.json")
    gen.save(path)
    proof.accept_generator(gen)
    proof.write_generated_attestation_per_rank(gen, att, "float32", False, [program_key("streaming")])
    return path, att


PHASES = (("optcc.generated", "GeneratedSchedule.rank_flows", "part"),          # its arrays, then its Flows
          ("optcc.generated", "GeneratedSchedule.rank_schedule", "part"),
          ("optcc.algorithms.families.local", "check_rank_part", "reference check"),
          ("gpu_runner.proof", "rank_program", "program"),
          ("verifier.streaming_local", "check_rank_program", "L1-L5 check"),
          ("gpu_runner.runners", "make_executor", "executor"),
          ("gpu_runner.streaming", "StreamingExecutor.prepare", "binding"))


def _time_phases(spent: dict) -> None:
    """Wrap each of PHASES (module, attribute path, name) to add its CPU seconds to `spent`."""
    import importlib
    for module, attr, name in PHASES:
        owner = importlib.import_module(module)
        *outer, last = attr.split(".")
        for a in outer:
            owner = getattr(owner, a)
        real = getattr(owner, last)

        def timed(*a, _real=real, _name=name, **kw):
            c0 = time.process_time()
            try:
                return _real(*a, **kw)
            finally:
                spent[_name] = spent.get(_name, 0.0) + time.process_time() - c0
        setattr(owner, last, timed)


def worker(path: str, att: str, p: int, rank: int, iters: int, phases: bool = False) -> dict:
    """One worker, in this fresh process (module docstring)."""
    import resource
    before_torch = time.process_time()
    import torch
    import torch.distributed as dist
    from torch._C._distributed_c10d import ProcessGroup
    from torch.testing._internal.distributed.fake_pg import FakeStore
    torch_import_s = time.process_time() - before_torch

    from gpu_runner import worker as w
    first: dict = {}
    send, recv = ProcessGroup.__dict__["send"], ProcessGroup.__dict__["recv"]   # the methods, unbound

    def at_first(name: str):
        real = getattr(ProcessGroup, name)

        def post(self, *a):
            if not first:
                first.update(cpu_s=time.process_time(), wall_s=time.perf_counter(),
                             rss_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
                ProcessGroup.send, ProcessGroup.recv = send, recv
            return real(self, *a)
        return post
    spent: dict = {}
    if phases:
        _time_phases(spent)
    dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=p)
    args = w.build_parser().parse_args(["--schedule", path, "--attestation", att, "--dtype", "float32"])
    schedule, ex = w.rank_executor(w._load_schedule(args), rank, args)
    tensor = torch.zeros(ELEMENTS_PER_PIECE * len(schedule.pieces))
    ex.prepare(tensor)
    ProcessGroup.send, ProcessGroup.recv = at_first("send"), at_first("recv")
    c_first = time.process_time()
    ex.run(tensor)
    first_run_cpu = time.process_time() - c_first
    posts = sum(map(len, ex.rp.peer_seq.values()))     # the posts, without making the program's Op objects
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(iters):
        ex.run(tensor)
    wall, cpu = (time.perf_counter() - t0) / iters, (time.process_time() - c0) / iters
    end_rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    ex.close()
    dist.destroy_process_group()
    return {"p": p, "rank": rank, "role": "straggler" if rank == 0 else "healthy", "posts": posts,
            "ops": ex.rp.n_ops if hasattr(ex.rp, "n_ops") else len(ex.rp.ops), "first_message_cpu_s": round(first["cpu_s"], 3),
            "torch_import_cpu_s": round(torch_import_s, 3),
            "first_message_wall_s": round(first["wall_s"] - START_WALL, 3),
            "first_message_peak_rss_mib": round(first["rss_mib"]),
            "post_cpu_us": round(cpu / posts * 1e6, 2), "post_wall_us": round(wall / posts * 1e6, 2),
            "first_run_post_cpu_us": round(first_run_cpu / posts * 1e6, 2), "end_peak_rss_mib": round(end_rss_mib),
            **({"phases_cpu_s": {k: round(v, 3) for k, v in spent.items()}} if phases else {})}


START_WALL = time.perf_counter()


def _point(path: str, att: str, p: int, rank: int, iters: int, phases: bool, root: str = ROOT) -> dict:
    """The worker in a fresh process, handed the launcher's key on a pipe as gpu_runner.launch does;
    `root`: the checkout whose packages it imports (this one, or --baseline's)."""
    from gpu_runner.proof import LAUNCH_KEY_FD_ENV, key_pipe, launch_key_hex
    fd = key_pipe(launch_key_hex())
    pythonpath = [root] if root != ROOT else [ROOT, os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, pythonpath)), LAUNCH_KEY_FD_ENV: str(fd)}
    try:
        r = subprocess.run([sys.executable, __file__, "--worker", path, att, str(p), str(rank), str(iters),
                            str(int(phases))],
                           capture_output=True, text=True, env=env, pass_fds=(fd,))
    finally:
        os.close(fd)
    if r.returncode != 0:
        raise SystemExit(r.stderr)
    return json.loads(r.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--p", type=int, nargs="+", default=[256, 1024, 4096])
    ap.add_argument("--segments", type=int, default=25)
    ap.add_argument("--ell", default="2")
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--phases", action="store_true",
                    help="also print the CPU seconds of each start-up phase (its functions timed, calls included)")
    ap.add_argument("--baseline", metavar="DIR",
                    help="another checkout (e.g. a git worktree of main): its workers run the same files, "
                         "alternating with this checkout's; prints medians of --repeat rounds and their ratio")
    ap.add_argument("--repeat", type=int, default=3, help="rounds per (p, rank) with --baseline")
    ap.add_argument("--worker", nargs=6, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        path, att, p, rank, iters, phases = a.worker
        print(json.dumps(worker(path, att, int(p), int(rank), int(iters), phases == "1")))
        return 0
    if a.baseline:
        return _compare(a)
    rows = []
    if not a.json:
        print(f"optcc k={a.segments} ell={a.ell}, generated schedule, transport removed (torch fake process group)")
        print(f"{'p':>5} {'role':<9} {'posts':>7} {'to 1st msg CPU s':>16} {'w/o torch':>9} {'wall s':>7} "
              f"{'peak RSS MiB':>12} {'cpu_us/post':>11} {'wall_us/post':>12} {'1st run cpu_us/post':>19}")
    for p, rank, path, att in _workers(a):
        row = _point(path, att, p, rank, a.iters, a.phases)
        rows.append(row)
        if not a.json:
            print(f"{p:>5} {row['role']:<9} {row['posts']:>7} {row['first_message_cpu_s']:>16.2f} "
                  f"{row['first_message_cpu_s'] - row['torch_import_cpu_s']:>9.2f} {row['first_message_wall_s']:>7.2f} {row['first_message_peak_rss_mib']:>12} "
                  f"{row['post_cpu_us']:>11.2f} {row['post_wall_us']:>12.2f} "
                  f"{row['first_run_post_cpu_us']:>19.2f}", flush=True)
            if a.phases:
                print("      phases (CPU s): " + ", ".join(f"{k} {v:.2f}" for k, v in row["phases_cpu_s"].items()),
                      flush=True)
    if a.json:
        print(json.dumps({"segments": a.segments, "ell": a.ell, "rows": rows}, indent=1))
    return 0


def _compare(a) -> int:
    """--baseline: per (p, rank), --repeat rounds of a worker on the baseline's packages and one on
    this checkout's, which goes first alternating per round (the machine's load drifts); medians."""
    import statistics
    base = os.path.abspath(a.baseline)
    fields = ("post_cpu_us", "first_run_post_cpu_us", "first_message_cpu_s", "end_peak_rss_mib",
              "first_message_wo_torch_s", "first_message_peak_rss_mib")
    print(f"optcc k={a.segments} ell={a.ell}, generated schedule, transport removed; medians of {a.repeat} "
          f"rounds, {a.iters} runs each after the first; base = {base}")
    print(f"{'p':>5} {'role':<9} {'posts':>7} {'cpu_us/post base':>16} {'this':>6} {'this/base':>9} "
          f"{'1st run base':>12} {'this':>6} {'to 1st msg CPU s base':>21} {'this':>6} {'w/o torch base':>14} {'this':>6} "
          f"{'1st msg RSS MiB base':>20} {'this':>6} {'end RSS MiB base':>16} {'this':>6}")
    for p, rank, path, att in _workers(a):
        got: dict = {"base": [], "this": []}
        for i in range(a.repeat):
            order = (("base", base), ("this", ROOT)) if i % 2 == 0 else (("this", ROOT), ("base", base))
            for name, root in order:
                row = _point(path, att, p, rank, a.iters, False, root)
                row["first_message_wo_torch_s"] = row["first_message_cpu_s"] - row["torch_import_cpu_s"]
                got[name].append(row)
        med = {name: {f: statistics.median(r[f] for r in rows) for f in fields} for name, rows in got.items()}
        b, t = med["base"], med["this"]
        print(f"{p:>5} {got['this'][0]['role']:<9} {got['this'][0]['posts']:>7} {b['post_cpu_us']:>16.2f} "
              f"{t['post_cpu_us']:>6.2f} {t['post_cpu_us'] / b['post_cpu_us']:>9.2f} "
              f"{b['first_run_post_cpu_us']:>12.2f} {t['first_run_post_cpu_us']:>6.2f} "
              f"{b['first_message_cpu_s']:>21.2f} {t['first_message_cpu_s']:>6.2f} "
              f"{b['first_message_wo_torch_s']:>14.2f} {t['first_message_wo_torch_s']:>6.2f} "
              f"{b['first_message_peak_rss_mib']:>20.0f} {t['first_message_peak_rss_mib']:>6.0f} "
              f"{b['end_peak_rss_mib']:>16.0f} {t['end_peak_rss_mib']:>6.0f}", flush=True)
    return 0


def _workers(a):
    """(p, rank, schedule file, attestation) per point: each p's launcher output once, the healthy
    rank then the straggler; the files live until the caller is done with them."""
    with tempfile.TemporaryDirectory(prefix="optcc-first-message-") as tmp:
        for p in a.p:
            path, att = launcher(p, a.segments, a.ell, tmp)
            for rank in (1, 0):
                yield p, rank, path, att


if __name__ == "__main__":
    sys.exit(main())
