"""Shared argument helpers for subcommands: the cluster flags and JSON/table printing."""
from __future__ import annotations

import json
import sys
from fractions import Fraction

from optcc.cluster import DEFAULT_BANDWIDTH, DEFAULT_NVLINK_BANDWIDTH, Cluster, parse_straggler
from optcc.errors import OptccError
from optcc.failures import parse_failed_nics
from optcc.exact import parse_fraction

DEFAULT_N_BYTES = 2**30


def add_cluster_args(parser, p_required: bool = True) -> None:
    """--p --g --straggler R:ELL (repeatable) --bandwidth --nvlink-bandwidth --alpha."""
    parser.add_argument("--p", type=int, required=p_required, help="number of GPUs")
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
    parser.add_argument("--alpha", default="0", help="per-message latency α in seconds (default 0)")
    parser.add_argument("--cluster", metavar="FILE", help="read the cluster from a JSON file instead")


def cluster_from_args(args) -> Cluster:
    if getattr(args, "cluster", None):
        try:
            with open(args.cluster) as fh:
                data = json.load(fh)
        except FileNotFoundError:
            raise OptccError("--cluster", f"no such file {args.cluster!r}") from None
        except json.JSONDecodeError as e:
            raise OptccError("--cluster", f"not valid JSON: {e}") from None
        return Cluster.from_json(data, field_prefix="cluster.")
    if args.p is None:
        raise OptccError("--p", "give --p (or --cluster FILE)")
    stragglers = [parse_straggler(s) for s in args.straggler]   # Cluster.build refuses duplicates
    failed = [parse_failed_nics(s) for s in getattr(args, "failed_nics", [])]
    bandwidth = parse_fraction(args.bandwidth, "--bandwidth")
    nvlink_bandwidth = parse_fraction(args.nvlink_bandwidth, "--nvlink-bandwidth")
    alpha = parse_fraction(args.alpha, "--alpha")
    try:
        return Cluster.build(args.p, args.g, stragglers, bandwidth, nvlink_bandwidth, alpha,
                             failed_nics=failed, pxn=not getattr(args, "no_pxn", False))
    except OptccError as e:
        raise OptccError(_flag(e.field), e.message) from None


def _flag(field: str) -> str:
    if field.startswith("stragglers"):
        return "--straggler"
    if field.startswith("failed_nics"):
        return "--failed-nics"
    if field == "pxn":
        return "--no-pxn"
    return "--" + field.replace("_", "-")


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
    json.dump(obj, sys.stdout, indent=2, default=_json_default)
    sys.stdout.write("\n")


def _json_default(x):
    if isinstance(x, Fraction):
        return float(x)
    raise TypeError(f"not JSON serializable: {type(x).__name__}")


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
