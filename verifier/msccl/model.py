"""The program an MSCCL XML describes, with the checks the runtime's loader makes.

`load_program(text)` raises OptccError (exit 2) for what the runtime refuses or misreads: a
missing attribute, an unknown step type or buffer, an offset outside its buffer, a send in a
thread block without a send peer, a `nop` chain not closed by a step with a dependency, thread
block ids with gaps. Runtime *limits* (steps per thread block, thread blocks per GPU, cnt, peers
per channel, one thread block per connection, stored elements) are not errors here: `limit_violations` lists them, and the verifier
reports them as the refuted property `limits`.

Step numbers as the runtime counts them (RCCL and msccl-executor-nccl: the loader in
msccl_parser.cc `mscclGetAlgoFromXmlFile`, the interpreter `mscclRunInterpreter` in
msccl_kernel_impl.h; docs/msccl.md quotes the lines). The loader folds every `nop` into the next
transmission as one more dependency; the interpreter keeps a counter `step`, adds
`numDependencies - 1` before a transmission with dependencies and `numReductions - 1` inside a
fused `re`, publishes the counter when `hasDependence`, then adds 1. So a step's number, as a
dependency target (`deps`) and as its published flag, counts the real steps and the `nop`s that
carry a dependency before it (a `nop` without one counts nothing): msccl-tools' XML index. A wait
on k ends when the flag is >= k. `re` steps with the runtime's fusion condition (same
destination and source buffer, no dependency of their own, the previous `re` without `hasdep`,
fewer than MSCCL_MAX_REDUCE_FUSION reductions so far in the thread block) are one transmission:
dependencies of `nop`s between them move on to the next transmission, as in the loader, and the
fused sum dst + src1 + src2 + ... is the same left fold as running them one by one.

Sizes are bounded before anything is expanded (exit 2, naming the attribute and line): chunk
counts, ranks x chunks (and ranks x ranks x chunks, the terms of the final sums), channels, cnt;
the parser bounds steps and thread blocks x steps as it reads.
"""
from __future__ import annotations

from typing import Any
from dataclasses import dataclass, field

from optcc.errors import OptccError
from optcc.lowering.msccl_runtime import (MAX_CHANNELS, MAX_COUNT, MAX_NODES, MAX_REDUCE_FUSION, MAX_TBS_PER_CHANNEL,
                                           MAX_THREAD_BLOCKS)
from verifier.msccl.parse import Node, parse_xml

PROTOS = ("Simple", "LL", "LL128")
BUFFERS = ("i", "o", "s")
SENDS = {"s", "rcs", "rrs", "rrcs"}
RECVS = {"r", "rcs", "rrs", "rrc", "rrcs"}
READS_SRC = {"s", "rrs", "rrc", "rrcs", "cpy", "re"}
WRITES_DST = {"r", "rcs", "rrc", "rrcs", "cpy", "re"}
TYPES = ("s", "r", "rcs", "rrs", "rrc", "rrcs", "cpy", "re", "nop")
# optcc's own bounds on the work of one verification (no runtime file comes near them)
MAX_CHUNKS = 1 << 16        # nchunksperloop and i/o/s_chunks
MAX_CELLS = 1 << 21         # ngpus x nchunksperloop: buffer cells the executor tracks
MAX_SUM_WORK = 1 << 27      # ngpus x cells: each final cell's sum has up to ngpus terms


@dataclass
class Step:
    s: int
    type: str
    srcbuf: str
    srcoff: int
    dstbuf: str
    dstoff: int
    cnt: int
    depid: int
    deps: int
    hasdep: int
    line: int
    kernel: int = -1                                   # the runtime's step counter when it publishes
    waits: list[tuple[int, int, int]] = field(default_factory=list)   # (tb, step number, line)
    fused: bool = False                                # an `re` continuing the previous one's transmission
    info: dict[str, Any] | None = None                          # execute.describe(), computed once


@dataclass
class ThreadBlock:
    rank: int
    id: int
    send: int
    recv: int
    chan: int
    line: int
    steps: list[Step] = field(default_factory=list)    # non-nop steps, waits carried from nops
    xml_steps: int = 0
    by_number: dict[int, Step] = field(default_factory=dict)   # the runtime's step number -> step


@dataclass
class Gpu:
    id: int
    i_chunks: int
    o_chunks: int
    s_chunks: int
    line: int
    tbs: list[ThreadBlock] = field(default_factory=list)


