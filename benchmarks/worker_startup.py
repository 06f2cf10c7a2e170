"""What one worker of `optcc run` does before its first message, with and without the launcher's
attestation (no process group: the proof and program work only, in this process).

  certificate  a worker started by torchrun with --certificate: re-check the certificate
               (witness, causality, runnable), then prove every rank's streaming program
  attestation  a worker started by optcc: check the launcher's signature, build its own
               rank's program, compare its digest (gpu_runner.proof.accept_attestation)

    python benchmarks/worker_startup.py [--p 16] [--segments 16] [--runner streaming]

Prints seconds per worker for each path and their ratio (one run, same machine).
"""
import argparse
import os
import tempfile
import time

import gpu_runner.proof as proof
from gpu_runner.launch import attested_worker_args, check_runner
from gpu_runner.runners import program_key
from optcc.algorithms import build_schedule
from optcc.cluster import Cluster
from optcc.schedule import Schedule
from verifier import prove_allreduce, write_certificate


def _worker(path, rank, runner, certificate=None, attestation=None) -> float:
    proof.forget()                               # a fresh worker process knows nothing
    t0 = time.perf_counter()
    schedule = Schedule.load(path)
    if attestation:
        proof.accept_attestation(schedule, attestation)
    else:
        proof.require_proof(schedule, certificate)
    proof.require_numerics(schedule, "float32")
    key = program_key(runner)
    if key is not None:
        proof.rank_program_of(schedule, rank, *key)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--p", type=int, default=16)
    ap.add_argument("--segments", type=int, default=16)
    ap.add_argument("--ell", default="2")
    ap.add_argument("--runner", default="streaming")
    a = ap.parse_args()
    schedule = build_schedule("optcc", Cluster.build(a.p, stragglers={0: a.ell}), a.segments)
    with tempfile.TemporaryDirectory() as tmp:
        path, cert = os.path.join(tmp, "s.json"), os.path.join(tmp, "s.cert.json")
        schedule.save(path)
        write_certificate(prove_allreduce(schedule, reported=()), schedule, cert)
        proof.require_proof(schedule, cert)       # the launcher: once
        check_runner(schedule, a.runner)
        args = attested_worker_args(schedule, path, tmp, a.runner, "float32")
        attestation = args[args.index("--attestation") + 1]
        rows = {"certificate": _worker(path, a.p - 1, a.runner, certificate=cert),
                "attestation": _worker(path, a.p - 1, a.runner, attestation=attestation)}
    print(f"optcc p={a.p} k={a.segments} ell={a.ell}: {len(schedule.flows)} flows, runner {a.runner}")
    for name, s in rows.items():
        print(f"  {name:<12} {s * 1e3:10.1f} ms per worker")
    print(f"  ratio        {rows['certificate'] / rows['attestation']:10.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
