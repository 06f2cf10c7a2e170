"""MSCCL AllReduce XML fixtures written from the format spec (../shared/MSCCL.md), and mutants.

Not a test module. Each builder returns XML text in the runtimes' layout (one element per line,
single spaces, double quotes). `hasdep` is derived from the dependencies, so the fixtures are
right by construction; the mutants then break one thing each by editing the text.
"""
from __future__ import annotations

import re

STEP_ATTRS = ("s", "type", "srcbuf", "srcoff", "dstbuf", "dstoff", "cnt", "depid", "deps", "hasdep")


class Xml:
    """Build an <algo>: gpu(rank) -> tb(send, recv, chan) -> step(type, src, dst, cnt, dep)."""

    def __init__(self, name, ngpus, nchunks, nchannels=1, proto="Simple"):
        self.head = dict(name=name, proto=proto, nchannels=nchannels, nchunksperloop=nchunks, ngpus=ngpus,
                         coll="allreduce", inplace=1, outofplace=0, minBytes=0, maxBytes=0)
        self.gpus = []

    def gpu(self, rank, s_chunks=0):
        self.gpus.append({"id": rank, "s_chunks": s_chunks, "tbs": []})
        return self

    def tb(self, send=-1, recv=-1, chan=0):
        self.gpus[-1]["tbs"].append({"send": send, "recv": recv, "chan": chan, "steps": []})
        return self

    def step(self, type, src=("i", 0), dst=None, cnt=1, dep=None):
        """dep = (tb id, step number) on this gpu, numbered as the runtime counts (every step's
        index, nops included: each nop here carries a dependency); a list of them puts all but
        the last on nops."""
        deps = dep if isinstance(dep, list) else ([dep] if dep else [])
        steps = self.gpus[-1]["tbs"][-1]["steps"]
        for d in deps[:-1]:
            steps.append({"type": "nop", "src": ("i", -1), "dst": ("o", -1), "cnt": 0, "dep": d})
        steps.append({"type": type, "src": src, "dst": dst or src, "cnt": cnt, "dep": deps[-1] if deps else None})
        return self

    def text(self) -> str:
        nchunks = self.head["nchunksperloop"]
        out = ["<algo " + " ".join(f'{k}="{v}"' for k, v in self.head.items()) + ">"]
        for g in self.gpus:
            waited = set()
            for tb in g["tbs"]:
                for st in tb["steps"]:
                    if st["dep"]:
                        waited.add(st["dep"])
            o_chunks = nchunks if self.head["outofplace"] else 0
            out.append(f'  <gpu id="{g["id"]}" i_chunks="{nchunks}" o_chunks="{o_chunks}" s_chunks="{g["s_chunks"]}">')
            for t, tb in enumerate(g["tbs"]):
                out.append(f'    <tb id="{t}" send="{tb["send"]}" recv="{tb["recv"]}" chan="{tb["chan"]}">')
                for s, st in enumerate(tb["steps"]):
                    depid, deps = st["dep"] if st["dep"] else (-1, -1)
                    hasdep = int(st["type"] != "nop" and (t, s) in waited)
                    out.append(f'      <step s="{s}" type="{st["type"]}" srcbuf="{st["src"][0]}" srcoff="{st["src"][1]}" '
                               f'dstbuf="{st["dst"][0]}" dstoff="{st["dst"][1]}" cnt="{st["cnt"]}" depid="{depid}" '
                               f'deps="{deps}" hasdep="{hasdep}"/>')
                out.append("    </tb>")
            out.append("  </gpu>")
        out.append("</algo>")
        return "\n".join(out) + "\n"


def ring(p: int = 4, out_of_place: bool = False) -> str:
    """Ring AllReduce, one channel (and thread block per rank) per chunk, as msccl-tools writes it:
    chunk c is reduced along c, c+1, ..., c−1 (s, rrs ×(p−2), rrcs) and sent round again (rcs, r).
    One message per channel is in flight at a time. D = p. Out of place, results go to `o`."""
    x = Xml(f"ring{p}", p, p, nchannels=p)
    if out_of_place:
        x.head.update(inplace=0, outofplace=1)
    o = "o" if out_of_place else "i"
    for r in range(p):
        x.gpu(r)
        for c in range(p):
            k = (r - c) % p                           # r's place on chunk c's ring
            x.tb(send=(r + 1) % p, recv=(r - 1) % p, chan=c)
            if k == 0:
                x.step("s", ("i", c)).step("rcs" if p > 2 else "r", (o, c))
            elif k < p - 1:
                x.step("rrs", ("i", c)).step("rcs" if k < p - 2 else "r", (o, c))
            else:
                x.step("rrcs", ("i", c), (o, c))
    return x.text()


