"""`optcc probe`: measure every host's NIC send/receive bandwidth, estimate ℓ, write a cluster JSON."""
from __future__ import annotations

import argparse
import math

from optcc.cluster import MAX_P, parse_straggler
from optcc_app.commands._common import byte_size, positive_seconds
from optcc.errors import OptccError
from optcc.needs import require
from optcc.files import check_writable, write_text_atomic
from optcc.jsonout import dumps


def register(sub) -> None:
    parser = sub.add_parser("probe", help="measure each rank's NIC bandwidth and write a cluster JSON "
                                          "(local ranks, or the shaped testbed as root; torchrun: "
                                          "python -m gpu_runner.probe)")
    parser.add_argument("--nproc", type=int, help="local ranks to start (without --testbed)")
    parser.add_argument("--testbed", action="store_true", help="run on the shaped namespace testbed (root)")
    parser.add_argument("--p", type=int, help="testbed ranks (default: --nproc)")
    parser.add_argument("--ranks-per-node", type=int, default=1, metavar="G",
                        help="testbed: G ranks share each node's namespace and link, as the GPUs of a "
                             "server share its NIC (default 1)")
    parser.add_argument("--straggler", action="append", default=[], metavar="NODE:ELL",
                        help="testbed: shape NODE's link to rate/ELL (repeatable; NODE = rank with "
                             "--ranks-per-node 1)")
    parser.add_argument("--rate", type=float, metavar="MBIT", help="testbed: healthy link rate in Mbit/s")
    parser.add_argument("--delay-ms", type=float, default=None, metavar="D", help="testbed: one-way delay")
    parser.add_argument("--size", type=byte_size, default=1 << 20, metavar="BYTES",
                        help="bytes per timed stream, e.g. 1M (K/M/G binary; default 1 MiB)")
    parser.add_argument("--repeats", type=int, default=3, help="repetitions of the p−1 rounds (default 3)")
    parser.add_argument("--bandwidth", type=float, help="healthy rate B in bytes/s (default: the fastest rank's)")
    parser.add_argument("--min-ell", type=float, default=1.1, help="ℓ below this counts as healthy (default 1.1)")
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="seconds a rank waits for a dead or hung peer before exiting (default 60)")
    parser.add_argument("-o", "--out", default="probe-cluster.json", metavar="FILE",
                        help="cluster JSON to write (for optcc schedule --cluster; default probe-cluster.json)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--inject-fault", help=argparse.SUPPRESS)   # tests: die:RANK or hang:RANK
    parser.set_defaults(handler=run)


def run(args) -> int:
    require("probe", "torch")
    _validate(args)
    from gpu_runner.probe import probe_local, probe_testbed
    extra = ["--inject-fault", args.inject_fault] if args.inject_fault else []
    if args.testbed:
        stragglers = _stragglers(args)
        res = probe_testbed(args.p or args.nproc, stragglers, args.rate, args.size, args.repeats, args.timeout,
                            args.delay_ms, args.bandwidth, args.min_ell, extra, per_node=args.ranks_per_node)
    else:
        res = probe_local(args.nproc, args.size, args.repeats, args.timeout, args.bandwidth, args.min_ell, extra)
    write_text_atomic(args.out, dumps(res["cluster"], indent=2) + "\n", "--out")
    res["cluster_file"] = args.out
    from gpu_runner.probe import report
    print(report(res, args.json))          # what python -m gpu_runner.probe prints under torchrun
    return 0


def _stragglers(args) -> dict:
    """--straggler NODE:ELL of the testbed: nodes in range, each once, ℓ ≥ 1 (as Cluster demands)."""
    nodes = (args.p or args.nproc) // args.ranks_per_node
    stragglers: dict = {}
    for text in args.straggler:
        r, ell = parse_straggler(text, "--straggler")
        if not 0 <= r < nodes:
            raise OptccError("--straggler", f"node {r} is out of range 0..{nodes - 1}")
        if r in stragglers:
            raise OptccError("--straggler", f"node {r} is given twice")
        if ell < 1:
            raise OptccError("--straggler", f"slowdown ℓ must be ≥ 1, got {ell}")
        stragglers[r] = ell
    return stragglers


def _validate(args) -> None:
    if args.testbed:
        if args.rate is None or not (math.isfinite(args.rate) and args.rate > 0):
            raise OptccError("--rate", "the testbed needs a positive --rate in Mbit/s")
        if (args.p or args.nproc or 0) < 2:
            raise OptccError("--p", "the testbed needs --p (or --nproc) ≥ 2 ranks")
        g = args.ranks_per_node
        if g < 1 or (args.p or args.nproc) % g or (args.p or args.nproc) // g < 2:
            raise OptccError("--ranks-per-node", f"expected G ≥ 1 dividing --p = {args.p or args.nproc} into "
                                                 f"2 or more nodes, got {g}")
        if args.delay_ms is not None and not 0 <= args.delay_ms <= 10_000:
            raise OptccError("--delay-ms", f"expected 0 ≤ D ≤ 10000 ms, got {args.delay_ms}")
    else:
        if args.nproc is None or args.nproc < 2:
            raise OptccError("--nproc", "expected --nproc ≥ 2 local ranks (or --testbed)")
        if args.straggler or args.rate is not None or args.delay_ms is not None or args.ranks_per_node != 1:
            raise OptccError("--testbed", "--straggler, --rate, --delay-ms and --ranks-per-node shape the testbed; "
                                          "add --testbed")
    if (args.p or args.nproc) > MAX_P:
        raise OptccError("--p" if args.p else "--nproc", f"at most {MAX_P} ranks are supported")
    if args.size <= 0:
        raise OptccError("--size", f"expected a positive number of bytes, got {args.size}")
    if args.repeats < 1:
        raise OptccError("--repeats", f"expected at least 1, got {args.repeats}")
    positive_seconds(args.timeout, "--timeout")
    if args.bandwidth is not None and not (math.isfinite(args.bandwidth) and args.bandwidth > 0):
        raise OptccError("--bandwidth", f"expected a positive rate in bytes/s, got {args.bandwidth}")
    if not (math.isfinite(args.min_ell) and args.min_ell >= 1):
        raise OptccError("--min-ell", f"expected a finite number ≥ 1, got {args.min_ell}")
    if args.testbed:
        _stragglers(args)
    check_writable(args.out, "--out")              # before the measurement, not after it
