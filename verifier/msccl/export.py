"""Write an optcc Schedule as an in-place MSCCL AllReduce XML.

Mapping (docs/msccl.md):
- pieces -> chunks: D = lcm of the piece sizes' denominators (nchunksperloop); piece i covers
  chunks [D·Σ_{j<i} size_j, D·Σ_{j<=i} size_j), cut into parts of at most 71 chunks (cnt < 72).
- a flow src->dst is a send `s` on src and a receive on dst, `rrc` (add) or `r` (copy), of every
  part of its piece; one thread block per (rank, peer, channel) holds both directions.
- channels: the flows of one (src, dst) pair go, in start order, on a channel whose previous flow
  has landed by this flow's start, so every channel holds at most one message in flight (the
  one-message buffers cannot deadlock) and FIFO order is start order = landing order (a thread
  block's send or recv peer is -1 when it only receives or only sends). A pair
  whose thread block exceeds the step limit gets one more channel, until every one fits.
- order: each thread block lists its steps in time order, landings before starts at equal times
  (the Schedule's rule); across the thread blocks of a rank, read-after-write, write-after-write
  and write-after-read on one part become dependencies on the latest conflicting step of each
  other thread block, the first on the step itself and the rest on `nop`s right before it, with
  hasdep="1" on every step waited on.
Refused (OptccError): local ops and coefficients other than 1, which MSCCL has no step for.
"""
from __future__ import annotations

import math

from optcc.errors import OptccError
from optcc.timing import IntegerTimes
from verifier.msccl.model import MAX_COUNT, MAX_THREAD_BLOCKS

MAX_CHANNELS = 32           # NCCL MAXCHANNELS: chan must stay below it


def chunk_layout(schedule) -> tuple[int, list[list[tuple[int, int]]]]:
    """D, and per piece its parts as (offset, cnt) in chunks."""
    d = 1
    for size in schedule.pieces:
        d = d * size.denominator // math.gcd(d, size.denominator)
    parts, offset = [], 0
    for size in schedule.pieces:
        cnt = int(size * d)
        mine = []
        for start in range(0, cnt, MAX_COUNT - 1):
            mine.append((offset + start, min(MAX_COUNT - 1, cnt - start)))
        parts.append(mine)
        offset += cnt
    return d, parts


def check_expressible(schedule) -> None:
    if schedule.local_ops:
        op = schedule.local_ops[0]
        raise OptccError("schedule.local_ops", f"MSCCL has no step that scales a value: local_ops[0] multiplies "
                         f"piece {op.piece} on rank {op.rank} by {op.coef} ({len(schedule.local_ops)} local ops)")
    for i, f in enumerate(schedule.flows):
        if f.coef != 1:
            raise OptccError(f"schedule.flows[{i}].coef", f"MSCCL adds received data with coefficient 1 only; "
                             f"flows[{i}] {f.src}->{f.dst} piece {f.piece} uses {f.coef}")
        if f.op not in ("add", "copy"):
            raise OptccError(f"schedule.flows[{i}].op", f"unknown op {f.op!r}")


def _channels(schedule, grid, spread: dict) -> list[int]:
    chan = [0] * len(schedule.flows)
    by_pair: dict[tuple, list[int]] = {}
    for i in sorted(range(len(schedule.flows)), key=lambda i: (grid.starts[i], i)):
        f = schedule.flows[i]
        lanes = by_pair.setdefault((f.src, f.dst), [])      # per channel: [last end, flows]
        free = [c for c, (end, _) in enumerate(lanes) if end <= grid.starts[i]]
        if len(lanes) < spread.get((f.src, f.dst), 1) or not free:
            lanes.append([0, 0])
            free = [len(lanes) - 1]
        c = min(free, key=lambda c: (lanes[c][1], c))
        lanes[c][0], lanes[c][1] = grid.ends[i], lanes[c][1] + 1
        chan[i] = c
    return chan


