"""Symbolic execution of an MSCCL program: every chunk cell holds a summation tree.

Each thread block runs its steps in order. A step waits for (a) every dependency carried by it
and the `nop`s before it: thread block `depid` has published a flag >= `deps` (flags are set
only by steps with hasdep="1", to their kernel step index, and only grow); (b) a message from
its receive peer on its channel, when it receives: FIFO per (sender, receiver, channel); (c)
with `capacity` 1, an empty slot towards its send peer, when it sends. Thread blocks are
deterministic and every channel has one writer and one reader, so any maximal run reaches the
same state (a Kahn network): one run decides deadlock. Values are hash-consed trees whose `+`
nodes are unordered (float addition commutes but does not associate), so two cells hold the
same id exactly when they were summed in the same order.

Timing-dependent results are found with vector clocks: two accesses to one cell by different
thread blocks, one a write, with no chain of program order, messages and dependency flags
between them, are a race (read-after-write, write-after-read or write-after-write).
"""
from __future__ import annotations

from bisect import bisect_left
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from verifier.msccl.model import READS_SRC, RECVS, SENDS, WRITES_DST, Program

if TYPE_CHECKING:
    import numpy.typing as npt

    from verifier.msccl.model import Step, ThreadBlock

    Clock = npt.NDArray[np.int64]                   # a vector clock: one entry per thread block

Key = tuple[Any, ...]           # ('x', rank, chunk), ('u', rank, buf, off) or ('+', a, b)
Cell = tuple[int, str, int]     # (rank, buf, off)
Message = tuple[list[int], "Clock", dict[str, Any]]     # (value ids, the sender's clock, the sender step)


class Values:
    """Hash-consed trees: ('x', rank, chunk) inputs, ('u', rank, buf, off) undefined, ('+', a, b)."""

    def __init__(self) -> None:
        self.ids: dict[Key, int] = {}
        self.keys: list[Key] = []
        self._linear: dict[int, dict[Key, int]] = {}

    def make(self, key: Key) -> int:
        i = self.ids.get(key)
        if i is None:
            i = self.ids[key] = len(self.keys)
            self.keys.append(key)
        return i

    def add(self, a: int, b: int) -> int:
        return self.make(("+", a, b) if a <= b else ("+", b, a))

    def linear(self, i: int) -> dict[Key, int]:
        """{('x', rank, chunk) or ('u', rank, buf, off): coefficient} (a loop: trees may be deep)."""
        todo = [i]
        while todo:
            j = todo[-1]
            if j in self._linear:
                todo.pop()
                continue
            key = self.keys[j]
            if key[0] != "+":
                self._linear[j] = {key: 1}
                todo.pop()
                continue
            missing = [c for c in (key[1], key[2]) if c not in self._linear]
            if missing:
                todo.extend(missing)
                continue
            out = dict(self._linear[key[1]])
            for k, c in self._linear[key[2]].items():
                out[k] = out.get(k, 0) + c
            self._linear[j] = out
            todo.pop()
        return self._linear[i]

    def render(self, i: int, budget: int = 64) -> str:
        key = self.keys[i]
        if key[0] == "x":
            return f"x{key[1]}[{key[2]}]"
        if key[0] == "u":
            return f"undefined({key[2]}[{key[3]}] of rank {key[1]})"
        if budget <= 0:
            return "…"
        return f"({self.render(key[1], budget // 2)} + {self.render(key[2], budget // 2)})"


@dataclass
class Run:
    values: Values
    cells: dict[Cell, int]                            # (rank, buf, off) -> value id
    writer: dict[Cell, dict[str, Any]]                # (rank, buf, off) -> step description
    blocked: list[dict[str, Any]] = field(default_factory=list)       # deadlock: one dict per stuck thread block
    leftover: list[dict[str, Any]] = field(default_factory=list)      # messages never received
    race: dict[str, Any] | None = None
    mismatch: dict[str, Any] | None = None            # a receive whose cnt differs from the send's