@dataclass
class Program:
    name: str
    proto: str
    nchannels: int
    nchunks: int
    ngpus: int
    coll: str
    inplace: bool
    outofplace: bool
    min_bytes: int
    max_bytes: int
    gpus: list[Gpu]
    stored_nodes: list[int]                              # elements the runtime keeps, per rank

    def buffer_size(self, gpu: Gpu, buf: str, inplace: bool) -> int:
        if buf == "o" and inplace:
            return gpu.i_chunks
        return {"i": gpu.i_chunks, "o": gpu.o_chunks, "s": gpu.s_chunks}[buf]

    def modes(self) -> list[bool]:
        """In-place (True) and/or out-of-place (False): the ways the runtime may run the file."""
        return [m for m, on in ((True, self.inplace), (False, self.outofplace)) if on]

    def n_steps(self) -> int:
        return sum(tb.xml_steps for g in self.gpus for tb in g.tbs)


def load_program(text: str) -> Program:
    algo = parse_xml(text)
    if algo.name != "algo":
        raise OptccError(algo.where(), "the first element must be <algo>")
    proto = algo.text("proto")
    if proto not in PROTOS:
        raise OptccError(algo.where("proto"), f"MSCCL: protocol {proto} is not supported.")
    coll = algo.text("coll")
    if coll != "allreduce":
        raise OptccError(algo.where("coll"), f"only allreduce files are verified, this one is {coll!r}")
    prog = Program(name=algo.attrs.get("name", ""), proto=proto, nchannels=algo.int("nchannels"),
                   nchunks=algo.int("nchunksperloop"), ngpus=algo.int("ngpus"), coll=coll,
                   inplace=bool(algo.int("inplace")), outofplace=bool(algo.int("outofplace")),
                   min_bytes=algo.int("minBytes"), max_bytes=algo.int("maxBytes"), gpus=[], stored_nodes=[])
    if prog.nchunks <= 0:
        raise OptccError(algo.where("nchunksperloop"), f"expected a positive number of chunks, got {prog.nchunks}")
    _bounded(algo, "nchunksperloop", prog.nchunks, MAX_CHUNKS, "chunks per loop (optcc's bound on one verification)")
    if not 1 <= prog.nchannels <= MAX_CHANNELS:
        raise OptccError(algo.where("nchannels"), f"nchannels is {prog.nchannels}; a runtime has 1 to {MAX_CHANNELS} "
                                                  "channels (MAXCHANNELS)")
    if prog.ngpus <= 0:
        raise OptccError(algo.where("ngpus"), f"expected a positive number of ranks, got {prog.ngpus}")
    cells = prog.ngpus * prog.nchunks
    if cells > MAX_CELLS or prog.ngpus * cells > MAX_SUM_WORK:
        raise OptccError(algo.where("nchunksperloop"), f"ngpus x nchunksperloop = {prog.ngpus} x {prog.nchunks} "
                         f"buffer cells of up to {prog.ngpus} terms each: optcc verifies at most {MAX_CELLS} cells "
                         f"and ngpus x cells <= {MAX_SUM_WORK}")
    if not (prog.inplace or prog.outofplace):
        raise OptccError(algo.where("inplace"), "neither inplace nor outofplace is 1: the runtime never selects it")
    gpu_nodes = [n for n in algo.children]
    if len(gpu_nodes) != prog.ngpus:
        raise OptccError(algo.where("ngpus"), f"ngpus is {prog.ngpus} but the file has {len(gpu_nodes)} <gpu> elements")
    seen = {}
    for node in gpu_nodes:
        gpu = _gpu(node, prog)
        if gpu.id in seen or not 0 <= gpu.id < prog.ngpus:
            raise OptccError(node.where("id"), f"gpu id {gpu.id} is a duplicate or outside 0..{prog.ngpus - 1}")
        seen[gpu.id] = gpu
    prog.gpus = [seen[r] for r in range(prog.ngpus)]
    prog.stored_nodes = [1 + prog.ngpus + len(g.tbs) + sum(tb.xml_steps for tb in g.tbs) for g in prog.gpus]
    for g in prog.gpus:
        for tb in g.tbs:
            for st in tb.steps:
                for dep_tb, _, line in st.waits:
                    if not 0 <= dep_tb < len(g.tbs) or dep_tb == tb.id:
                        raise OptccError(f"line {line} <step> depid",
                                         f"depid {dep_tb} is not another thread block of gpu {g.id}")
    return prog


