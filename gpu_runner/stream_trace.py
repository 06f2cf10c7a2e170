"""Where a streaming run's time goes: reads the traces the streaming runner writes when
OPTCC_STREAM_TRACE names a folder (one `rankR.jsonl` per rank, one line per run).

Per op a row [op, kind, flow, peer, schedule start (slot units), started s, completed s, deps].
Times are seconds since each rank's run began (ranks start together after a barrier, so
cross-rank differences carry that skew, milliseconds). `summarise` answers: does the runner
react late (a send posted long after the receive it waited for), how long does a message take
on the wire, are receives posted after their data was sent, and which dependency held each
receive back (chain / window / scratch slot or data). `python -m gpu_runner.stream_trace DIR`.
"""
from __future__ import annotations

import glob
import json
import os
import statistics
import sys
from collections import Counter


def load(folder: str, which: int = -1) -> dict:
    """rank -> its `which`-th traced run (default the last: the timed one after the warm-ups)."""
    runs = {}
    for path in sorted(glob.glob(os.path.join(folder, "rank*.jsonl"))):
        with open(path) as f:
            lines = [json.loads(line) for line in f if line.strip()]
        if lines:
            runs[lines[which]["rank"]] = lines[which]
    return runs


def _quantiles(xs: list[float]) -> dict | None:
    if not xs:
        return None
    s = sorted(xs)
    return {"median": statistics.median(s), "p10": s[len(s) // 10], "p90": s[9 * len(s) // 10], "max": s[-1]}


def _binding(ops: dict, op) -> str:
    """The dependency that was satisfied last (the one that held the op back)."""
    best = None
    for m, ev in op[7]:
        dep = ops[m]
        t = dep[5] if ev == "S" else dep[6]
        same_chain = dep[1] in ("send", "recv") and dep[3] == op[3]
        label = ("chain" if ev == "S" else "window") if same_chain else f"{dep[1]}-{ev}"
        if best is None or t > best[0]:
            best = (t, label)
    return "none" if best is None else best[1]


def summarise(runs: dict) -> dict:
    send_post, recv_post, recv_done = {}, {}, {}
    reaction, binding = [], Counter()
    for r in runs.values():
        ops = {o[0]: o for o in r["ops"]}
        recv_completions = sorted(o[6] for o in r["ops"] if o[1] == "recv" and o[6] is not None)
        for o in r["ops"]:
            if o[1] == "send":
                send_post[o[2]] = o[5]
                prior = [t for t in recv_completions if t <= o[5]]
                if prior:
                    reaction.append(o[5] - prior[-1])
            elif o[1] == "recv":
                recv_post[o[2]], recv_done[o[2]] = o[5], o[6]
                binding[_binding(ops, o)] += 1
    both = [f for f in send_post if f in recv_post and recv_done[f] is not None]
    return {
        "ranks": len(runs),
        "total_s": max((r["total_s"] for r in runs.values()), default=None),
        "reaction_s": _quantiles(reaction),
        "wire_s": _quantiles([recv_done[f] - max(send_post[f], recv_post[f]) for f in both]),
        "recv_after_send_s": _quantiles([recv_post[f] - send_post[f] for f in both]),
        "recv_held_by": dict(binding),
    }


def main(argv=None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    if len(args) != 1:
        print("usage: python -m gpu_runner.stream_trace TRACE_DIR", file=sys.stderr)
        return 2
    print(json.dumps(summarise(load(args[0])), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
