"""check_streaming: properties M, H, D of verifier.streaming on a StreamingProgram (see there).

Events are numbered node = 2·(global op number) + (0 for start S, 1 for completion C). The
happens-before graph `hb` has the edges that hold in every execution; the progress graph adds
"a send completes only after its receive was posted". Hazards are checked on `hb` with the
progress graph's topological order to prune the search; deadlock is a cycle in the progress graph.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple, cast

from collections import defaultdict, deque

from optcc.schedule import posting_order
from optcc.timing import IntegerTimes

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from optcc.lowering.streaming import Event, StreamingProgram
    from optcc.schedule import Schedule

Result = tuple[bool, dict[str, Any] | None]          # (ok, counterexample or None)
OpEvent = tuple[int, int, str]                        # (rank, op index, "S" | "C")
Where = dict[tuple[int, str, int | None], int]        # (rank, op kind, flow or local op) -> op index
Access = tuple[tuple[int, int, int], str, int, str, str]   # (order key, "R"|"W", op, start event, end event)
Buffer = tuple[str, int | None]                      # ("x", piece) or ("s", scratch slot)

LAND, LOCAL, READ = 0, 1, 2       # order at one instant (optcc.schedule semantics, verifier.events)


def _fail(kind: str, rank: int | None, message: str, **extra: Any) -> Result:
    return False, {"property": "streaming", "kind": kind, "rank": rank, "message": message, **extra}


def check_streaming(schedule: Schedule, program: StreamingProgram, grid: IntegerTimes | None = None) -> Result:
    """(ok, counterexample or None) for `program` (verifier.streaming.StreamingProgram)."""
    grid = grid or IntegerTimes(schedule)
    p = schedule.cluster.p
    if len(program.ranks) != p:
        return _fail("shape", None, f"the program has {len(program.ranks)} ranks, the schedule {p}")
    base: list[int] = []
    total = 0
    for rp in program.ranks:
        base.append(total)
        total += len(rp.ops)

    def node(r: int, n: int, ev: str | None) -> int:
        return 2 * (base[r] + n) + (1 if ev == "C" else 0)

    def name(x: int) -> str:
        g, ev = divmod(x, 2)
        r = max(k for k in range(p) if base[k] <= g)
        op = program.ranks[r].ops[g - base[r]]
        what = f"flows[{op.flow}]" if op.flow is not None else f"local_ops[{op.local}]"
        return f"rank {r} {op.kind} {what} ({'completion' if ev else 'start'})"

    checked = _structure(schedule, program)      # (False, cx) or (True, None, where)
    if not checked[0]:
        return checked
    where: Where = checked[2]
    for r, rp in enumerate(program.ranks):
        for n, op in enumerate(rp.ops):
            for m, ev in op.deps:
                if not (0 <= m < len(rp.ops)) or ev not in ("S", "C") or \
                        (ev == "C" and rp.ops[m].kind not in ("send", "recv")):
                    return _fail("bad dependency", r, f"rank {r} op {n} depends on ({m}, {ev!r}), "
                                                      f"which is not an event of its program")
    hb: list[list[int]] = [[] for _ in range(2 * total)]            # predecessors
    progress: list[list[int]] = [[] for _ in range(2 * total)]
    for kind, (r, n, ev), (r2, m, ev2) in progress_edges(schedule, program, where):
        u, v = node(r2, m, ev2), node(r, n, ev)
        if kind != "send after recv posted":
            hb[v].append(u)
        progress[v].append(u)
    live = [x for x in range(2 * total) if x % 2 == 0 or
            _is_post(program, base, x // 2)]
    topo = _topo(progress, live)
    if topo is None:
        cycle = _cycle(progress, live)
        return _fail("deadlock", None, "the streaming runner can deadlock: " +
                     " waits for ".join(name(x) for x in cycle[:8]) + (" ..." if len(cycle) > 8 else "")
                     + f" (a cycle of {len(cycle)} events with window {program.window})",
                     cycle=[name(x) for x in cycle[:16]])

    def before(u: int, v: int) -> bool:
        if u == v:
            return False
        if u in hb[v]:
            return True
        lo = topo[u]
        seen = {v}
        todo = [v]
        while todo:
            x = todo.pop()
            for y in hb[x]:
                if y == u:
                    return True
                if y not in seen and topo[y] > lo:
                    seen.add(y)
                    todo.append(y)
        return False

    for r, rp in enumerate(program.ranks):                         # M: order and window per peer
        for peer, seq in rp.peer_seq.items():
            for k in range(1, len(seq)):
                if not before(node(r, seq[k - 1], "S"), node(r, seq[k], "S")):
                    return _fail("posting order", r, f"rank {r} may post {name(node(r, seq[k], 'S'))[7:]} "
                                                     f"before the previous post with rank {peer}")
                if k >= program.window and not before(node(r, seq[k - program.window], "C"), node(r, seq[k], "S")):
                    return _fail("window", r, f"rank {r} may have more than {program.window} messages in "
                                              f"flight with rank {peer} at post {k}")
    for r, accesses in _accesses(schedule, program, grid).items():    # H
        for buf, acc in accesses.items():
            acc.sort(key=lambda a: a[0])
            last_w: Event | None = None
            reads: list[Event] = []
            for key, kind, n, start_ev, end_ev in acc:
                s = node(r, n, start_ev)
                if last_w is not None and not before(node(r, last_w[0], last_w[1]), s):
                    return _hazard(r, buf, "RAW" if kind == "R" else "WAW", name(node(r, last_w[0], last_w[1])), name(s))
                if kind == "W":
                    for m, ev in reads:
                        if not before(node(r, m, ev), s):
                            return _hazard(r, buf, "WAR", name(node(r, m, ev)), name(s))
                    last_w, reads = (n, end_ev), []
                else:
                    reads.append((n, end_ev))
    return True, None


class EdgeKind(NamedTuple):
    """One kind of progress edge: the waiting op's event `waits` ("S" start, "C" completion) waits
    for event `on` of an op related to it by `relation` (None: the event a dependency names).
    progress_edges builds every edge from these fields, and verifier.parametric.streaming_order
    states its obligations from the same fields, so a change here changes what is proved."""
    name: str
    waits: str
    on: str | None
    relation: str       # "earlier op" | "itself" | "previous post with the peer" | "the flow's other end"


_KINDS = (EdgeKind("dependency", "S", None, "earlier op"),
          EdgeKind("post", "C", "S", "itself"),
          EdgeKind("peer order", "C", "C", "previous post with the peer"),
          EdgeKind("recv after send posted", "C", "S", "the flow's other end"),
          EdgeKind("send after recv posted", "C", "S", "the flow's other end"))
EDGE_KIND = {k.name: k for k in _KINDS}
EDGE_KINDS = tuple(EDGE_KIND)


def progress_edges(schedule: Schedule, program: StreamingProgram, where: Where) -> Iterator[tuple[str, OpEvent, tuple[int, int, str | None]]]:
    """The progress graph's edges as (kind, event, an event it waits for), events (rank, op index,
    "S" start | "C" completion), each formed from its EdgeKind's fields; `where` maps (rank,
    "send" | "recv", flow) to the op index (_structure's). Every kind but the last also holds in
    every execution (happens-before); verifier.parametric.streaming_order proves each kind
    increases the order key."""
    dep, post, peer, recv_k, send_k = (EDGE_KIND[k.name] for k in _KINDS)
    for r, rp in enumerate(program.ranks):
        for n, op in enumerate(rp.ops):
            for m, ev in op.deps:
                yield dep.name, (r, n, dep.waits), (r, m, dep.on or ev)
            if op.kind in ("send", "recv"):
                yield post.name, (r, n, post.waits), (r, n, post.on)
        for seq in rp.peer_seq.values():
            for a, b in zip(seq, seq[1:]):
                yield peer.name, (r, b, peer.waits), (r, a, peer.on)
    for i, f in enumerate(schedule.flows):
        send, recv = (f.src, where[(f.src, "send", i)]), (f.dst, where[(f.dst, "recv", i)])
        yield recv_k.name, (*recv, recv_k.waits), (*send, recv_k.on)
        yield send_k.name, (*send, send_k.waits), (*recv, send_k.on)


def _hazard(r: int, buf: Buffer, kind: str, first: str, second: str) -> Result:
    what = f"piece {buf[1]}" if buf[0] == "x" else f"scratch slot {buf[1]}"
    return _fail(kind, r, f"{kind} hazard on rank {r}'s {what}: {second} may happen before {first} has "
                          f"finished", buffer=list(buf))


def _is_post(program: StreamingProgram, base: Sequence[int], g: int) -> bool:
    r = max(k for k in range(len(base)) if base[k] <= g)
    return program.ranks[r].ops[g - base[r]].kind in ("send", "recv")


def _structure(schedule: Schedule, program: StreamingProgram) -> tuple[Any, ...]:
    """M (structure): one send, recv, land per flow on the right ranks, mirrored peer lists;
    (False, counterexample) or (True, None, where)."""
    flows = schedule.flows
    where: Where = {}
    for r, rp in enumerate(program.ranks):
        for n, op in enumerate(rp.ops):
            if op.kind == "scale":
                lo = schedule.local_ops[op.local] if op.local is not None and 0 <= op.local < len(schedule.local_ops) else None
                if lo is None or lo.rank != r or lo.piece != op.piece or (r, "scale", op.local) in where:
                    return _fail("structure", r, f"rank {r} op {n}: scale of local op {op.local} is not its own or twice")
                where[(r, "scale", op.local)] = n
                continue
            f = flows[op.flow] if op.flow is not None and 0 <= op.flow < len(flows) else None
            mine = f is not None and (r == f.src if op.kind in ("send", "snap") else r == f.dst)
            if not mine or f is None or op.piece != f.piece or (r, op.kind, op.flow) in where or \
                    (op.kind in ("send", "recv") and op.peer != (f.dst if op.kind == "send" else f.src)):
                return _fail("structure", r, f"rank {r} op {n}: {op.kind} of flows[{op.flow}] has the wrong "
                                             f"rank, peer or piece, or appears twice")
            where[(r, op.kind, op.flow)] = n
    for i, f in enumerate(flows):
        for r, kind in ((f.src, "send"), (f.dst, "recv"), (f.dst, "land")):
            if (r, kind, i) not in where:
                return _fail("structure", r, f"flows[{i}] {f.src}->{f.dst} has no {kind} on rank {r}")
        recv, land = program.ranks[f.dst].ops[where[(f.dst, "recv", i)]], program.ranks[f.dst].ops[where[(f.dst, "land", i)]]
        send = program.ranks[f.src].ops[where[(f.src, "send", i)]]
        if recv.slot is None or land.slot != recv.slot:
            return _fail("structure", f.dst, f"flows[{i}]: receive and landing use different slots")
        if send.slot is not None:
            snap = where.get((f.src, "snap", i))
            if snap is None or program.ranks[f.src].ops[snap].slot != send.slot:
                return _fail("structure", f.src, f"flows[{i}]: sent from slot {send.slot} that no snapshot fills")
    for j, lop in enumerate(schedule.local_ops):
        if (lop.rank, "scale", j) not in where:
            return _fail("structure", lop.rank, f"local_ops[{j}] is never applied on rank {lop.rank}")
    for r, rp in enumerate(program.ranks):
        posts: defaultdict[int, set[int]] = defaultdict(set)
        for n, op in enumerate(rp.ops):
            if op.kind in ("send", "recv"):
                assert op.peer is not None          # checked above: a post's peer is its flow's other end
                posts[op.peer].add(n)
        for peer in set(posts) | set(rp.peer_seq):
            seq = rp.peer_seq.get(peer, [])
            if sorted(seq) != sorted(posts.get(peer, ())):
                return _fail("structure", r, f"rank {r}'s posting list for peer {peer} is not its posts with it")
            theirs = program.ranks[peer].peer_seq.get(r, []) if 0 <= peer < len(program.ranks) else []
            if [rp.ops[n].flow for n in seq] != [program.ranks[peer].ops[n].flow for n in theirs]:
                k = next((k for k, (a, b) in enumerate(zip(seq, theirs))
                          if rp.ops[a].flow != program.ranks[peer].ops[b].flow), min(len(seq), len(theirs)))
                return _fail("pair order differs", r, f"message {k} between ranks {r} and {peer} is not the "
                                                      f"same flow on both ends: they would be mis-paired")
    return True, None, where


def _accesses(schedule: Schedule, program: StreamingProgram, grid: IntegerTimes) -> dict[int, defaultdict[Buffer, list[Access]]]:
    """rank -> buffer -> [(order key, "R"|"W", op, start event, end event)] in schedule terms."""
    pos = {i: n for n, i in enumerate(posting_order(schedule, grid.starts))}
    out: defaultdict[int, defaultdict[Buffer, list[Access]]] = defaultdict(lambda: defaultdict(list))
    slot_users: defaultdict[tuple[int, int | None], list[tuple[int, int, int, str, int, str, str]]] = defaultdict(list)
    for r, rp in enumerate(program.ranks):
        acc = out[r]
        for n, op in enumerate(rp.ops):
            i = cast(int, op.flow)      # None only for a scale, which reads op.local (_structure checked both)
            if op.kind == "land":
                acc[("x", op.piece)].append(((grid.ends[i], LAND, pos[i]), "W", n, "S", "S"))
                slot_users[(r, op.slot)].append((grid.starts[i], pos[i], 1, "R", n, "S", "S"))
            elif op.kind == "scale":
                assert op.local is not None
                acc[("x", op.piece)].append(((grid.op_times[op.local], LOCAL, op.local), "W", n, "S", "S"))
            elif op.kind == "snap":
                acc[("x", op.piece)].append(((grid.starts[i], READ, pos[i]), "R", n, "S", "S"))
                slot_users[(r, op.slot)].append((grid.starts[i], pos[i], 0, "W", n, "S", "S"))
            elif op.kind == "send" and op.slot is None:
                acc[("x", op.piece)].append(((grid.starts[i], READ, pos[i]), "R", n, "S", "C"))
            elif op.kind == "send":
                slot_users[(r, op.slot)].append((grid.starts[i], pos[i], 1, "R", n, "S", "C"))
            elif op.kind == "recv":
                slot_users[(r, op.slot)].append((grid.starts[i], pos[i], 0, "W", n, "S", "C"))
    for (r, slot), users in slot_users.items():
        for start, ps, sub, kind, n, s, e in users:
            out[r][("s", slot)].append(((start, ps, sub), kind, n, s, e))
    return out


def _topo(graph: Sequence[Sequence[int]], live: list[int]) -> dict[int, int] | None:
    """Topological index of every live node (predecessor lists), or None if there is a cycle."""
    succ: defaultdict[int, list[int]] = defaultdict(list)
    indeg = {x: 0 for x in live}
    for x in live:
        for y in graph[x]:
            succ[y].append(x)
            indeg[x] += 1
    todo = deque(x for x in live if indeg[x] == 0)
    topo: dict[int, int] = {}
    while todo:
        x = todo.popleft()
        topo[x] = len(topo)
        for y in succ[x]:
            indeg[y] -= 1
            if indeg[y] == 0:
                todo.append(y)
    return topo if len(topo) == len(live) else None


def _cycle(graph: Sequence[Sequence[int]], live: list[int]) -> list[int]:
    """One cycle (list of nodes, each waiting for the next) in a graph known to have one."""
    state = dict.fromkeys(live, 0)
    for root in live:
        if state[root]:
            continue
        stack, path = [(root, iter(graph[root]))], [root]
        state[root] = 1
        while stack:
            x, it = stack[-1]
            y = next(it, None)
            if y is None:
                state[x] = 2
                stack.pop()
                path.pop()
            elif state[y] == 1:
                return path[path.index(y):]
            elif state[y] == 0:
                state[y] = 1
                stack.append((y, iter(graph[y])))
                path.append(y)
    return []
