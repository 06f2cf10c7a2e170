"""Benchmark rows and their text in nccl-tests' own layout (all_reduce_perf), so that scripts
written for nccl-tests output parse ours.

algbw = size / time and busbw = algbw · 2(p−1)/p are nccl-tests' definitions for AllReduce
(its PERFORMANCE.md). lb_us is our lower bound for the cluster (bounds.closed_form.lower_bound,
in n/B, times size/B; latency α not included) and eff = lb_us / time_us (1.0 = at the bound).

The text: `#` lines (a run line, the two-line column header and the units line), one line per
size with `size count type redop root`, then out-of-place `time algbw busbw #wrong`, then
in-place the same, then our `lb_us eff`; the footers `# Out of bounds values : N OK|FAILED` and
`# Avg bus bandwidth    : X` (mean busbw over every size and both placements, as nccl-tests).
The runners work in place, so the out-of-place columns repeat the in-place measurement (the
header says so); the wrong count is counted once in the footer.
"""
from __future__ import annotations

from bounds.closed_form import lower_bound
from optcc.errors import OptccError
from optcc.sizes import parse_bytes  # noqa: F401  (the commands' size parser; one for all)
from optcc.timing import units_to_seconds

# nccl-tests' type names (ncclDataType_t as all_reduce_perf prints them)
NCCL_TYPE = {"float32": "float", "float16": "half", "bfloat16": "bfloat16", "int32": "int32", "int64": "int64"}


def sweep(begin: int, end: int, factor: int, step: int = 2**20) -> list[int]:
    """nccl-tests' -b/-e/-f/-i: begin, begin·f, ... up to end; with f = 1, begin, begin + step, ..."""
    if end < begin:
        raise OptccError("sweep.end", f"max size {end} is below min size {begin}")
    if factor < 1:
        raise OptccError("sweep.factor", f"expected a step factor ≥ 1, got {factor}")
    if factor == 1 and step < 1:
        raise OptccError("sweep.step", f"expected a step of at least 1 byte with factor 1, got {step}")
    sizes = [begin]
    while (nxt := sizes[-1] * factor if factor > 1 else sizes[-1] + step) <= end:
        sizes.append(nxt)
    return sizes


def table_rows(result: dict, cluster, segments: int | None = None) -> list[dict]:
    """Worker rows (seconds per iteration, wrong count) -> benchmark rows for this cluster;
    `segments`: the k of the schedule that ran them (its rows' k column), None for torch's."""
    p = result["world_size"]
    lb_units = lower_bound(cluster)
    rows = []
    for r in result["rows"]:
        t = r["seconds"]
        size = r["size"]
        algbw = size / t / 1e9 if t > 0 else float("inf")
        lb_us = units_to_seconds(cluster, lb_units, size) * 1e6
        row = {"size": size, "count": r["count"], "type": r["type"], "time_us": t * 1e6,
               "algbw": algbw, "busbw": algbw * 2 * (p - 1) / p, "wrong": r["wrong"],
               "lb_us": lb_us, "eff": lb_us / (t * 1e6) if t > 0 else None}
        if "torch_seconds" in r:          # torch's all_reduce in alternating rounds of the same run
            tt = r["torch_seconds"]
            row.update(torch_us=tt * 1e6, vs_torch=t / tt if tt > 0 else None)
        if segments is not None:
            row["segments"] = segments
        rows.append(row)
    return rows


def _num(value: float, width: int) -> str:
    """nccl-tests' getFloatStr: 2, 1 or 0 decimals as the integer part grows, then exponent form."""
    power, val = 0, 1
    while value >= val:
        power += 1
        val *= 10
    if power < width - 2:
        return f"{value:{width}.2f}"
    if power < width - 1:
        return f"{value:{width}.1f}"
    if power < width + 1:
        return f"{value:{width}.0f}"
    return f"{value:{width}.1e}" if width >= 7 else f"{value:{width}.0e}"


_WIDTHS = (12, 12, 8, 6, 6, 7, 6, 6, 6, 7, 6, 6, 6, 8, 6, 8, 8, 3)   # nccl-tests' columns, then lb_us, eff,
#                                                                    torch_us, vs_torch (alternating rounds), k


def _line(cells, head: bool = False) -> str:
    """Cells right-aligned to nccl-tests' widths, two spaces apart; a header line starts with '# '."""
    text = "  ".join(f"{c:>{w}}" for c, w in zip(cells, _WIDTHS))
    return ("# " + text[2:]).rstrip() if head else text


def nccl_lines(rows, run_line: str, notes=()) -> list[str]:
    """The benchmark as all_reduce_perf prints it (formats of nccl-tests' src/util.cu), with
    `# ` + each of `notes` above the header and extra columns after nccl-tests' own: lb_us, eff,
    torch_us and vs_torch (torch's all_reduce timed in alternating rounds of the same run, and
    time/torch_us; "-" where not timed) and k (the schedule's segments at that size)."""
    return nccl_header(run_line, notes) + [nccl_row(r) for r in rows] + nccl_footer(rows)


def nccl_header(run_line: str, notes=()) -> list[str]:
    """The lines nccl-tests prints before the first row."""
    return [f"# {run_line}", "#", *(f"# {n}" for n in notes), "#",
            "# " + " " * 50 + "           out-of-place                       in-place",
            _line(("size", "count", "type", "redop", "root") + ("time", "algbw", "busbw", "#wrong") * 2
                  + ("lb_us", "eff", "torch_us", "vs_torch", "k"), head=True),
            _line(("(B)", "(elements)", "", "", "") + ("(us)", "(GB/s)", "(GB/s)", "") * 2 + ("(us)", "", "(us)"),
                  head=True)]


def nccl_row(r: dict) -> str:
    """One size's line (a row of table_rows); printed as soon as the size is done."""
    place = (_num(r["time_us"], 7), _num(r["algbw"], 6), _num(r["busbw"], 6), f"{r['wrong']:g}")
    eff = "-" if r["eff"] is None else f"{r['eff']:.4f}"
    torch_us = _num(r["torch_us"], 8) if r.get("torch_us") is not None else "-"
    vs = f"{r['vs_torch']:.3f}" if r.get("vs_torch") is not None else "-"
    return _line((r["size"], r["count"], NCCL_TYPE.get(r["type"], r["type"]), "sum", -1) + place * 2
                 + (_num(r["lb_us"], 8), eff, torch_us, vs, r.get("segments", "-")))


def nccl_footer(rows) -> list[str]:
    """The out-of-bounds and average bus bandwidth lines after the last row."""
    wrong = sum(r["wrong"] for r in rows)
    busbw = [r["busbw"] for r in rows for _ in (0, 1)]
    avg = sum(busbw) / len(busbw) if busbw else 0.0
    return [f"# Out of bounds values : {wrong} {'FAILED' if wrong else 'OK'}", f"# Avg bus bandwidth    : {avg:g}", "#"]
