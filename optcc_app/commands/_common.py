"""Shared argument helpers for subcommands: the cluster flags; printing is optcc_app.compose.tables."""
from __future__ import annotations

import argparse
import math

from optcc.cluster import DEFAULT_BANDWIDTH, DEFAULT_NVLINK_BANDWIDTH, Cluster, parse_straggler
from optcc.errors import OptccError
from optcc.failures import parse_failed_nics
from optcc.exact import parse_fraction
from optcc.files import read_json
from optcc_app.compose.tables import print_json, print_table  # noqa: F401  (the commands print through these)
from optcc_app.commands._fields import flag_for

DEFAULT_N_BYTES = 2**30
# Progress on stderr where the schedules are large enough to take seconds (p²·k flows to build,
# time, prove or write); smaller ones finish in about a second and print only their result.
LOUD_WORK = 10**5


def add_cluster_args(parser, p_required: bool = True, latency: bool = True) -> None:
    """--p --g --straggler R:ELL (repeatable) --bandwidth --nvlink-bandwidth, the latency flags, --cluster.

    --p is never required by argparse (so that --cluster FILE works alone); cluster_from_args
    demands exactly one of the two. `p_required` is accepted for existing callers, unused;
    `latency=False` leaves the latency flags to the caller (a command that adds them itself)."""
    parser.add_argument("--p", type=int, help="number of GPUs (required unless --cluster)")
    parser.add_argument("--g", type=int, default=1, help="GPUs per server (default 1)")
    parser.add_argument("--straggler", action="append", default=[], metavar="RANK:ELL",
                        help="slowed GPU and its slowdown ℓ ≥ 1, e.g. 0:2 or 0:8/7 (repeatable)")
    parser.add_argument("--failed-nics", action="append", default=[], metavar="SERVER:COUNT",
                        help="server SERVER lost COUNT of its g NICs (repeatable); ℓ per docs/failures.md")
    parser.add_argument("--no-pxn", action="store_true",
                        help="lost NICs are not pooled over NVLink (docs/failures.md); default: PXN pools them")
    parser.add_argument("--bandwidth", default=str(DEFAULT_BANDWIDTH),
                        help="healthy NIC bandwidth B in bytes/s (default 50e9 = 400 Gb/s)")
    parser.add_argument("--nvlink-bandwidth", default=str(DEFAULT_NVLINK_BANDWIDTH),
                        help="NVLink bandwidth per GPU in bytes/s (default 450e9)")
    if latency:
        add_latency_args(parser)
    parser.add_argument("--cluster", metavar="FILE", help="read the cluster from a JSON file instead")


def add_latency_args(parser) -> None:
    """--latency-model NAME, --overhead (alias --alpha), --issue-delay, --latency (seconds)."""
    from optcc.latency import PRESET_NAMES
    parser.add_argument("--latency-model", metavar="NAME",
                        help=f"latency preset: {', '.join(PRESET_NAMES)} (docs/latency.md); flags below override it")
    parser.add_argument("--overhead", metavar="SECONDS",
                        help="per-message overhead o in seconds, holds both ports (default 0)")
    parser.add_argument("--alpha", metavar="SECONDS", help="alias of --overhead (the project's old name for o)")
    parser.add_argument("--issue-delay", metavar="SECONDS", help="data ready -> flow start, holds no port (default 0)")
    parser.add_argument("--latency", metavar="SECONDS", help="last byte sent -> landed, holds no port (default 0)")


def latency_given(args) -> bool:
    return any(getattr(args, a, None) is not None
               for a in ("latency_model", "overhead", "alpha", "issue_delay", "latency"))


def _overhead_arg(args):
    """(value, flag) of the overhead: --overhead, else its alias --alpha."""
    if getattr(args, "overhead", None) is not None:
        return args.overhead, "--overhead"
    return getattr(args, "alpha", None), "--alpha"


def apply_latency_args(cluster: Cluster, args) -> Cluster:
    """The cluster under the latency flags (a preset and/or explicit values), when any is given."""
    if not latency_given(args):
        return cluster
    from optcc.latency import resolve
    overhead, overhead_flag = _overhead_arg(args)
    flags = {"overhead": overhead, "issue_delay": args.issue_delay, "latency": args.latency}
    try:
        if args.latency_model is None:   # explicit values override the cluster's own ones
            base = {"overhead": cluster.overhead, "issue_delay": cluster.issue_delay, "latency": cluster.latency}
            merged = {k: base[k] if v is None else v for k, v in flags.items()}
            lat = resolve(None, **merged)
            name = "custom" if cluster.latency_model else ""
        else:
            lat = resolve(args.latency_model, **flags)
            name = lat["latency_model"]
        return cluster.with_latency(lat["overhead"], lat["issue_delay"], lat["latency"], name)
    except OptccError as e:
        raise OptccError(overhead_flag if e.field == "overhead" else flag_for(e.field), e.message) from None


