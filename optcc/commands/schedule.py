"""`optcc schedule`: build a ring or OptCC schedule for a cluster and write it as JSON."""
from __future__ import annotations

import sys

from optcc.algorithms import ALGORITHMS, build_schedule
from optcc.commands._common import add_cluster_args, cluster_from_args


def register(sub) -> None:
    parser = sub.add_parser("schedule", help="build a schedule (ring or OptCC) and write it as JSON")
    parser.add_argument("--algo", choices=ALGORITHMS, required=True)
    add_cluster_args(parser)
    parser.add_argument("--segments", "-k", type=int, default=1, help="pipeline segments k (default 1)")
    parser.add_argument("-o", "--output", required=True, metavar="FILE", help="where to write the schedule")
    parser.set_defaults(handler=run)


def run(args) -> int:
    cluster = cluster_from_args(args)
    schedule = build_schedule(args.algo, cluster, args.segments)
    schedule.save(args.output, field="--output")
    print(f"wrote {args.output}: {args.algo}, {cluster.describe()}, k={args.segments}, "
          f"{len(schedule.pieces)} pieces, {len(schedule.flows)} flows", file=sys.stderr)
    return 0
