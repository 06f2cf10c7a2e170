"""The probe under real torchrun on the shaped testbed (root): one torchrun agent per namespace.

--nodes namespaces, each a node whose --per-node ranks share its link (as a server's GPUs share
its NIC); `torchrun --nnodes N --nproc-per-node G --node-rank k` runs `-m gpu_runner.probe` in
namespace k (OPTCC_HOSTNAME = the namespace, as the namespaces share the machine's hostname).
--straggler NODE:ELL shapes that node's link to rate/ELL. Prints what global rank 0 printed (the
probe's report) and one line comparing the named hosts and ℓ with the shaping.

    sudo python benchmarks/probe_torchrun_testbed.py --straggler 2:2
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=4)
    ap.add_argument("--per-node", type=int, default=2)
    ap.add_argument("--rate", type=float, default=16.0, help="healthy link rate, Mbit/s")
    ap.add_argument("--straggler", action="append", default=[], metavar="NODE:ELL")
    ap.add_argument("--size", type=int, default=128 * 1024)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--tag", default="o41t", help="namespace name prefix")
    args = ap.parse_args(argv)
    from gpu_runner.testbed import Testbed, remove_stale, require_root
    require_root()
    shaped = {int(k): float(e) for k, e in (s.split(":") for s in args.straggler)}
    torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
    remove_stale(args.tag)
    with tempfile.TemporaryDirectory(prefix="optcc-probe-torchrun-") as tmp, Testbed(args.nodes, tag=args.tag) as tb:
        tb.shape([args.rate / shaped.get(k, 1.0) for k in range(args.nodes)])
        result = os.path.join(tmp, "result.json")
        procs = []
        for k in range(args.nodes):
            cmd = [*tb.prefix(k), "env", f"OPTCC_HOSTNAME={tb.namespaces[k]}", "GLOO_SOCKET_IFNAME=eth0",
                   f"PYTHONPATH={ROOT}", torchrun, "--nnodes", str(args.nodes), "--nproc-per-node",
                   str(args.per_node), "--node-rank", str(k), "--master-addr", tb.address(0), "--master-port",
                   "29500", "-m", "gpu_runner.probe", "--size", str(args.size), "--repeats", str(args.repeats),
                   "--timeout", str(args.timeout), "--result", result]
            procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        outs = [p.communicate(timeout=args.timeout * 5) for p in procs]
        failed = [(k, p.returncode, outs[k][1].strip()[-800:]) for k, p in enumerate(procs) if p.returncode]
        if failed:
            for k, rc, err in failed:
                print(f"node {k}: torchrun exited with code {rc}\n{err}", file=sys.stderr)
            return 1
        print("".join(o for o, _ in outs), end="")
        with open(result) as fh:
            res = json.load(fh)
    named = {n["node"]: round(n["ell"], 3) for n in res["nodes"] if n["straggler"]}
    print(f"shaped {shaped or 'nothing'}; named {named or 'nobody'}; g = {res['g']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