def cluster_from_args(args) -> Cluster:
    if getattr(args, "cluster", None):
        if args.p is not None:
            raise OptccError("--p", "give either --cluster FILE or --p and the cluster flags, not both")
        data = read_json(args.cluster, "--cluster")
        return apply_latency_args(Cluster.from_json(data, field_prefix="cluster."), args)
    if args.p is None:
        raise OptccError("--p", "give --p (or --cluster FILE)")
    stragglers = [parse_straggler(s) for s in args.straggler]   # Cluster.build refuses duplicates
    failed = [parse_failed_nics(s) for s in getattr(args, "failed_nics", [])]
    bandwidth = parse_fraction(args.bandwidth, "--bandwidth")
    nvlink_bandwidth = parse_fraction(args.nvlink_bandwidth, "--nvlink-bandwidth")
    overhead, overhead_flag = _overhead_arg(args)
    try:
        return Cluster.build(args.p, args.g, stragglers, bandwidth, nvlink_bandwidth,
                             overhead=overhead, issue_delay=args.issue_delay, latency=args.latency,
                             latency_model=args.latency_model,
                             failed_nics=failed, pxn=not getattr(args, "no_pxn", False))
    except OptccError as e:
        raise OptccError(overhead_flag if e.field == "overhead" else flag_for(e.field), e.message) from None


# The one default of --segments, for every command that takes it (issue 25 item 10): 'auto', the
# k minimising the closed-form model time for the command's message size on the cluster and its
# latency model (optcc.segments; a cluster without latency is timed under the
# optcc.segments.AUTO_DEFAULT_LATENCY_MODEL preset, said on stderr where 'auto' is typed). A
# command with several sizes (bench -b..-e, testbed --sizes) takes the largest unless it says
# otherwise (testbed with --delay-ms: per size, measured); where no
# schedule is built (time FILE, bench --schedule or --algo torch) --segments is not used.
# docs/latency.md ("`--segments auto`") states this rule; tests/optcc_app/test_segments_default.py keeps
# every command's parser, and the docs, on this one value.
DEFAULT_SEGMENTS = "auto"


class _DefaultSegments(str):
    """DEFAULT_SEGMENTS as argparse hands it back when --segments is not given (a typed 'auto' is
    a plain str): segments_given tells them apart."""


def segments_given(args) -> bool:
    """Whether --segments was on the command line (not its default)."""
    return not isinstance(args.segments, _DefaultSegments)


SEGMENTS_HELP = ("pipeline segments k, or 'auto': the k minimising the model time for the message size on "
                 "this cluster and its latency model (the 'nccl' preset where it has none; docs/latency.md)")


def add_segments_arg(parser, note: str = "") -> None:
    """--segments/-k K or 'auto', default DEFAULT_SEGMENTS for every command; `note` says which
    message size the command's auto uses where that is not plain (added before the default)."""
    parser.add_argument("--segments", "-k", default=_DefaultSegments(DEFAULT_SEGMENTS), metavar="K|auto",
                        help=f"{SEGMENTS_HELP}{'; ' + note if note else ''} (default {DEFAULT_SEGMENTS})")


def segments_from_args(args, algo: str, cluster: Cluster, n_bytes: int, build: bool = True,
                       no_latency_hint: str | None = None, say_default_latency: bool = False,
                       real_run: bool = False) -> int:
    """The k to build with (auto resolved, within the buildable limit when `build`); what auto
    decided is said on stderr, except the default latency preset of a cluster without latency when
    --segments was not given (the default's rule, said in --help: one note on every plain run
    would precede each table and error; `say_default_latency` says it anyway); `no_latency_hint`
    where the command has no --latency-model; `real_run`: auto keeps a k whose posts this host can
    issue in time (optcc.segments.HOST_POST_S). Errors name --segments."""
    import sys
    from optcc.segments import HOST_POST_S, NO_LATENCY_HINT, choose_segments
    try:
        k, notes = choose_segments(args.segments, algo, cluster, n_bytes, build,
                                   no_latency_hint or NO_LATENCY_HINT, say_default_latency=say_default_latency or segments_given(args),
                                   host_post_s=HOST_POST_S if real_run else None)
    except OptccError as e:
        if e.field == "segments":
            raise OptccError("--segments", e.message) from None
        raise
    for note in notes:
        print(f"optcc: note: {note}", file=sys.stderr)
    return k


def positive_seconds(value: float, flag: str) -> float:
    """A finite positive number of seconds (argparse's float accepts nan and inf)."""
    if not (math.isfinite(value) and value > 0):
        raise OptccError(flag, f"expected a finite positive number of seconds, got {value}")
    return value


def require_cuda_for_nccl(backend: str) -> None:
    """--backend nccl needs a CUDA GPU here; say so before any process starts."""
    if backend != "nccl":
        return
    import torch
    if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
        raise OptccError("--backend", "nccl needs CUDA GPUs and none is available here; use gloo")


def byte_size(text: str) -> int:
    """argparse type of every size flag: optcc.sizes.parse_bytes ('4M', '1G', 65536)."""
    from optcc.sizes import parse_bytes
    try:
        return parse_bytes(text, "size")
    except OptccError as e:
        raise argparse.ArgumentTypeError(e.message) from None


def add_size_and_json_args(parser, json_help: str = "print JSON instead of a table") -> None:
    """--n BYTES (the message size, for seconds) and --json: the pair most commands share."""
    parser.add_argument("--n", type=byte_size, default=DEFAULT_N_BYTES, metavar="BYTES",
                        help="message size, e.g. 1G or 65536 (K/M/G binary; default 1 GiB)")
    parser.add_argument("--json", action="store_true", help=json_help)


def message_size(args) -> int:
    """The validated --n."""
    if args.n <= 0:
        raise OptccError("--n", f"expected a positive number of bytes, got {args.n}")
    return args.n
