"""Property "runnable": the step runner's per-rank plans (optcc.lowering.step) realize the schedule.

Checks a RankPlan, as optcc.lowering.step built it, against the Schedule alone (the spec), so
a lowering bug is caught before anything runs; the verifier proves the schedule's values in
the order these checks demand of the plan. For rank r and a tensor of N elements:
  B  transfers: every flow of r whose piece gets an element is one transfer, a send on src and
     a receive on dst, with that peer, op, coefficient, start, end (start + the Cluster's
     duration) and the piece's element range [floor(N·c_k), floor(N·c_{k+1})) (c_k: the sum of
     the sizes of the pieces before k); nothing else is transferred;
  O  order: steps in increasing time; each transfer posted once, at its start; each receive
     landed once and each send waited once, at its end; the posts to each peer in posting
     order (optcc.schedule.posting_order), which both ends compute alike, so the k-th message
     of a pair is the same flow on both ends (gloo and NCCL match a pair's messages in posting
     order); landings of one instant in posting order (the order every verifier property
     uses); every local op of r applied once, at its time, on its piece's range;
  S  buffers: receives (and snapshotted sends) use scratch ranges inside the scratch, pairwise
     disjoint while both are in flight ([start, end] intervals that overlap in more than an
     instant: a slot freed at t is refilled after the landings of t); a send that reads the
     tensor directly is not sent from a piece this rank modifies while it is in flight (else
     it is snapshotted at its start).
The streaming runner does not run these plans: its programs are checked by
verifier.streaming_check.check_streaming, independently of how they are built.
"""
from __future__ import annotations

from collections import defaultdict
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from optcc.schedule import posting_order
from optcc.timing import durations

if TYPE_CHECKING:
    from collections.abc import Sequence

    from optcc.lowering.step import RankPlan, Transfer
    from optcc.schedule import Schedule
    from verifier.proof import Proof

Result = tuple[bool, dict[str, Any] | None]          # (ok, counterexample or None)


