"""Shared argument helpers for subcommands: the cluster flags and JSON/table printing."""
from __future__ import annotations

import math
import sys
from fractions import Fraction

from optcc.cluster import DEFAULT_BANDWIDTH, DEFAULT_NVLINK_BANDWIDTH, Cluster, parse_straggler
from optcc.errors import OptccError
from optcc.exact import parse_fraction
from optcc.files import read_json
from optcc.jsonout import dumps

DEFAULT_N_BYTES = 2**30


def add_cluster_args(parser, p_required: bool = True) -> None:
    """--p --g --straggler R:ELL (repeatable) --bandwidth --nvlink-bandwidth --alpha --cluster.

    --p is never required by argparse (so that --cluster FILE works alone); cluster_from_args
    demands exactly one of the two. `p_required` is accepted for existing callers, unused."""
    parser.add_argument("--p", type=int, help="number of GPUs (required unless --cluster)")
    parser.add_argument("--g", type=int, default=1, help="GPUs per server (default 1)")
    parser.add_argument("--straggler", action="append", default=[], metavar="RANK:ELL",
                        help="slowed GPU and its slowdown ℓ ≥ 1, e.g. 0:2 or 0:8/7 (repeatable)")
    parser.add_argument("--bandwidth", default=str(DEFAULT_BANDWIDTH),
                        help="healthy NIC bandwidth B in bytes/s (default 50e9 = 400 Gb/s)")
    parser.add_argument("--nvlink-bandwidth", default=str(DEFAULT_NVLINK_BANDWIDTH),
                        help="NVLink bandwidth per GPU in bytes/s (default 450e9)")
    parser.add_argument("--alpha", default="0", help="per-message latency α in seconds (default 0)")
    parser.add_argument("--cluster", metavar="FILE", help="read the cluster from a JSON file instead")


def cluster_from_args(args) -> Cluster:
    if getattr(args, "cluster", None):
        if args.p is not None:
            raise OptccError("--p", "give either --cluster FILE or --p and the cluster flags, not both")
        return Cluster.from_json(read_json(args.cluster, "--cluster"), field_prefix="cluster.")
    if args.p is None:
        raise OptccError("--p", "give --p (or --cluster FILE)")
    stragglers = [parse_straggler(s) for s in args.straggler]   # Cluster.build refuses duplicates
    bandwidth = parse_fraction(args.bandwidth, "--bandwidth")
    nvlink_bandwidth = parse_fraction(args.nvlink_bandwidth, "--nvlink-bandwidth")
    alpha = parse_fraction(args.alpha, "--alpha")
    try:
        return Cluster.build(args.p, args.g, stragglers, bandwidth, nvlink_bandwidth, alpha)
    except OptccError as e:
        raise OptccError(_flag(e.field), e.message) from None


def _flag(field: str) -> str:
    if field.startswith("stragglers"):
        return "--straggler"
    return "--" + field.replace("_", "-")


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


def add_size_and_json_args(parser, json_help: str = "print JSON instead of a table") -> None:
    """--n BYTES (the message size, for seconds) and --json: the pair most commands share."""
    parser.add_argument("--n", type=int, default=DEFAULT_N_BYTES, help="message size in bytes (default 1 GiB)")
    parser.add_argument("--json", action="store_true", help=json_help)


def message_size(args) -> int:
    """The validated --n."""
    if args.n <= 0:
        raise OptccError("--n", f"expected a positive number of bytes, got {args.n}")
    return args.n


def print_json(obj) -> None:
    """Strict JSON (optcc.jsonout: non-finite floats as strings, never NaN/Infinity)."""
    sys.stdout.write(dumps(obj, indent=2) + "\n")


def print_table(headers, rows, file=None) -> None:
    """A plain aligned table, right-aligned numbers, as nccl-tests prints."""
    file = file or sys.stdout
    cells = [[str(h) for h in headers]] + [[_cell(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    numeric = [i > 0 and all(_is_number(row[i]) for row in rows) for i in range(len(headers))]
    for r in cells:
        print("  ".join(c.rjust(w) if numeric[i] else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip(),
              file=file)


def _is_number(v) -> bool:
    if v is None or isinstance(v, (int, float, Fraction)):
        return True
    try:
        float(str(v))
        return True
    except ValueError:
        return str(v) in {"-", ""}


def _cell(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, Fraction):
        v = float(v)
    if isinstance(v, float):
        return f"{v:.4f}"
    return str(v)