def _gpu(node: Node, prog: Program) -> Gpu:
    gpu = Gpu(node.int("id"), node.int("i_chunks"), node.int("o_chunks"), node.int("s_chunks"), node.line)
    for attr in ("i_chunks", "o_chunks", "s_chunks"):
        if getattr(gpu, attr) < 0:
            raise OptccError(node.where(attr), f"MSCCL: {attr} must be not negative: {getattr(gpu, attr)}")
        _bounded(node, attr, getattr(gpu, attr), MAX_CHUNKS, "chunks (optcc's bound on one verification)")
    if prog.inplace and gpu.i_chunks != prog.nchunks:
        raise OptccError(node.where("i_chunks"), f"an in-place allreduce needs i_chunks = nchunksperloop "
                                                 f"= {prog.nchunks}, got {gpu.i_chunks}")
    by_id = {}
    for tb_node in node.children:
        tb = _thread_block(tb_node, gpu, prog)
        if tb.id in by_id:
            raise OptccError(tb_node.where("id"), f"MSCCL: duplicate thread block id {tb.id} for MSCCL")
        by_id[tb.id] = tb
    for i in range(len(by_id)):
        if i not in by_id:
            raise OptccError(node.where(), f"MSCCL: thread block {i} is missing")
    gpu.tbs = [by_id[i] for i in range(len(by_id))]
    return gpu


def _thread_block(node: Node, gpu: Gpu, prog: Program) -> ThreadBlock:
    tb = ThreadBlock(gpu.id, node.int("id"), node.int("send"), node.int("recv"), node.int("chan"), node.line)
    if tb.id < 0:
        raise OptccError(node.where("id"), f"MSCCL: bid must be not negative. bid: {tb.id}")
    for attr in ("send", "recv"):
        peer = getattr(tb, attr)
        if peer == gpu.id:
            raise OptccError(node.where(attr), f"MSCCL: peer ({tb.recv},{tb.send}) and gpu id ({gpu.id}) must be different")
        if not -1 <= peer < prog.ngpus:
            raise OptccError(node.where(attr), f"MSCCL: wrong recvPeer ({tb.recv}) or sendPeer ({tb.send}) in "
                                               f"thread block {tb.id} on gpu {gpu.id}")
    if not 0 <= tb.chan < prog.nchannels:
        raise OptccError(node.where("chan"), f"MSCCL: threadblock {tb.id} on GPU {gpu.id} has an invalid channel "
                                             f"{tb.chan} (nchannels is {prog.nchannels})")
    pending: list[tuple[int, int, int]] = []     # dependencies not yet attached to a transmission
    counter = 0                                   # the interpreter's `step`
    fusing: tuple[str, int, str] | None = None                  # (dstbuf, dstoff, srcbuf) an `re` may continue
    reductions = 0                                # `re` steps so far in this thread block
    for pos, sn in enumerate(node.children):
        st = _step(sn, tb, gpu, prog)
        if st.s != pos:
            raise OptccError(sn.where("s"), f"step s={st.s} is step number {pos} of its thread block "
                                            f"(steps run in file order; number them 0, 1, 2, ...)")
        if st.depid >= 0:
            pending.append((st.depid, st.deps, st.line))
        if st.type == "nop":
            continue
        st.fused = st.type == "re" and fusing == (st.dstbuf, st.dstoff, st.srcbuf) and st.depid < 0
        if st.fused:
            first = tb.steps[-1]
            if st.cnt != first.cnt:
                raise OptccError(sn.where("cnt"), f"this `re` is fused with step {first.s} (line {first.line}) into "
                                 f"one reduction, which the runtime runs with the last step's cnt ({st.cnt}) for "
                                 f"all of them; step {first.s} has cnt {first.cnt}")
        else:
            if pending and st.depid < 0:
                raise OptccError(sn.where("depid"), "MSCCL: when there is a chain of dependencies, the last reduction "
                                 f"must be a part of the first immediate instruction. Detected for GPU {gpu.id}, "
                                 f"thread block {tb.id}, and step {st.s}. XML will be ignored.")
            if pending:
                counter += len(pending) - 1
            st.waits, pending = pending, []
        if st.type == "re":
            reductions += 1
            fusing = None if st.hasdep or reductions == MAX_REDUCE_FUSION else (st.dstbuf, st.dstoff, st.srcbuf)
        else:
            fusing = None
        st.kernel = counter
        counter += 1
        tb.by_number[st.kernel] = st
        tb.steps.append(st)
    tb.xml_steps = len(node.children)
    return tb