def ring_one_channel(p: int = 4) -> str:
    """The textbook ring in one thread block per rank: s, rrs ×(p−2), rrcs, rcs ×(p−2), r. Every
    rank sends first, then must forward while its own message still waits: it needs two messages
    of buffer per channel, and deadlocks with one."""
    x = Xml(f"ring1ch{p}", p, p)
    for r in range(p):
        x.gpu(r).tb(send=(r + 1) % p, recv=(r - 1) % p)
        x.step("s", ("i", r))
        for k in range(1, p - 1):
            x.step("rrs", ("i", (r - k) % p))
        x.step("rrcs", ("i", (r + 1) % p))
        for j in range(p - 2):
            x.step("rcs", ("i", (r - j) % p))
        x.step("r", ("i", (r + 2) % p))
    return x.text()


def tree() -> str:
    """Tree AllReduce on 4 ranks (0 the root over 1 and 2, 3 under 1), D = 2 moved as cnt = 2."""
    x = Xml("tree4", 4, 2)
    x.gpu(0).tb(send=1, recv=1).step("rrc", cnt=2).step("s", cnt=2, dep=(1, 0))
    x.tb(send=2, recv=2).step("rrc", cnt=2, dep=(0, 0)).step("s", cnt=2)
    x.gpu(1).tb(send=0, recv=3).step("rrs", cnt=2)
    x.tb(send=3, recv=0).step("rcs", cnt=2, dep=(0, 0))
    x.gpu(2).tb(send=0, recv=0).step("s", cnt=2).step("r", cnt=2)
    x.gpu(3).tb(send=1, recv=1).step("s", cnt=2).step("r", cnt=2)
    return x.text()


def hierarchical() -> str:
    """2 servers × 2 GPUs: intra-server reduce-scatter into scratch + `re`, inter-server `rrc`
    exchange, intra-server all-gather; a nop chain orders the all-gather send. D = 2."""
    x = Xml("hier2x2", 4, 2)
    for r in range(4):
        own, other, intra, inter = r % 2, 1 - r % 2, r ^ 1, r ^ 2
        x.gpu(r, s_chunks=1)
        x.tb(send=intra, recv=intra).step("s", ("i", other)).step("r", ("i", own), ("s", 0))
        x.step("s", ("i", own), dep=[(2, 0), (1, 1)]).step("r", ("i", other))
        x.tb(send=inter, recv=inter).step("s", ("i", own), dep=(2, 0)).step("rrc", ("i", own))
        x.tb().step("re", ("s", 0), ("i", own), dep=(0, 1))
    return x.text()


def one_shot(p: int = 4) -> str:
    """All-pairs one-shot AllReduce (as RCCL's withdrawn 1-step files): every rank sends its
    buffer to every peer's scratch, then adds the copies in peer order: correct sums, but rank r
    adds x_r first, so ranks build different summation trees. D = 1."""
    x = Xml(f"oneshot{p}", p, 1)
    for r in range(p):
        peers = [q for q in range(p) if q != r]
        x.gpu(r, s_chunks=p - 1)
        for slot, q in enumerate(peers):
            x.tb(send=q, recv=q).step("s", ("i", 0)).step("r", ("i", 0), ("s", slot))
        x.tb()
        for slot in range(p - 1):
            x.step("re", ("s", slot), ("i", 0), dep=[(t, 1) for t in range(p - 1)] if slot == 0 else None)
    return x.text()


