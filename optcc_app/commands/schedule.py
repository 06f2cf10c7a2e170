"""`optcc schedule`: build any algorithm of the registry (optcc, ring, the baselines) for a cluster, write it as JSON."""
from __future__ import annotations

import os
import sys
import time

from optcc.algorithms import algorithm_names, build_schedule, buildable
from optcc_app.commands._common import (DEFAULT_N_BYTES, add_cluster_args, add_segments_arg, byte_size, cluster_from_args,
                                        segments_from_args, segments_given, LOUD_WORK)
from optcc.errors import OptccError



def register(sub) -> None:
    parser = sub.add_parser("schedule", help="build a schedule (optcc, ring, a baseline, ...) and write it as JSON")
    parser.add_argument("--algo", required=True, metavar="NAME",
                        help="an algorithm of optcc.algorithms.registry: optcc (the construction that serves "
                             "the cluster), ring, a construction or baseline by name, lp_shared, lp_exclusive")
    add_cluster_args(parser, p_required=False)   # --cluster FILE alone is enough (optcc probe writes one)
    add_segments_arg(parser, "at --n")
    parser.add_argument("--n", type=byte_size, default=DEFAULT_N_BYTES, metavar="BYTES",
                        help="message size for --segments auto, e.g. 1G (K/M/G binary; default 1 GiB)")
    parser.add_argument("--form", choices=FORMS, default="auto",
                        help="flows: the flow list (optcc-schedule/1); generated: the proved generator's "
                             "parameters (optcc-generated-schedule/1, about 1 KB at any p; ring and "
                             "single-straggler optcc only); auto (default): generated where the flow list "
                             "would be over the build limit (p²·k > 4·10⁶), else flows")
    parser.add_argument("-o", "--output", required=True, metavar="FILE", help="where to write the schedule")
    parser.set_defaults(handler=run)


def check_algo(name: str) -> str:
    """The --algo name, checked against the whole table (the LP records join it on import)."""
    if name not in algorithm_names():           # only then pay for the LP layer's imports
        import lp_models.algorithms  # noqa: F401  (registers lp_shared, lp_exclusive)
    if name not in algorithm_names():
        import difflib
        close = difflib.get_close_matches(name, algorithm_names(), n=1)
        hint = f"; did you mean {close[0]}?" if close else ""
        raise OptccError("--algo", f"unknown algorithm {name!r}{hint} (known: {', '.join(algorithm_names())})")
    return name


FORMS = ("auto", "flows", "generated")


def _us(seconds) -> str:
    return f"{float(seconds) * 1e6:g} us"


def run(args) -> int:
    from optcc.generated import GeneratedSchedule, generated_form_of
    check_algo(args.algo)
    cluster = cluster_from_args(args)
    generator = generated_form_of(args.algo, cluster)       # None: no proved generator serves it
    if args.form == "generated" and generator is None:
        from optcc.generated import why_not_generated
        raise OptccError("--form", why_not_generated(args.algo, cluster))
    k = segments_from_args(args, args.algo, cluster, args.n, build=generator is None or args.form == "flows")
    asked = segments_given(args) and str(args.segments) == "auto"
    if asked or (args.cluster and not segments_given(args)):      # plain runs stay quiet (docs/latency.md)
        from optcc.segments import auto_timed_cluster
        timed = auto_timed_cluster(cluster)
        print(f"optcc: note: auto k = {k}: the k minimising the model time of a {args.n:,}-byte message (--n) "
              f"at B = {float(cluster.bandwidth):g} B/s, per message o = {_us(timed.overhead)}, "
              f"Li = {_us(timed.issue_delay)}, L = {_us(timed.latency)}"
              + (f" (latency model {timed.latency_model})" if timed.latency_model else "")
              + (" — the cluster states none" if timed is not cluster else ""), file=sys.stderr)
    form = args.form
    if form == "auto":
        form = "generated" if generator is not None and not buildable(cluster, k) else "flows"
    if form == "generated":
        out = GeneratedSchedule.of(generator, cluster, k)
        out.save(args.output, field="--output")
        print(f"wrote {args.output}: {generator} generated schedule (its parameters, {len(out.canonical_bytes())} "
              f"bytes), {cluster.describe()}, k={k}", file=sys.stderr)
        return 0
    loud = cluster.p ** 2 * k >= LOUD_WORK
    t0 = time.perf_counter()
    if loud:
        print(f"optcc schedule: building {args.algo} on {cluster.describe()}, k={k} (about p²·k = "
              f"{cluster.p ** 2 * k:,} flows)", file=sys.stderr, flush=True)
    schedule = build_schedule(args.algo, cluster, k)
    if loud:
        print(f"optcc schedule: built {len(schedule.flows):,} flows in {time.perf_counter() - t0:.1f} s; "
              f"writing {args.output}", file=sys.stderr, flush=True)
    schedule.save(args.output, field="--output")
    print(f"wrote {args.output}: {args.algo}, {cluster.describe()}, k={k}, "
          f"{len(schedule.pieces)} pieces, {len(schedule.flows)} flows"
          + (f" ({os.path.getsize(args.output) / 1e6:.0f} MB, {time.perf_counter() - t0:.1f} s)" if loud else ""),
          file=sys.stderr)
    return 0