def describe(tb: ThreadBlock, st: Step) -> dict[str, Any]:
    """The step as counterexamples name it; `chunk` is the first chunk it writes (else reads)."""
    buf, off = (st.dstbuf, st.dstoff) if st.type in WRITES_DST else (st.srcbuf, st.srcoff)
    return {"rank": tb.rank, "tb": tb.id, "step": st.s, "type": st.type, "line": st.line, "buffer": buf,
            "chunk": off, "text": f"rank {tb.rank} thread block {tb.id} step {st.s} ({st.type} {buf}[{off}]"
                                  + (f"..[{off + st.cnt - 1}]" if st.cnt > 1 else "") + f", line {st.line})"}


def execute(prog: Program, inplace: bool, capacity: int | None) -> Run:
    tbs = [tb for g in prog.gpus for tb in g.tbs]
    base: dict[int, int] = {}
    total = 0
    for g in prog.gpus:
        base[g.id], total = total, total + len(g.tbs)
    n = len(tbs)
    values = Values()
    run = Run(values, {}, {})
    for g in prog.gpus:
        for c in range(g.i_chunks):
            run.cells[(g.id, "i", c)] = values.make(("x", g.id, c))
    queues: dict[tuple[int, int, int], deque[Message]] = {}     # (sender, receiver, channel) -> messages
    published: list[list[int]] = [[] for _ in range(n)]        # step numbers of the hasdep steps run, in order
    snapshots: list[list[Clock]] = [[] for _ in range(n)]      # their vector clocks
    flag = [-1] * n
    vcs = [np.zeros(n, dtype=np.int64) for _ in range(n)]
    pc = [0] * n
    access: dict[Cell, list[Any]] = {}                    # cell -> [last write, {gid: read}]

    def cell(rank: int, buf: str, off: int) -> Cell:
        return (rank, "i" if buf == "o" and inplace else buf, off)

    def get(key: Cell) -> int:
        v = run.cells.get(key)
        if v is None:
            v = run.cells[key] = values.make(("u",) + key)
        return v

    def touch(key: Cell, gid: int, vc: Clock, info: dict[str, Any], write: bool) -> None:
        state = access.get(key)
        if state is None:
            state = access[key] = [None, {}]
        last, reads = state
        earlier = [("write", last)] if last else []
        if write:
            earlier += [("read", r) for r in reads.values()]
        for kind, (other, clock, other_info) in earlier:
            if other != gid and vc[other] < clock and run.race is None:
                run.race = {"rank": key[0], "buffer": key[1], "chunk": key[2], "first": other_info, "second": info,
                            "kind": ("write" if write else "read") + "-after-" + kind}
        if write:
            state[0], state[1] = (gid, vc[gid], info), {}
        else:
            reads[gid] = (gid, vc[gid], info)

    def ready(gid: int, tb: ThreadBlock, st: Step) -> bool:
        for dep_tb, k, _ in st.waits:
            if flag[base[tb.rank] + dep_tb] < k:
                return False
        if st.type in RECVS and not queues.get((tb.recv, tb.rank, tb.chan)):
            return False
        if st.type in SENDS and capacity is not None and len(queues.get((tb.rank, tb.send, tb.chan), ())) >= capacity:
            return False
        return True

    def merge(vc: Clock, other: Clock) -> None:
        np.maximum(vc, other, out=vc)

    def step(gid: int, tb: ThreadBlock, st: Step) -> None:
        vc = vcs[gid]
        for dep_tb, k, _ in st.waits:
            target = base[tb.rank] + dep_tb
            merge(vc, snapshots[target][bisect_left(published[target], k)])
        msg: Message | None = None
        if st.type in RECVS:
            msg = queues[(tb.recv, tb.rank, tb.chan)].popleft()
            merge(vc, msg[1])
            if len(msg[0]) != st.cnt and run.mismatch is None:
                run.mismatch = {"receiver": describe(tb, st), "sender": msg[2], "sent": len(msg[0]), "cnt": st.cnt}
        vc[gid] += 1
        info = st.info
        if info is None:
            info = st.info = describe(tb, st)
        out: list[int] = []
        for j in range(st.cnt):
            src = cell(tb.rank, st.srcbuf, st.srcoff + j)
            dst = cell(tb.rank, st.dstbuf, st.dstoff + j)
            got = msg[0][j] if msg is not None and j < len(msg[0]) else None
            if st.type in READS_SRC:
                touch(src, gid, vc, info, False)
                a = get(src)
            if st.type == "re":
                touch(dst, gid, vc, info, False)
                v = values.add(get(dst), a)
            elif st.type in ("s", "cpy"):
                v = a
            elif got is None:
                v = values.make(("u", tb.rank, "message", st.dstoff + j))
            elif st.type in ("r", "rcs"):
                v = got
            else:                                              # rrs, rrc, rrcs
                v = values.add(got, a)
            if st.type in WRITES_DST:
                touch(dst, gid, vc, info, True)
                run.cells[dst] = v
                run.writer[dst] = info
            out.append(v)
        if st.type in SENDS:
            queues.setdefault((tb.rank, tb.send, tb.chan), deque()).append((out, vc.copy(), info))
        if st.hasdep:
            published[gid].append(st.kernel)
            snapshots[gid].append(vc.copy())
            flag[gid] = st.kernel

    progress = True
    while progress:
        progress = False
        for gid, tb in enumerate(tbs):
            steps = tb.steps
            while pc[gid] < len(steps) and ready(gid, tb, steps[pc[gid]]):
                step(gid, tb, steps[pc[gid]])
                pc[gid] += 1
                progress = True
    for gid, tb in enumerate(tbs):
        if pc[gid] < len(tb.steps):
            run.blocked.append(_why(tb, tb.steps[pc[gid]], flag, base, queues, capacity, prog))
    for (src, dst, chan), q in queues.items():
        for values_, _, info in q:
            run.leftover.append({"sender": info, "to_rank": dst, "channel": chan, "chunks": len(values_)})
    return run


