"""Write an optcc Schedule as an in-place MSCCL AllReduce XML.

Mapping (docs/msccl.md):
- pieces -> chunks: D = lcm of the piece sizes' denominators (nchunksperloop); piece i covers
  chunks [D·Σ_{j<i} size_j, D·Σ_{j<=i} size_j), cut into parts of at most 71 chunks (cnt < 72).
- a flow src->dst is a send `s` on src and a receive on dst, `rrc` (add) or `r` (copy), of every
  part of its piece; one thread block per (rank, peer, channel) holds both directions.
- channels: the flows of one (src, dst) pair go, in start order, on a channel whose previous flow
  has landed by this flow's start, so every channel holds at most one message in flight (the
  one-message buffers cannot deadlock) and FIFO order is start order = landing order (a thread
  block's send or recv peer is -1 when it only receives or only sends). A pair whose thread
  block exceeds the step limit gets as many more channels as its steps need, until every one
  fits. A rank with more than 32 peers spreads them over channel groups (at most 32 send and
  32 receive peers per channel).
- order: each thread block lists its steps in time order, landings before starts at equal times
  (the Schedule's rule); across the thread blocks of a rank, read-after-write, write-after-write
  and write-after-read on one part become dependencies on the latest conflicting step of each
  other thread block, the first on the step itself and the rest on `nop`s right before it, with
  hasdep="1" on every step waited on. A dependency implied by what the thread block already
  waited for, or by another of its dependencies (a wait on step k of o covers what o had waited
  for by step k), is left out: fewer nops. `deps` is the runtime's step number (verifier.msccl.model):
  every `nop` written carries a dependency, so it is the step's index in its thread block.
Refused (OptccError, before any building where a count shows it): local ops and coefficients
other than 1, which MSCCL has no step for; a rank with more than 64 peers or that needs more
than 64 thread blocks (single-straggler OptCC beyond p = 65); more than 32 channels.
"""
from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from optcc.errors import OptccError
from optcc.timing import IntegerTimes
from optcc.lowering.msccl_runtime import MAX_COUNT, MAX_NODES, MAX_TBS_PER_CHANNEL, MAX_THREAD_BLOCKS

if TYPE_CHECKING:
    from optcc.schedule import Schedule

Tb = tuple[int, int]                         # a rank's thread block: (peer, channel)
Programs = list[dict[Tb, list[dict[str, Any]]]]   # per rank: thread block -> its steps (dicts) in order
Known = dict[Tb, int]                        # thread block -> the step of it known complete
History = dict[tuple[int, Tb], tuple[list[int], list[Known]]]   # (rank, tb) -> (step numbers, knowledge from then on)

MAX_CHANNELS = 32           # what the export uses: NCCL 2.12-2.18 and RCCL's MAXCHANNELS (msccl_runtime has later NCCL's 64)


def chunk_layout(schedule: Schedule) -> tuple[int, list[list[tuple[int, int]]]]:
    """D, and per piece its parts as (offset, cnt) in chunks."""
    d = 1
    for size in schedule.pieces:
        d = d * size.denominator // math.gcd(d, size.denominator)
    parts: list[list[tuple[int, int]]] = []
    offset = 0
    for size in schedule.pieces:
        cnt = int(size * d)
        mine: list[tuple[int, int]] = []
        for start in range(0, cnt, MAX_COUNT - 1):
            mine.append((offset + start, min(MAX_COUNT - 1, cnt - start)))
        parts.append(mine)
        offset += cnt
    return d, parts


def check_expressible(schedule: Schedule) -> None:
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