def numbered_by_nops() -> str:
    """Reduce on rank 0, then send the sum back (2 ranks, D = 1), with a thread block whose
    steps come after a `nop` that carries a dependency, so the runtime's step numbers (nops
    counted, as msccl-tools writes `deps`) differ from the count of real steps. Rank 0 tb 1: nop,
    A = copy the received chunk to s[1] (number 1), T = i[0] += s[1] (number 2); tb 0 sends i[0]
    after T; tb 2 copies s[1] after A."""
    x = Xml("nopnumbers2", 2, 1)
    x.gpu(0, s_chunks=3)
    x.tb(send=1, recv=1).step("r", ("i", 0), ("s", 0)).step("s", ("i", 0), dep=(1, 2))
    x.tb().step("cpy", ("s", 0), ("s", 1), dep=[(0, 0), (0, 0)]).step("re", ("s", 1), ("i", 0))
    x.tb().step("cpy", ("s", 1), ("s", 2), dep=(1, 1))
    x.gpu(1).tb(send=0, recv=0).step("s", ("i", 0)).step("r", ("i", 0))
    return x.text()


def eager_pair() -> str:
    """Two ranks each send both chunks before receiving: fine with unbounded buffers, deadlocks
    when every channel holds one message."""
    x = Xml("eager2", 2, 2)
    for r in range(2):
        x.gpu(r).tb(send=1 - r, recv=1 - r).step("s", ("i", 0)).step("s", ("i", 1))
        x.step("rrc", ("i", 0)).step("rrc", ("i", 1))
    return x.text()


# ---- mutants: edit one step ------------------------------------------------------------------
def _lines_of(text: str, rank: int, tb: int) -> list[int]:
    """Line indexes of the <step>s of thread block tb of gpu rank."""
    lines, out, g, t = text.split("\n"), [], None, None
    for i, line in enumerate(lines):
        if m := re.match(r'\s*<gpu id="(\d+)"', line):
            g = int(m.group(1))
        elif m := re.match(r'\s*<tb id="(\d+)"', line):
            t = int(m.group(1))
        elif "<step " in line and g == rank and t == tb:
            out.append(i)
    return out


def set_attr(text: str, rank: int, tb: int, s: int, **attrs) -> str:
    lines = text.split("\n")
    i = _lines_of(text, rank, tb)[s]
    for k, v in attrs.items():
        lines[i], n = re.subn(rf' {k}="[^"]*"', f' {k}="{v}"', lines[i])
        assert n == 1, (k, lines[i])
    return "\n".join(lines)


def get_attr(text: str, rank: int, tb: int, s: int, attr: str) -> str:
    line = text.split("\n")[_lines_of(text, rank, tb)[s]]
    return re.search(rf' {attr}="([^"]*)"', line).group(1)


def swap_steps(text: str, rank: int, tb: int, a: int, b: int) -> str:
    """Exchange the buffers and offsets of two steps (keeping s, type, deps, hasdep)."""
    moved = ("srcbuf", "srcoff", "dstbuf", "dstoff", "cnt")
    va = {k: get_attr(text, rank, tb, a, k) for k in moved}
    vb = {k: get_attr(text, rank, tb, b, k) for k in moved}
    return set_attr(set_attr(text, rank, tb, a, **vb), rank, tb, b, **va)


def delete_step(text: str, rank: int, tb: int, s: int) -> str:
    lines = text.split("\n")
    del lines[_lines_of(text, rank, tb)[s]]
    return "\n".join(lines)


def renumber_without_nops(text: str) -> str:
    """The same file with every `deps` counting real steps only (optcc's old numbering)."""
    lines, numbers, g, t, k = text.split("\n"), {}, None, None, 0
    for line in lines:
        if m := re.match(r'\s*<gpu id="(\d+)"', line):
            g = int(m.group(1))
        elif m := re.match(r'\s*<tb id="(\d+)"', line):
            t, k, s = int(m.group(1)), 0, 0
        elif "<step " in line:
            numbers[(g, t, s)] = k
            k += 'type="nop"' not in line
            s += 1
    out = []
    for line in lines:
        if m := re.match(r'\s*<gpu id="(\d+)"', line):
            g = int(m.group(1))
        elif (m := re.search(r' depid="(\d+)" deps="(\d+)"', line)) and "<step " in line:
            new = numbers[(g, int(m.group(1)), int(m.group(2)))]
            line = line.replace(m.group(0), f' depid="{m.group(1)}" deps="{new}"')
        out.append(line)
    return "\n".join(out)
