"""Schedules for the streaming tests: random proved ones, and an in-process streaming simulator.

`random_schedule(rng)` draws an algorithm family, p, stragglers, ℓ and k, then relabels the ranks
by a random permutation (g = 1), so the schedules differ in shape and in who talks to whom.
`simulate(schedule, program, xs, rng)` executes the streaming program on tensors, choosing at
random among every enabled event (an op start, a message transfer once both ends posted, a
completion observed in per-peer order), with sends reading and receives writing at transfer time,
which is the latest moment either may touch its buffer.
"""
import random
from fractions import Fraction as F

from optcc.algorithms import build_schedule
from optcc.algorithms.baselines import hierarchical_ring_allreduce
from optcc.cluster import Cluster
from optcc.schedule import Flow, LocalOp, Schedule


def relabel(schedule: Schedule, perm) -> Schedule:
    c = schedule.cluster
    cluster = Cluster.build(c.p, c.g, {perm[r]: ell for r, ell in c.stragglers.items()}, c.bandwidth,
                            c.nvlink_bandwidth, c.overhead)
    flows = [f._replace(src=perm[f.src], dst=perm[f.dst]) for f in schedule.flows]
    ops = [LocalOp(perm[o.rank], o.piece, o.time, o.coef) for o in schedule.local_ops]
    return Schedule(cluster, schedule.pieces, flows, ops, dict(schedule.meta)).validate()


def random_schedule(rng: random.Random, max_p: int = 5) -> Schedule:
    family = rng.choice(["ring", "optcc", "optcc", "multi", "servers", "hier"])
    p = rng.randint(3, max_p)
    ell = rng.choice([F(3, 2), F(2), F(3)])
    k = rng.randint(1, 3)
    if family == "ring":
        return relabel(build_schedule("ring", Cluster.build(p), k), rng.sample(range(p), p))
    if family == "optcc":
        s = build_schedule("optcc", Cluster.build(p, stragglers={0: ell}), k)
        return relabel(s, rng.sample(range(p), p))
    if family == "multi":
        p = max(p, 4)
        s = build_schedule("optcc", Cluster.build(p, stragglers={0: ell, 1: ell + 1}), k)
        return relabel(s, rng.sample(range(p), p))
    server = rng.randrange(2)
    c = Cluster.build(4, 2, {2 * server: ell, 2 * server + 1: ell})
    return build_schedule("optcc", c, k) if family == "servers" else hierarchical_ring_allreduce(c)


def signed_schedule():
    """p = 2 with a coefficient 2, a LocalOp −1 and a copy (as tests/gpu_runner/test_runner.py)."""
    c = Cluster.build(2)
    flows = [Flow(1, 0, 0, "add", F(0), coef=2), Flow(1, 0, 0, "add", F(1)), Flow(0, 1, 0, "copy", F(2))]
    return Schedule(c, [F(1)], flows, [LocalOp(1, 0, F(1), -1)], meta={"algorithm": "signed"}).validate()


def simulate(schedule, program, xs, rng: random.Random, numel_ranges):
    """Run `program` on xs (one flat tensor per rank) in a random interleaving; xs in place."""
    import torch
    p = schedule.cluster.p
    ranges = numel_ranges
    sizes = []
    for rp in program.ranks:
        s = [0] * rp.n_slots
        for op in rp.ops:
            if op.slot is not None:
                lo, hi = ranges[op.piece]
                s[op.slot] = max(s[op.slot], hi - lo)
        sizes.append(s)
    slots = [[torch.zeros(n, dtype=xs[0].dtype) for n in s] for s in sizes]

    def view(r, op, buf):
        lo, hi = ranges[op.piece]
        return xs[r][lo:hi] if buf == "x" else slots[r][op.slot][:hi - lo]

    happened = [set() for _ in range(p)]           # (op, "S"|"C")
    posted = {}                                      # (flow, "send"|"recv") -> (rank, op)
    captured, delivered = {}, set()                  # flow -> data read by the send; flows landed in a slot
    observed_upto = [dict() for _ in range(p)]      # peer -> number of completions observed
    n_events = sum(len(rp.ops) + sum(op.kind in ("send", "recv") for op in rp.ops) for rp in program.ranks)
    while sum(len(h) for h in happened) < n_events:
        choices = []
        for r, rp in enumerate(program.ranks):
            for n, op in enumerate(rp.ops):
                if (n, "S") not in happened[r] and all(d in happened[r] for d in op.deps):
                    choices.append(("start", r, n))
            for peer, seq in rp.peer_seq.items():
                k = observed_upto[r].get(peer, 0)
                if k < len(seq):
                    op = rp.ops[seq[k]]
                    if op.flow in (captured if op.kind == "send" else delivered):
                        choices.append(("observe", r, seq[k]))
        for (flow, side) in posted:
            if side == "send" and flow not in captured:
                choices.append(("capture", flow, None))       # an eager send reads its buffer
            if side == "recv" and flow in captured and flow not in delivered:
                choices.append(("deliver", flow, None))       # the receive's slot is written
        if not choices:
            raise AssertionError("the streaming program deadlocked in the simulator")
        kind, a, b = rng.choice(choices)
        if kind == "capture":
            sr, sn = posted[(a, "send")]
            sop = program.ranks[sr].ops[sn]
            captured[a] = view(sr, sop, "x" if sop.slot is None else "s").clone()
        elif kind == "deliver":
            rr, rn = posted[(a, "recv")]
            view(rr, program.ranks[rr].ops[rn], "s").copy_(captured[a])
            delivered.add(a)
        elif kind == "observe":
            op = program.ranks[a].ops[b]
            happened[a].add((b, "C"))
            observed_upto[a][op.peer] = observed_upto[a].get(op.peer, 0) + 1
        else:
            op = program.ranks[a].ops[b]
            happened[a].add((b, "S"))
            if op.kind in ("send", "recv"):
                posted[(op.flow, op.kind)] = (a, b)
            elif op.kind == "snap":
                view(a, op, "s").copy_(view(a, op, "x"))
            elif op.kind == "land":
                f = schedule.flows[op.flow]
                dst, src = view(a, op, "x"), view(a, op, "s")
                dst.copy_(src) if f.op == "copy" else dst.add_(src, alpha=f.coef)
            else:
                view(a, op, "x").mul_(schedule.local_ops[op.local].coef)
    return xs


def snapshot_schedule():
    """p = 3, one piece: rank 0 sends it to 1 over [1, 2] while the straggler's add lands in it at
    t = 3/2, so the send reads a snapshot (op "snap"); then 1 copies it on to 2 and back to 0."""
    c = Cluster.build(3, stragglers={2: F(3, 2)})
    flows = [Flow(2, 0, 0, "add", F(0)), Flow(0, 1, 0, "copy", F(1)), Flow(0, 1, 0, "copy", F(2)),
             Flow(1, 2, 0, "copy", F(3))]
    return Schedule(c, [F(1)], flows, meta={"algorithm": "snapshot"})