def _step(node: Node, tb: ThreadBlock, gpu: Gpu, prog: Program) -> Step:
    st = Step(s=node.int("s"), type=node.text("type"), srcbuf=node.text("srcbuf"), srcoff=node.int("srcoff"),
              dstbuf=node.text("dstbuf"), dstoff=node.int("dstoff"), cnt=node.int("cnt"), depid=node.int("depid"),
              deps=node.int("deps"), hasdep=node.int("hasdep"), line=node.line)
    if st.s < 0:
        raise OptccError(node.where("s"), f"MSCCL: step must be positive: step {st.s}")
    if st.type not in TYPES:
        raise OptccError(node.where("type"), f"MSCCL: type of transfer is not supported: {st.type}")
    for attr in ("srcbuf", "dstbuf"):
        if getattr(st, attr) not in BUFFERS:
            raise OptccError(node.where(attr), f"type of buffer is not supported: {getattr(st, attr)}")
    if st.hasdep not in (0, 1):
        raise OptccError(node.where("hasdep"), f"MSCCL: hasDependence needs to be 0 or 1, but it was {st.hasdep}")
    if st.depid < -1 or (st.depid >= 0 and st.deps < 0):
        raise OptccError(node.where("deps"), f"a dependency needs depid >= 0 and deps >= 0, got {st.depid} {st.deps}")
    if st.type == "nop":
        return st
    if not 0 <= st.cnt < MAX_COUNT:
        raise OptccError(node.where("cnt"), f"MSCCL: count ({st.cnt}) must be positive and less than {MAX_COUNT}")
    if st.type in SENDS and tb.send < 0:
        raise OptccError(node.where("type"), f"MSCCL: there is a send in thread block {tb.id} on GPU {gpu.id} "
                                             "without a sendPeer.")
    if st.type in RECVS and tb.recv < 0:
        raise OptccError(node.where("type"), f"MSCCL: there is a recv in thread block {tb.id} on GPU {gpu.id} "
                                             "without a recvPeer.")
    for used, buf, off, attr in ((st.type in READS_SRC, st.srcbuf, st.srcoff, "srcoff"),
                                 (st.type in WRITES_DST, st.dstbuf, st.dstoff, "dstoff")):
        if not used:
            continue
        for inplace in prog.modes():
            size = prog.buffer_size(gpu, buf, inplace)
            if off < 0 or off + st.cnt > size:
                name = {"i": "input", "o": "output", "s": "scratch"}[buf]
                raise OptccError(node.where(attr), f"offset out of range: chunks {off}..{off + st.cnt - 1} of the "
                                 f"{name} buffer, which has {size} chunks (runtime: Incorrect offset set for "
                                 f"{name} buffer: offset: {off} maximum allowed: {size})")
    return st


def _bounded(node: Node, attr: str, value: int, limit: int, what: str) -> None:
    if value > limit:
        raise OptccError(node.where(attr), f"{attr} is {value}, more than {limit} {what}")


def limit_violations(prog: Program, max_steps: int) -> list[dict[str, Any]]:
    """Every runtime limit the program breaks, each naming the rank, thread block and step."""
    out: list[dict[str, Any]] = []
    for g in prog.gpus:
        if len(g.tbs) > MAX_THREAD_BLOCKS:
            out.append({"rank": g.id, "message": f"gpu {g.id} has {len(g.tbs)} thread blocks; the runtime allows "
                                                 f"{MAX_THREAD_BLOCKS}"})
        if prog.stored_nodes[g.id] > MAX_NODES:
            out.append({"rank": g.id, "message": f"the runtime stores {prog.stored_nodes[g.id]} elements for rank "
                                                 f"{g.id}; its parser is limited to {MAX_NODES} (MSCCL_MAX_NODES)"})
        for key in ("send", "recv"):
            per_chan: dict[int, list[int]] = {}
            per_conn: dict[tuple[int, int], list[int]] = {}
            for tb in g.tbs:
                if getattr(tb, key) >= 0:
                    per_chan.setdefault(tb.chan, []).append(tb.id)
                    per_conn.setdefault((getattr(tb, key), tb.chan), []).append(tb.id)
            for (peer, chan), ids in per_conn.items():
                if len(ids) > 1:
                    out.append({"rank": g.id, "tb": ids[1], "channel": chan,
                                "message": f"gpu {g.id} thread blocks {ids} all {key} {'to' if key == 'send' else 'from'}"
                                           f" rank {peer} on channel {chan}: the runtime has one connection per "
                                           "(peer, channel), so their messages would interleave by timing"})
            for chan, ids in per_chan.items():
                if len(ids) > MAX_TBS_PER_CHANNEL:
                    out.append({"rank": g.id, "channel": chan, "message": f"gpu {g.id} channel {chan} has {len(ids)} "
                                f"{key} peers; MSCCL: too many {key}s per channel. Max allowed {MAX_TBS_PER_CHANNEL}"})
        for tb in g.tbs:
            if tb.xml_steps > max_steps:
                out.append({"rank": g.id, "tb": tb.id, "step": max_steps,
                            "message": f"MSCCL: too many steps are requested. Max number of steps: {max_steps}, "
                                       f"requested: {tb.xml_steps} (gpu {g.id}, thread block {tb.id})"})
    return out
