"""One worker's start-up at the paper's sizes: a generated schedule (optcc.generated) against the
flow list, each point in a fresh process (peak RSS is that process's).

  generated  the per-rank path (optcc run's default beyond the build limit): the launcher
             re-proves the generator and attests (timed apart, "launcher"); the worker loads the
             parameter file (its sources digest), checks the attestation, builds this rank's flows
             (families.local), its part, its streaming program, checks the program (L1-L5 of
             verifier.streaming_local) and its digest (gpu_runner.proof.generated_rank_schedule).
  flows      a worker on the flow-list file: load every flow, check the attestation, build its
             rank's program from the whole schedule, compare its digest. Its attestation is
             signed by this script with the digest of the rank's program (a stand-in for the
             launcher's instance proof, which takes minutes here); only the worker is timed.

Transport is stubbed.

    python benchmarks/scale.py [--p 256 1024 4096] [--segments 25] [--flows-p 256 --flows-segments 4]

Prints one row per (p, k, role, form): the rank's flows, seconds for rank_flows alone and for
the whole start-up (wall, and this process's CPU time, which other load on the machine inflates
less), peak RSS; then the host rule (optcc.segments) for 8 GiB at 50 GB/s.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from fractions import Fraction

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _sign(body: dict, path: str) -> None:
    from gpu_runner import proof
    with open(path, "w") as fh:
        json.dump({**body, "hmac_sha256": proof._mac(proof._key(), body)}, fh)


def point(p: int, k: int, rank: int, form: str) -> dict:
    """Run in a fresh process: the worker's start-up for `rank`, timed after the files exist."""
    from gpu_runner import proof
    from optcc.cluster import Cluster
    from optcc.generated import GeneratedSchedule
    from optcc.lowering.digest import FORMAT as DIGEST_FORMAT
    from optcc.lowering.digest import rank_program_sha256
    from optcc.lowering.streaming import DEFAULT_WINDOW, rank_program
    cluster = Cluster.build(p, 1, {0: Fraction(2)})
    gen = GeneratedSchedule.of("optcc", cluster, k)
    tmp = tempfile.mkdtemp(prefix="optcc-scale-")
    path, att = os.path.join(tmp, "s.json"), os.path.join(tmp, "attestation.json")
    t0 = time.perf_counter()
    if form == "generated":                    # the launcher's side, real: generator re-proved, attested
        gen.save(path)
        proof.accept_generator(gen)
        proof.write_generated_attestation_per_rank(gen, att, "int64", True, [(DEFAULT_WINDOW, False)])
    else:                                      # a stand-in: the instance proof is not run (minutes here)
        full = gen.materialize()
        full.save(path)
        digests = [""] * p
        digests[rank] = rank_program_sha256(rank_program(full, rank))
        body = {"format": proof.ATTESTATION_FORMAT, "schedule_sha256": full.sha256(),
                "accepted": "signed by benchmarks/scale.py", "numerics": None,
                "programs": [{"format": DIGEST_FORMAT, "window": DEFAULT_WINDOW, "recv_order": False,
                              "ranks_sha256": digests}]}
        _sign(body, att)
        del full
    launcher_s = time.perf_counter() - t0
    proof.forget()
    t0 = time.perf_counter()
    rf = gen.rank_flows(rank)
    t_flows = time.perf_counter() - t0
    n_rank = len(rf)
    del rf
    t0, c0 = time.perf_counter(), time.process_time()
    if form == "generated":
        loaded = GeneratedSchedule.load(path)
        proof.accept_generated_attestation(loaded, att)
        part = proof.generated_rank_schedule(loaded, rank)     # builds, lowers and checks (L1-L5) its program
        rp = proof.built_program(part, DEFAULT_WINDOW, False)
        proof.check_proved_program(part, rp, DEFAULT_WINDOW, False)   # what the executor does with it
    else:
        from optcc.schedule import Schedule
        loaded = Schedule.load(path)
        proof.accept_attestation(loaded, att)
        proof.rank_program_of(loaded, rank, DEFAULT_WINDOW, False)
    total, cpu = time.perf_counter() - t0, time.process_time() - c0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"p": p, "k": k, "rank": rank, "role": "straggler" if rank == 0 else "healthy", "form": form,
            "rank_flows": n_rank, "rank_flows_s": round(t_flows, 3), "startup_s": round(total, 3),
            "startup_cpu_s": round(cpu, 3),
            "launcher_s": round(launcher_s, 3) if form == "generated" else None,
            "peak_rss_mib": round(rss), "file_bytes": os.path.getsize(path)}


def _run_point(p, k, rank, form) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH", "")]))}
    r = subprocess.run([sys.executable, __file__, "--point", str(p), str(k), str(rank), form],
                       capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise SystemExit(r.stderr)
    return json.loads(r.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--p", type=int, nargs="+", default=[256, 1024, 4096])
    ap.add_argument("--segments", type=int, default=25)
    ap.add_argument("--flows-p", type=int, nargs="*", default=[256], help="p of the flow-list comparison points")
    ap.add_argument("--flows-segments", type=int, default=4)
    ap.add_argument("--point", nargs=4, help=argparse.SUPPRESS)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.point:
        p, k, rank, form = args.point
        print(json.dumps(point(int(p), int(k), int(rank), form)))
        return 0
    rows = []
    plan = [(p, args.segments, r, "generated") for p in args.p for r in (1, 0)]
    plan += [(p, args.flows_segments, r, form) for p in args.flows_p for r in (1, 0) for form in ("generated", "flows")]
    for p, k, r, form in plan:
        rows.append(_run_point(p, k, r, form))
        row = rows[-1]
        if not args.json:
            print(f"p={row['p']:5d} k={row['k']:3d} {row['role']:9s} {row['form']:9s} flows={row['rank_flows']:8d} "
                  f"rank_flows {row['rank_flows_s']:7.3f} s  start-up {row['startup_s']:8.3f} s (CPU {row['startup_cpu_s']:.3f} s)  "
                  + ("" if row["launcher_s"] is None else f"launcher {row['launcher_s']:6.2f} s  ")
                  + f"peak RSS {row['peak_rss_mib']:6d} MiB  file {row['file_bytes']} B", flush=True)
    from optcc.cluster import Cluster
    from optcc.segments import HOST_POST_S
    n, B = 8 * 2**30, Cluster.build(2).bandwidth
    kh = Fraction(n) / (2 * HOST_POST_S * B)
    host = {"rule": "k·H ≤ n/(2·c_post·B)", "c_post_us": float(HOST_POST_S * 10**6), "n_bytes": n,
            "bandwidth": float(B), "max_k_times_H": float(kh), "p_limit_at_k": {k: int(kh // k) + 1 for k in (1, 7, 25)}}
    if args.json:
        print(json.dumps({"rows": rows, "host": host}, indent=1))
    else:
        print(f"host rule {host['rule']}: c_post = {host['c_post_us']:.0f} µs, 8 GiB at {B / 1e9:.0f} GB/s: "
              f"k·H ≤ {float(kh):.0f}, so the host keeps up to p = "
              + ", ".join(f"{v} at k = {k}" for k, v in host["p_limit_at_k"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