def check_fits(schedule: Schedule, max_steps: int) -> None:
    """Refuse, before building, what no thread block layout can fit: a rank with more peers
    than thread blocks, or whose transfers need more than MAX_THREAD_BLOCKS x max_steps steps
    (a thread block is one peer's, and holds at most max_steps steps)."""
    _, parts = chunk_layout(schedule)
    load: dict[tuple[int, int], int] = {}
    for f in schedule.flows:
        n = len(parts[f.piece])
        load[(f.src, f.dst)] = load.get((f.src, f.dst), 0) + n
        load[(f.dst, f.src)] = load.get((f.dst, f.src), 0) + n
    peers: dict[int, int] = {}
    need: dict[int, int] = {}
    for (rank, _), n in load.items():
        peers[rank] = peers.get(rank, 0) + 1
        need[rank] = need.get(rank, 0) + -(-n // max_steps)
    p = schedule.cluster.p
    for rank in sorted(peers):
        steps = sum(n for (r, _), n in load.items() if r == rank)
        stored = 1 + p + peers[rank] + steps
        if stored > MAX_NODES:
            raise OptccError("schedule", f"rank {rank} has {steps} transfer steps with {peers[rank]} peers: the "
                             f"runtime would store at least {stored} XML elements for it (1 algo, {p} gpu, a tb per "
                             f"peer, a step per transfer) and its parser keeps at most {MAX_NODES} "
                             "(MSCCL_MAX_NODES); use fewer segments")
        if peers[rank] > MAX_THREAD_BLOCKS:
            raise OptccError("schedule", f"rank {rank} exchanges data with {peers[rank]} peers, but MSCCL needs a "
                             f"thread block per peer and a GPU has at most {MAX_THREAD_BLOCKS} thread blocks (a "
                             f"single-straggler schedule's straggler talks to p - 1 peers: p <= "
                             f"{MAX_THREAD_BLOCKS + 1})")
        if need[rank] > MAX_THREAD_BLOCKS:
            raise OptccError("schedule", f"rank {rank} needs at least {need[rank]} thread blocks of at most "
                             f"{max_steps} steps for its {steps} transfers; a GPU has at most {MAX_THREAD_BLOCKS} "
                             "(fewer segments, or --max-steps 256)")


def _first_spread(schedule: Schedule, max_steps: int) -> dict[tuple[int, int], int]:
    """Lanes per ordered pair to start from: the pair's steps (both directions share a thread
    block) over max_steps, so a balanced layout fits at the first try."""
    _, parts = chunk_layout(schedule)
    load: dict[tuple[int, int], int] = {}
    for f in schedule.flows:
        pair = (min(f.src, f.dst), max(f.src, f.dst))
        load[pair] = load.get(pair, 0) + len(parts[f.piece])
    out: dict[tuple[int, int], int] = {}
    for (a, b), n in load.items():
        out[(a, b)] = out[(b, a)] = max(1, -(-n // max_steps))
    return out


def _groups(schedule: Schedule) -> tuple[int, dict[tuple[int, int], int]]:
    """H channel groups and each unordered pair's group, so that no rank has more than
    MAX_TBS_PER_CHANNEL peers in one group (greedy, least-loaded group of both ends)."""
    pairs = sorted({(min(f.src, f.dst), max(f.src, f.dst)) for f in schedule.flows})
    degree: dict[int, int] = {}
    for a, b in pairs:
        degree[a], degree[b] = degree.get(a, 0) + 1, degree.get(b, 0) + 1
    h = max(1, -(-max(degree.values(), default=0) // MAX_TBS_PER_CHANNEL))
    while True:
        load: dict[tuple[int, int], int] = {}
        group: dict[tuple[int, int], int] = {}
        for a, b in pairs:
            j = min(range(h), key=lambda j: (max(load.get((a, j), 0), load.get((b, j), 0)), j))
            group[(a, b)] = j
            load[(a, j)], load[(b, j)] = load.get((a, j), 0) + 1, load.get((b, j), 0) + 1
        if max(load.values(), default=0) <= MAX_TBS_PER_CHANNEL:
            return h, group
        h += 1


def _channels(schedule: Schedule, grid: IntegerTimes, spread: dict[tuple[int, int], int], h: int,
              group: dict[tuple[int, int], int]) -> list[int]:
    """Each flow's channel: lane l of its pair, in channel group g, is channel l * h + g."""
    chan = [0] * len(schedule.flows)
    by_pair: dict[tuple[int, int], list[list[int]]] = {}
    for i in sorted(range(len(schedule.flows)), key=lambda i: (grid.starts[i], i)):
        f = schedule.flows[i]
        lanes = by_pair.setdefault((f.src, f.dst), [])      # per lane: [last end, flows]
        start = grid.starts[i]
        free = [c for c, (end, _) in enumerate(lanes) if end <= start]
        if len(lanes) < spread.get((f.src, f.dst), 1) or not free:
            lanes.append([0, 0])
            free = [len(lanes) - 1]
        c = min(free, key=lambda c: (lanes[c][1], c))
        lanes[c][0], lanes[c][1] = grid.ends[i], lanes[c][1] + 1
        chan[i] = c * h + group[(min(f.src, f.dst), max(f.src, f.dst))]
    return chan


def build_program(schedule: Schedule, spread: dict[tuple[int, int], int] | None = None, grid: IntegerTimes | None = None,
                  groups: tuple[int, dict[tuple[int, int], int]] | None = None, reduce_deps: bool = True,
                  ) -> tuple[Programs, int]:
    """Per rank: {(peer, chan): [step dicts]} in program order, and the number of channels.
    reduce_deps=False keeps every conflict as a dependency, implied ones included."""
    check_expressible(schedule)
    grid = grid or IntegerTimes(schedule)
    h, group = groups or _groups(schedule)
    _, parts = chunk_layout(schedule)
    chan = _channels(schedule, grid, spread or {}, h, group)
    events: list[tuple[int, int, int, int, int, str]] = []    # (time, phase, flow, rank, peer, kind): landings (0) before starts (1)
    for i, f in enumerate(schedule.flows):
        events.append((grid.starts[i], 1, i, f.src, f.dst, "s"))
        events.append((grid.ends[i], 0, i, f.dst, f.src, "rrc" if f.op == "add" else "r"))
    events.sort()
    tbs: Programs = [{} for _ in range(schedule.cluster.p)]
    last_write: dict[tuple[int, int, int], tuple[Tb, int]] = {}    # (rank, piece, part) -> (tb key, step number)
    reads: dict[tuple[int, int, int], dict[Tb, int]] = {}          # (rank, piece, part) -> {tb key: step number}
    waited: set[tuple[int, Tb, int]] = set()
    know: dict[tuple[int, Tb], Known] = {}        # (rank, tb key) -> {other tb key: step known complete}
    hist: History = {}                            # (rank, tb key) -> (step numbers, knowledge from then on)
    for _, _, i, rank, peer, kind in events:
        f = schedule.flows[i]
        key = (peer, chan[i])
        prog = tbs[rank].setdefault(key, [])
        for j, (off, cnt) in enumerate(parts[f.piece]):
            cell = (rank, f.piece, j)
            deps: Known = {}
            w = last_write.get(cell)
            if w is not None and w[0] != key:
                deps[w[0]] = w[1]
            if kind != "s":
                for other, k in reads.get(cell, {}).items():
                    if other != key and k > deps.get(other, -1):
                        deps[other] = k
            dep_list = (_reduce(deps, know.setdefault((rank, key), {}), hist, rank) if reduce_deps
                        else sorted(deps.items()))
            for other, k in dep_list[1:]:
                prog.append({"type": "nop", "off": -1, "cnt": 0, "dep": (other, k)})
            here = len(prog)                  # the runtime's step number: every nop here carries a dependency
            prog.append({"type": kind, "off": off, "cnt": cnt, "dep": dep_list[0] if dep_list else None})
            for other, k in dep_list:
                waited.add((rank, other, k))
            if dep_list and reduce_deps:
                mine = know[(rank, key)]
                for other, k in dep_list:
                    for o, n in _known_at(hist, rank, other, k).items():
                        if n > mine.get(o, -1):
                            mine[o] = n
                    mine[other] = max(mine.get(other, -1), k)
                nums, snaps = hist.setdefault((rank, key), ([], []))
                nums.append(here)
                snaps.append(dict(mine))
            if kind == "s":
                reads.setdefault(cell, {})[key] = here
            else:
                last_write[cell] = (key, here)
                reads[cell] = {}
    for rank, progs in enumerate(tbs):
        for key, prog in progs.items():
            for n, st in enumerate(prog):
                if st["type"] != "nop":
                    st["hasdep"] = int((rank, key, n) in waited)
    return tbs, 1 + max(chan, default=0)


def _known_at(hist: History, rank: int, tb: Tb, k: int) -> Known:
    """What thread block tb knew complete (by its waits) when its step k ran."""
    nums, snaps = hist.get((rank, tb), ((), ()))
    at = bisect_right(nums, k)
    return snaps[at - 1] if at else {}


def _reduce(deps: Known, mine: Known, hist: History, rank: int) -> list[tuple[Tb, int]]:
    """The dependencies not implied by what this thread block knows, or by another one of them
    (a wait on (o, k) also covers everything o had waited for by its step k): fewer nops."""
    todo = {o: k for o, k in deps.items() if mine.get(o, -1) < k}
    implied = {o: {**_known_at(hist, rank, o, k)} for o, k in todo.items()}
    return sorted((o, k) for o, k in todo.items()
                  if not any(implied[d].get(o, -1) >= k for d in todo if d != o))


def export_xml(schedule: Schedule, max_steps: int = 64, proto: str = "Simple", name: str | None = None,
               progress: Callable[[str], object] | None = None, reduce_deps: bool = True) -> tuple[str, dict[str, Any]]:
    """The XML text and facts {D, channels, thread_blocks, steps, max_tb_steps}; OptccError if
    impossible. progress(message), when given, hears of every layout tried; reduce_deps as in
    build_program."""
    check_expressible(schedule)
    check_fits(schedule, max_steps)
    d, _ = chunk_layout(schedule)
    grid = IntegerTimes(schedule)
    groups = _groups(schedule)
    spread = _first_spread(schedule, max_steps)
    p = schedule.cluster.p
    attempt = 0
    while True:
        attempt += 1
        tbs, nchannels = build_program(schedule, spread, grid, groups, reduce_deps)
        longest = max((len(prog) for progs in tbs for prog in progs.values()), default=0)
        most_tbs = max((len(progs) for progs in tbs), default=0)
        if progress:
            progress(f"layout {attempt}: {nchannels} channel(s), up to {most_tbs} thread blocks per GPU, "
                     f"longest thread block {longest} steps (limit {max_steps})")
        if most_tbs > MAX_THREAD_BLOCKS or nchannels > MAX_CHANNELS:
            raise OptccError("max_steps", f"the schedule needs more than {max_steps} steps per thread block; "
                             f"splitting peers over channels reached {most_tbs} thread blocks per GPU and "
                             f"{nchannels} channels (limits {MAX_THREAD_BLOCKS} and {MAX_CHANNELS}); use fewer "
                             "segments, or --max-steps 256 for microsoft/msccl")
        stored = max((1 + p + len(progs) + sum(len(x) for x in progs.values()) for progs in tbs), default=0)
        if stored > MAX_NODES:
            raise OptccError("schedule", f"the layout stores {stored} XML elements for one rank (with the nops that "
                             f"order its thread blocks); the runtime's parser keeps at most {MAX_NODES} "
                             "(MSCCL_MAX_NODES); use fewer segments")
        if longest <= max_steps:
            break
        for rank, progs in enumerate(tbs):            # more channels for the pairs of overfull thread blocks
            total: dict[int, int] = {}
            lanes: dict[int, int] = {}
            over: set[int] = set()
            for (peer, _), prog in progs.items():
                total[peer] = total.get(peer, 0) + len(prog)
                lanes[peer] = lanes.get(peer, 0) + 1
                if len(prog) > max_steps:
                    over.add(peer)
            for peer in over:
                want = max(lanes[peer] + 1, -(-total[peer] // max_steps))
                for pair in ((rank, peer), (peer, rank)):
                    spread[pair] = max(spread.get(pair, 1), want)
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
