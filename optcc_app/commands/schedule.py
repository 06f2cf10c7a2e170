"""`optcc schedule`: build a ring or OptCC schedule for a cluster and write it as JSON."""
from __future__ import annotations

import sys

from optcc.algorithms import ALGORITHMS, build_schedule
from optcc_app.commands._common import DEFAULT_N_BYTES, add_cluster_args, byte_size, add_segments_arg, cluster_from_args, segments_from_args
from optcc.errors import OptccError


def register(sub) -> None:
    parser = sub.add_parser("schedule", help="build a schedule (ring or OptCC) and write it as JSON")
    parser.add_argument("--algo", choices=ALGORITHMS, required=True)
    add_cluster_args(parser, p_required=False)   # --cluster FILE alone is enough (optcc probe writes one)
    add_segments_arg(parser, 1)
    parser.add_argument("--n", type=byte_size, default=DEFAULT_N_BYTES, metavar="BYTES",
                        help="message size for --segments auto, e.g. 1G (K/M/G binary; default 1 GiB)")
    parser.add_argument("-o", "--output", required=True, metavar="FILE", help="where to write the schedule")
    parser.set_defaults(handler=run)


def run(args) -> int:
    if args.n <= 0:
        raise OptccError("--n", f"expected a positive number of bytes, got {args.n}")
    cluster = cluster_from_args(args)
    k = segments_from_args(args, args.algo, cluster, args.n)
    schedule = build_schedule(args.algo, cluster, k)
    schedule.save(args.output, field="--output")
    print(f"wrote {args.output}: {args.algo}, {cluster.describe()}, k={k}, "
          f"{len(schedule.pieces)} pieces, {len(schedule.flows)} flows", file=sys.stderr)
    return 0