def build_program(schedule, spread: dict | None = None):
    """Per rank: {(peer, chan): [step dicts]} in program order, and the number of channels."""
    check_expressible(schedule)
    grid = IntegerTimes(schedule)
    _, parts = chunk_layout(schedule)
    chan = _channels(schedule, grid, spread or {})
    events = []                      # (time, phase, flow, rank, peer, kind): landings (0) before starts (1)
    for i, f in enumerate(schedule.flows):
        events.append((grid.starts[i], 1, i, f.src, f.dst, "s"))
        events.append((grid.ends[i], 0, i, f.dst, f.src, "rrc" if f.op == "add" else "r"))
    events.sort()
    tbs: list[dict] = [{} for _ in range(schedule.cluster.p)]
    last_write: dict[tuple, tuple] = {}           # (rank, piece, part) -> (tb key, kernel index)
    reads: dict[tuple, dict] = {}                 # (rank, piece, part) -> {tb key: kernel index}
    waited: set = set()
    for _, _, i, rank, peer, kind in events:
        f = schedule.flows[i]
        key = (peer, chan[i])
        prog = tbs[rank].setdefault(key, [])
        for j, (off, cnt) in enumerate(parts[f.piece]):
            cell = (rank, f.piece, j)
            here = sum(1 for st in prog if st["type"] != "nop")
            deps: dict = {}
            conflicts = [last_write.get(cell)]
            if kind != "s":
                conflicts += list(reads.get(cell, {}).items())
            for c in conflicts:
                if c is not None and c[0] != key:
                    deps[c[0]] = max(deps.get(c[0], -1), c[1])
            dep_list = sorted(deps.items())
            for other, k in dep_list[1:]:
                prog.append({"type": "nop", "off": -1, "cnt": 0, "dep": (other, k)})
            prog.append({"type": kind, "off": off, "cnt": cnt, "dep": dep_list[0] if dep_list else None})
            waited.update((rank, other, k) for other, k in dep_list)
            if kind == "s":
                reads.setdefault(cell, {})[key] = here
            else:
                last_write[cell] = (key, here)
                reads[cell] = {}
    for rank, progs in enumerate(tbs):
        for key, prog in progs.items():
            k = 0
            for st in prog:
                if st["type"] != "nop":
                    st["hasdep"] = int((rank, key, k) in waited)
                    k += 1
    return tbs, 1 + max(chan, default=0)


def export_xml(schedule, max_steps: int = 64, proto: str = "Simple", name: str | None = None) -> tuple[str, dict]:
    """The XML text and facts {D, channels, thread_blocks, steps, max_tb_steps}; OptccError if impossible."""
    d, _ = chunk_layout(schedule)
    spread: dict[tuple, int] = {}
    while True:
        tbs, nchannels = build_program(schedule, spread)
        longest = max((len(prog) for progs in tbs for prog in progs.values()), default=0)
        most_tbs = max((len(progs) for progs in tbs), default=0)
        if most_tbs > MAX_THREAD_BLOCKS or nchannels > MAX_CHANNELS:
            raise OptccError("max_steps", f"the schedule needs more than {max_steps} steps per thread block; "
                             f"splitting peers over channels reached {most_tbs} thread blocks per GPU and "
                             f"{nchannels} channels (limits {MAX_THREAD_BLOCKS} and {MAX_CHANNELS})")
        if longest <= max_steps:
            break
        for rank, progs in enumerate(tbs):            # more channels for the pairs of overfull thread blocks
            for (peer, _), prog in progs.items():
                if len(prog) > max_steps:
                    for pair in ((rank, peer), (peer, rank)):
                        spread[pair] = max(spread.get(pair, 1), 1 + sum(1 for q, _ in progs if q == peer))
    p = schedule.cluster.p
    title = name or str(schedule.meta.get("algorithm", "optcc"))
    lines = [f"<!-- optcc export of {title} on {schedule.cluster.describe()}: schedule sha256 {schedule.sha256()} -->",
             f"<!-- D = {d}: pad each buffer to a multiple of {d} elements (gpu_runner.msccl_hook) so the runtime "
             "selects this algorithm -->",
             f'<algo name="{_safe(title)}" proto="{proto}" nchannels="{nchannels}" nchunksperloop="{d}" ngpus="{p}" '
             'coll="allreduce" inplace="1" outofplace="0" minBytes="0" maxBytes="0">']
    n_steps = n_tbs = 0
    for rank in range(p):
        lines.append(f'  <gpu id="{rank}" i_chunks="{d}" o_chunks="0" s_chunks="0">')
        keys = sorted(tbs[rank])
        ids = {key: t for t, key in enumerate(keys)}
        for key in keys:
            peer, c = key
            kinds = {st["type"] for st in tbs[rank][key]}
            send, recv = (peer if "s" in kinds else -1), (peer if kinds & {"r", "rrc"} else -1)
            lines.append(f'    <tb id="{ids[key]}" send="{send}" recv="{recv}" chan="{c}">')
            for s, st in enumerate(tbs[rank][key]):
                depid, deps = (ids[st["dep"][0]], st["dep"][1]) if st["dep"] else (-1, -1)
                lines.append(f'      <step s="{s}" type="{st["type"]}" srcbuf="i" srcoff="{st["off"]}" dstbuf="i" '
                             f'dstoff="{st["off"]}" cnt="{st["cnt"]}" depid="{depid}" deps="{deps}" '
                             f'hasdep="{st.get("hasdep", 0)}"/>')
            n_steps += len(tbs[rank][key])
            lines.append("    </tb>")
        n_tbs += len(keys)
        lines.append("  </gpu>")
    lines.append("</algo>")
    facts = {"D": d, "channels": nchannels, "thread_blocks": n_tbs, "steps": n_steps, "max_tb_steps": longest,
             "max_steps": max_steps, "proto": proto}
    return "\n".join(lines) + "\n", facts


def _safe(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "_-." else "_" for ch in text)