def _why(tb: ThreadBlock, st: Step, flag: list[int], base: dict[int, int],
         queues: dict[tuple[int, int, int], deque[Message]], capacity: int | None, prog: Program) -> dict[str, Any]:
    out = describe(tb, st)
    reasons: list[str] = []
    for dep_tb, k, line in st.waits:
        have = flag[base[tb.rank] + dep_tb]
        if have < k:
            target = prog.gpus[tb.rank].tbs[dep_tb]
            exists = k in target.by_number
            hasdep = exists and target.by_number[k].hasdep
            note = ("" if not exists else "" if hasdep else "; that step does not have hasdep=\"1\", so it never "
                    "publishes its completion")
            reasons.append(f"waits (line {line}) for thread block {dep_tb} to complete step {k}"
                           + ("" if exists else ", which no step of it has (step numbers count the real steps and "
                              f"the nops that carry a dependency; it has {target.xml_steps} steps)") + note)
    if st.type in {"r", "rcs", "rrs", "rrc", "rrcs"} and not queues.get((tb.recv, tb.rank, tb.chan)):
        reasons.append(f"waits for a message from rank {tb.recv} on channel {tb.chan}")
    if st.type in SENDS and capacity is not None and len(queues.get((tb.rank, tb.send, tb.chan), ())) >= capacity:
        reasons.append(f"cannot send to rank {tb.send} on channel {tb.chan}: its one-message slot is full")
    out["chunks"] = {"src": [st.srcbuf, st.srcoff, st.cnt], "dst": [st.dstbuf, st.dstoff, st.cnt]}
    out["reasons"] = reasons
    out["text"] += ": " + "; ".join(reasons)
    return out
