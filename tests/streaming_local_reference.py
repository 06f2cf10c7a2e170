"""The per-rank streaming check (conditions L1-L5 of verifier.streaming_local) written plainly:
per-op Python loops and one reachability search per query. The reference that the vectorised
check of verifier.streaming_local is compared with (the same verdict, kind and message on
registry programs and on mutants, tests/verifier/test_streaming_local.py); the product does not use it."""
from __future__ import annotations

from collections import defaultdict

from optcc.timing import IntegerTimes

LAND, LOCAL, READ = 0, 1, 2
_CLASS = {"recv": 3, "send": 3, "snap": 2, "land": 0, "scale": 1}


def _fail(kind, rank, message):
    return {"property": "streaming", "kind": kind, "rank": rank, "message": message}


def check_rank_program(schedule, rp, window: int, grid: IntegerTimes | None = None):
    """None if rank rp.rank's program passes L1-L5 on `schedule` (the rank's flows, or more),
    else a counterexample dict (the condition, the rank, a message)."""
    r = rp.rank
    flows = schedule.flows
    grid = grid or IntegerTimes(schedule)             # times as integers on one grid: the same order
    starts, ends = grid.starts, grid.ends
    ops = rp.ops
    nf = len(flows)
    key = [None] * nf                                 # flow index -> K, for the rank's flows
    for i, f in enumerate(flows):
        if r == f.src or r == f.dst:
            key[i] = (starts[i], f.src, f.dst, f.piece)
    # L1
    where: dict = {}                                  # ("scale", local op) -> op
    at = {kind: [-1] * nf for kind in ("send", "snap", "recv", "land")}   # kind -> flow -> op
    for n, op in enumerate(ops):
        kind = op.kind
        if kind == "scale":
            lo = schedule.local_ops[op.local] if op.local is not None and 0 <= op.local < len(schedule.local_ops) else None
            if lo is None or lo.rank != r or lo.piece != op.piece or ("scale", op.local) in where:
                return _fail("structure", r, f"op {n}: scale of local op {op.local} is not this rank's or twice")
            where[("scale", op.local)] = n
            continue
        i = op.flow
        f = flows[i] if type(i) is int and 0 <= i < nf else None
        sends = kind == "send" or kind == "snap"
        if kind not in at or f is None or (f.src if sends else f.dst) != r or op.piece != f.piece \
                or at[kind][i] != -1 or (kind == "send" and op.peer != f.dst) or (kind == "recv" and op.peer != f.src):
            return _fail("structure", r, f"op {n}: {kind} of flows[{i}] has the wrong rank, peer or "
                                         f"piece, or appears twice")
        at[kind][i] = n
    send_at, snap_at, recv_at, land_at = at["send"], at["snap"], at["recv"], at["land"]
    for i, f in enumerate(flows):
        if key[i] is None:
            continue
        if f.src == r:
            if send_at[i] < 0:
                return _fail("structure", r, f"flows[{i}] {f.src}->{f.dst} has no send on rank {r}")
            send = ops[send_at[i]]
            if send.slot is not None:                 # L5
                n = snap_at[i]
                if n < 0 or ops[n].slot != send.slot:
                    return _fail("structure", r, f"flows[{i}]: sent from slot {send.slot} that no snapshot fills")
        else:
            for kind, n in (("recv", recv_at[i]), ("land", land_at[i])):
                if n < 0:
                    return _fail("structure", r, f"flows[{i}] {f.src}->{f.dst} has no {kind} on rank {r}")
            recv, land = ops[recv_at[i]], ops[land_at[i]]
            if recv.slot is None or land.slot != recv.slot:
                return _fail("structure", r, f"flows[{i}]: receive and landing use different slots")
    for j, lo in enumerate(schedule.local_ops):
        if lo.rank == r and ("scale", j) not in where:
            return _fail("structure", r, f"local_ops[{j}] is never applied on rank {r}")
    # L2
    def kappa(op):
        if op.kind == "scale":
            return (grid.op_times[op.local], 1, (op.local,))
        i = op.flow
        return (ends[i] if op.kind == "land" else starts[i], _CLASS[op.kind], key[i])
    prev = None
    for n, op in enumerate(ops):
        k = kappa(op)
        if prev is not None and not prev < k:
            return _fail("order", r, f"op {n} ({op.kind}) is not after op {n - 1} in (time, class, posting key)")
        prev = k
        for m, ev in op.deps:
            if not (isinstance(m, int) and 0 <= m < n) or ev not in ("S", "C") or \
                    (ev == "C" and ops[m].kind not in ("send", "recv")):
                return _fail("bad dependency", r, f"op {n} depends on ({m}, {ev!r}), not an earlier event")
    # L3
    posts = defaultdict(list)
    for n, op in enumerate(ops):
        if op.kind in ("send", "recv"):
            posts[op.peer].append(n)
    if set(posts) != set(rp.peer_seq):
        return _fail("structure", r, "the posting lists name other peers than the posts")
    for peer, seq in rp.peer_seq.items():
        if list(seq) != posts[peer]:           # the posts in op order, which L2 made K order
            return _fail("structure", r, f"the posting list for peer {peer} is not its posts with it in order")
        for a, b in zip(seq, seq[1:]):
            if not key[ops[a].flow] < key[ops[b].flow]:
                return _fail("pair order", r, f"posts {a} and {b} with rank {peer} are not in posting-key order")
    prev_post: dict = {}                              # a post -> the previous post with its peer
    for seq in rp.peer_seq.values():
        for a, b in zip(seq, seq[1:]):
            prev_post[b] = a

    def preds(x):
        """Predecessors of event x = 2·op + (1 for a completion) on this rank's own edges: a start
        waits for its deps; a post's completion for its start and the previous post's completion."""
        n, c = divmod(x, 2)
        if not c:
            return [2 * m + (ev == "C") for m, ev in ops[n].deps]
        a = prev_post.get(n)
        return [x - 1] if a is None else [x - 1, 2 * a + 1]

    def before(u, v) -> bool:
        """u happens before v on this rank's own edges (all edges go to smaller event numbers)."""
        if u == v:
            return False
        n, c = divmod(v, 2)                           # the direct edge first, without building lists
        if not c:
            mu, cu = divmod(u, 2)
            if (mu, "C" if cu else "S") in ops[n].deps:
                return True
        elif u == v - 1 or (n in prev_post and u == 2 * prev_post[n] + 1):
            return True
        seen, todo = {v}, [v]
        while todo:
            x = todo.pop()
            for y in preds(x):
                if y == u:
                    return True
                if y > u and y not in seen:
                    seen.add(y)
                    todo.append(y)
        return False

    for peer, seq in rp.peer_seq.items():
        for k in range(1, len(seq)):
            if not before(2 * seq[k - 1], 2 * seq[k]):
                return _fail("posting order", r, f"post {seq[k]} with rank {peer} may start before post {seq[k - 1]}")
            if k >= window and not before(2 * seq[k - window] + 1, 2 * seq[k]):
                return _fail("window", r, f"more than {window} messages may be in flight with rank {peer}")
    # L4
    acc: dict = defaultdict(list)
    for n, op in enumerate(ops):
        if op.kind == "scale":
            acc[("x", op.piece)].append(((grid.op_times[op.local], LOCAL, (op.local,)), "W", n, 0, 0))
            continue
        i = op.flow
        start, end, K = starts[i], ends[i], key[i]
        if op.kind == "land":
            acc[("x", op.piece)].append(((end, LAND, K), "W", n, 0, 0))
            acc[("s", op.slot)].append(((start, K, 1), "R", n, 0, 0))
        elif op.kind == "snap":
            acc[("x", op.piece)].append(((start, READ, K), "R", n, 0, 0))
            acc[("s", op.slot)].append(((start, K, 0), "W", n, 0, 0))
        elif op.kind == "send" and op.slot is None:
            acc[("x", op.piece)].append(((start, READ, K), "R", n, 0, 1))
        elif op.kind == "send":
            acc[("s", op.slot)].append(((start, K, 1), "R", n, 0, 1))
        elif op.kind == "recv":
            acc[("s", op.slot)].append(((start, K, 0), "W", n, 0, 1))
    for buf, items in acc.items():
        if buf[0] == "s":         # a slot's users by their flows' starts (a piece's are in op order already:
            items.sort()          # L2 sorted the ops by κ, which orders its writes and reads alike)
        last_w, reads = None, []
        for _, kind, n, s_ev, e_ev in items:
            s = 2 * n + s_ev
            if kind == "W":
                for u in reads:
                    if not before(u, s):
                        return _fail("WAR", r, f"{buf}: op {n} may overwrite what op {u // 2} still reads")
                # WAW: with a read in between it follows (last write < that read's start ≤ its end < s,
                # the first by the read's RAW check); else it is checked directly
                if last_w is not None and not reads and not before(last_w, s):
                    return _fail("WAW", r, f"{buf}: op {n} may run before the write of op {last_w // 2} has finished")
                last_w, reads = 2 * n + e_ev, []
                continue
            if last_w is not None and not before(last_w, s):
                return _fail("RAW", r, f"{buf}: op {n} may run before the write of op {last_w // 2} has finished")
            reads.append(2 * n + e_ev)
    return None