def _element_ranges(pieces: Sequence[Fraction], numel: int) -> list[tuple[int, int]]:
    edges, acc = [0], Fraction(0)
    for size in pieces:
        acc += size
        edges.append(acc.numerator * numel // acc.denominator)
    return list(zip(edges, edges[1:]))


def _fail(kind: str, rank: int, flow: int | None, message: str) -> Result:
    return False, {"property": "runnable", "kind": kind, "rank": rank, "flow": flow,
                   "message": f"rank {rank}'s runner program: {message}"}


def check_plan(schedule: Schedule, plan: RankPlan, durs: list[Fraction] | None = None, order: list[int] | None = None,
               pos: dict[int, int] | None = None) -> Result:
    """B, O, S above for one RankPlan; (True, None) or (False, counterexample)."""
    flows, r, numel = schedule.flows, plan.rank, plan.numel
    durs = durations(schedule) if durs is None else durs
    order = posting_order(schedule) if order is None else order
    ranges = _element_ranges(schedule.pieces, numel)
    pos = {i: n for n, i in enumerate(order)} if pos is None else pos
    if plan.world_size != schedule.cluster.p:
        return _fail("world size", r, None, f"built for {plan.world_size} ranks, the schedule has {schedule.cluster.p}")
    expected = [i for i in order if r in (flows[i].src, flows[i].dst) and ranges[flows[i].piece][0] < ranges[flows[i].piece][1]]
    by_flow: dict[int, Transfer] = {}
    for t in plan.transfers:                                                            # B
        if t.flow in by_flow or not 0 <= t.flow < len(flows):
            return _fail("transfer", r, t.flow, f"flow {t.flow} is transferred twice or is not in the schedule")
        by_flow[t.flow] = t
        f = flows[t.flow]
        want = (r == f.src, f.dst if r == f.src else f.src, ranges[f.piece], f.op, f.coef, f.start, f.start + durs[t.flow])
        got = (t.send, t.peer, (t.lo, t.hi), t.op, t.coef, t.start, t.end)
        if r not in (f.src, f.dst) or want != got:
            return _fail("transfer", r, t.flow, f"flow {t.flow} ({f.src}->{f.dst} piece {f.piece}) is lowered as "
                                                f"(send, peer, range, op, coef, start, end) = {got}, the schedule says {want}")
    missing = [i for i in expected if i not in by_flow]
    if missing or len(by_flow) != len(expected):
        i = missing[0] if missing else next(k for k in by_flow if k not in set(expected))
        return _fail("transfer", r, i, f"flow {i} is {'missing from' if missing else 'not one of'} its transfers")
    posted: defaultdict[int, int] = defaultdict(int)
    landed: defaultdict[int, int] = defaultdict(int)
    waited: defaultdict[int, int] = defaultdict(int)
    last: Fraction | None = None
    per_peer: dict[int, list[int]] = defaultdict(list)
    snap_at: dict[int, Fraction] = {}
    ops_seen: list[tuple[Fraction, int, int, int]] = []
    writes: dict[int, list[Fraction]] = defaultdict(list)        # piece -> times this rank modifies it
    for s in plan.steps:                                                                # O
        if last is not None and s.time <= last:
            return _fail("order", r, None, f"step at t = {s.time} comes after the step at t = {last}")
        last = s.time
        land_order = [t.flow for t in s.landings]
        for t in s.sends_done:
            waited[t.flow] += 1
            if not t.send or t.end != s.time:
                return _fail("order", r, t.flow, f"flow {t.flow} is waited as a send at t = {s.time}, it ends at {t.end}")
        for t in s.landings:
            landed[t.flow] += 1
            writes[flows[t.flow].piece].append(s.time)
            if t.send or t.end != s.time:
                return _fail("order", r, t.flow, f"flow {t.flow} lands at t = {s.time}, it ends at {t.end}")
        if land_order != sorted(land_order, key=pos.__getitem__):
            return _fail("order", r, land_order[0], f"the landings at t = {s.time} are applied as flows {land_order}, "
                                                   f"not in posting order (the order the verifier proves)")
        for lo, hi, coef in s.local_ops:
            ops_seen.append((s.time, lo, hi, coef))
        for t in s.snapshots:
            snap_at[t.flow] = s.time
        for t in s.posts:
            posted[t.flow] += 1
            per_peer[t.peer].append(t.flow)
            if t.start != s.time:
                return _fail("order", r, t.flow, f"flow {t.flow} is posted at t = {s.time}, it starts at {t.start}")
    for i in expected:
        f = flows[i]
        if posted[i] != 1 or (landed[i], waited[i]) != ((0, 1) if r == f.src else (1, 0)):
            return _fail("order", r, i, f"flow {i} is posted {posted[i]}×, landed {landed[i]}×, waited as a send "
                                        f"{waited[i]}× (must be once each, as its role requires)")
    for peer, seq in per_peer.items():
        if seq != sorted(seq, key=pos.__getitem__):
            k = next(k for k, (a, b) in enumerate(zip(seq, sorted(seq, key=pos.__getitem__))) if a != b)
            return _fail("pair order", r, seq[k], f"message {k} with rank {peer} is flow {seq[k]}, but in posting "
                                                  f"order it is flow {sorted(seq, key=pos.__getitem__)[k]}: rank {peer} "
                                                  f"posts that one there, so the pair would be matched wrongly")
    want_ops = sorted((op.time, *ranges[op.piece], op.coef) for op in schedule.local_ops
                      if op.rank == r and ranges[op.piece][0] < ranges[op.piece][1])
    if sorted(ops_seen) != want_ops:
        return _fail("local ops", r, None, f"applies local ops {sorted(ops_seen)}, the schedule says {want_ops}")
    for op in schedule.local_ops:
        if op.rank == r:
            writes[op.piece].append(op.time)
    users: list[Transfer] = []                                                                          # S
    for t in plan.transfers:
        if t.send and t.slot is None:
            mod = next((m for m in writes[flows[t.flow].piece] if t.start < m < t.end), None)
            if mod is not None:
                return _fail("buffer", r, t.flow, f"flow {t.flow} is sent from the tensor during [{t.start}, {t.end}) "
                                                  f"but rank {r} modifies piece {flows[t.flow].piece} at {mod}: it "
                                                  f"needs a snapshot")
            continue
        if t.slot is None or t.slot < 0 or t.slot + t.length > plan.scratch_numel:
            return _fail("buffer", r, t.flow, f"flow {t.flow}'s scratch slot {t.slot} (+{t.length}) is outside the "
                                              f"scratch of {plan.scratch_numel} elements")
        if t.send and snap_at.get(t.flow) != t.start:
            return _fail("buffer", r, t.flow, f"flow {t.flow} is sent from a scratch slot never snapshotted at its start")
        users.append(t)
    users.sort(key=lambda t: t.start)
    live: list[Transfer] = []
    for t in users:
        assert t.slot is not None                   # every user has a slot (checked above)
        live = [u for u in live if u.end > t.start]
        for u in live:
            assert u.slot is not None
            if u.slot < t.slot + t.length and t.slot < u.slot + u.length:
                return _fail("buffer", r, t.flow, f"flows {u.flow} and {t.flow} use overlapping scratch "
                                                  f"[{u.slot}, {u.slot + u.length}) and [{t.slot}, {t.slot + t.length}) "
                                                  f"while both are in flight")
        live.append(t)
    return True, None


def check_plans(schedule: Schedule, plans: Sequence[RankPlan]) -> Result:
    """check_plan for every rank's plan (plans[r] must be rank r's); the first failure."""
    if len(plans) != schedule.cluster.p:
        return _fail("world size", 0, None, f"{len(plans)} plans for {schedule.cluster.p} ranks")
    durs, order = durations(schedule), posting_order(schedule)
    pos = {i: n for n, i in enumerate(order)}
    for r, plan in enumerate(plans):
        if plan.rank != r:
            return _fail("world size", r, None, f"plans[{r}] is rank {plan.rank}'s plan")
        ok, cx = check_plan(schedule, plan, durs, order, pos)
        if not ok:
            return ok, cx
    return True, None


def nonempty_numel(schedule: Schedule) -> int:
    """The smallest tensor length that gives every piece an element (N·size ≥ 1 for each)."""
    smallest = min(schedule.pieces)
    return max(len(schedule.pieces), -(-smallest.denominator // smallest.numerator))


def runnable_property(schedule: Schedule) -> Result:
    """`runnable` as `optcc verify` reports it: every rank's plan for a tensor that gives every
    piece an element, built by optcc.lowering.step and checked above; (ok, counterexample)."""
    from optcc.lowering.step import build_all_plans
    return check_plans(schedule, build_all_plans(schedule, nonempty_numel(schedule)))


CHECK_LIMIT = 4_000_000     # policy (not from the paper): p × flows visited by runnable_property, a few seconds


def runnable_result(schedule: Schedule) -> Result | None:
    """"runnable" as `optcc verify` shows it: runnable_property for every rank when p × flows ≤
    CHECK_LIMIT, else None (left to each rank, which checks its own plan before it runs)."""
    if schedule.cluster.p * max(len(schedule.flows), 1) > CHECK_LIMIT:
        return None
    return runnable_property(schedule)


def add_runnable(proof: Proof, result: Result | None) -> None:
    """Record runnable_result in a verifier Proof (a failure refutes it; None: a note in facts)."""
    if result is None:
        proof.facts["runnable"] = (f"not checked here (p × flows > {CHECK_LIMIT}); every rank checks its own "
                                   f"plan before it runs")
        return
    ok, cx = result
    proof.properties["runnable"] = ok
    if not ok:
        assert cx is not None                       # a failure has its counterexample
        proof.counterexamples["runnable"] = cx
        proof.proved = False
        if proof.counterexample is None:
            proof.counterexample = dict(cx)
        else:
            proof.counterexample.setdefault("also_failed", []).append("runnable")
