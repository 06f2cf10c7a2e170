"""prove_rails_composition: a rails schedule (g GPUs per server, rail l = the GPUs s·g + l)
proved from one proof per distinct rail plus a linear-time check of the NVLink brackets,
instead of the whole-schedule sum and causality properties.

Composition theorem (derived; the argument is in docs/parametric.md "Rails by composition").
Let a schedule on q ≥ 2 servers of g ≥ 2 GPUs satisfy
  (R1) every NIC flow and local op of a piece c is on GPUs of one local index l = rail(c)
       (src mod g = dst mod g = l), so rails use disjoint GPUs, hence disjoint NIC ports;
  (R2) rail l's NIC flows and local ops, relabelled (rank s·g + l ↦ s, piece ↦ its index
       among rail l's pieces, size x ↦ x/w_l with w_l the rail's total size, time t ↦
       (t − D_l)/w_l with D_l the rail's first start), are an AllReduce on the q-node cluster
       of the rail's slowdowns (prove_allreduce: sum, causality, capacity);
  (R3) for every server s and piece c of rail l, GPU s·g + l receives exactly one NVLink "add"
       (coefficient 1) from each other GPU of server s, each landing by the rail's first touch
       of (s·g + l, c), and sends exactly one NVLink "copy" to each of them, each starting at
       or after the rail's last landing at (s·g + l, c); every NVLink flow is one of these;
  (R4) the whole schedule meets its capacity model and its stated time (checked directly).
Then it is an AllReduce. Its steps are Z3 obligations for every q, g (verifier.parametric.rails,
reported as facts["composition_theorem"]; what stays argued is listed there). Proof sketch: before the adds land, no flow writes (s·g + j, c),
j ≠ l (only the copies do, and they start after the last rail landing, which is after the first
touch), so each add carries input x_{s·g+j}; they commute, so at the first touch GPU s·g + l
holds the server sum y_s. Nothing but the rail writes (s·g + l, c) from then on (R1, R3), so the
rail — linear in the values its nodes hold at their first touch, and an AllReduce of them by
(R2), whose relabelling is an affine increasing time map with durations scaled by the same
w_l (NIC time is size · max ℓ / rate) — leaves Σ_s y_s, the full sum, there; the copies read
it after the last landing and are the only writes to the other GPUs' (s·g + j, c). Landings of
one instant on (s·g + l, c) are all adds (they commute); rail landings come strictly after the
first touch. The checks of (R1), (R3) and the first-touch / last-write times are O(flows);
rails with byte-identical relabelled schedules are proved once.
"""
from __future__ import annotations

import hashlib
import time
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from optcc.cluster import Cluster
from optcc.schedule import Flow, LocalOp, Schedule
from optcc.timing import IntegerTimes, durations

if TYPE_CHECKING:
    from verifier.proof import Proof

Split = tuple[dict[int, int], dict[int, list[int]], dict[int, list[LocalOp]], list[int]]
Times = dict[tuple[int, int], Fraction]      # (rank, piece) -> a time


def _fail(why: str, **where: Any) -> dict[str, Any]:
    return {"property": "composition", "message": why, **where}


def _split(schedule: Schedule) -> Split | dict[str, Any]:
    """(rail of every piece, NIC flow indices per rail, local ops per rail, NVLink flow indices)
    or a failure dict (R1)."""
    g = schedule.cluster.g
    rail: dict[int, int] = {}
    nic: dict[int, list[int]] = {}
    ops: dict[int, list[LocalOp]] = {}
    nv: list[int] = []
    for i, f in enumerate(schedule.flows):
        if f.link == "nvlink":
            if f.src // g != f.dst // g:
                return _fail("an NVLink flow leaves its server", flow=i)
            nv.append(i)
            continue
        l = f.src % g
        if f.dst % g != l:
            return _fail("a NIC flow joins two rails (local indices differ)", flow=i, piece=f.piece)
        if rail.setdefault(f.piece, l) != l:
            return _fail("a piece is carried by two rails", flow=i, piece=f.piece, rails=[rail[f.piece], l])
        nic.setdefault(l, []).append(i)
    for op in schedule.local_ops:
        l = op.rank % g
        if rail.setdefault(op.piece, l) != l:
            return _fail("a local op is off its piece's rail", rank=op.rank, piece=op.piece)
        ops.setdefault(l, []).append(op)
    missing = [c for c in range(len(schedule.pieces)) if c not in rail]
    if missing:
        return _fail("a piece is carried by no rail", piece=missing[0])
    return rail, nic, ops, nv


def rail_schedule(schedule: Schedule, l: int, rail: dict[int, int], nic: list[int], ops: list[LocalOp]) -> Schedule:
    """Rail l of `schedule`, relabelled onto its own q-node cluster (R2)."""
    c, g = schedule.cluster, schedule.cluster.g
    mine = [p for p in range(len(schedule.pieces)) if rail[p] == l]
    index = {p: i for i, p in enumerate(mine)}
    w = sum(schedule.pieces[p] for p in mine)
    starts = [schedule.flows[i].start for i in nic] + [op.time for op in ops]
    D = min(starts)
    slow = {s: c.slowdown[s * g + l] for s in range(c.servers) if c.slowdown[s * g + l] != 1}
    inst = Cluster.build(c.servers, 1, slow or None)
    flows = [Flow(f.src // g, f.dst // g, index[f.piece], f.op, (f.start - D) / w, f.link, f.rate, f.coef)
             for f in (schedule.flows[i] for i in nic)]
    local = [LocalOp(op.rank // g, index[op.piece], (op.time - D) / w, op.coef) for op in ops]
    meta = {"algorithm": "rail", "capacity": schedule.meta.get("capacity", "exclusive")}
    return Schedule(inst, [schedule.pieces[p] / w for p in mine], flows, local, meta=meta)


def _touches(schedule: Schedule, durs: list[Fraction], nic_by_rail: dict[int, list[int]],
             ops_by_rail: dict[int, list[LocalOp]]) -> tuple[Times, Times]:
    """First touch and last landing of every (rank, piece) by its rail, in global time."""
    ft: Times = {}
    lw: Times = {}
    flows = schedule.flows

    def touch(key: tuple[int, int], t: Fraction) -> None:
        cur = ft.get(key)
        if cur is None or t < cur:
            ft[key] = t

    def land(key: tuple[int, int], t: Fraction) -> None:
        cur = lw.get(key)
        if cur is None or t > cur:
            lw[key] = t
    for idx in nic_by_rail.values():
        for i in idx:
            f = flows[i]
            touch((f.src, f.piece), f.start)
            touch((f.dst, f.piece), f.start)
            land((f.dst, f.piece), f.start + durs[i])
    for ops in ops_by_rail.values():
        for op in ops:
            touch((op.rank, op.piece), op.time)
            land((op.rank, op.piece), op.time)
    return ft, lw


def check_brackets(schedule: Schedule, rail: dict[int, int], nv: list[int], ft: Times, lw: Times,
                   durs: list[Fraction]) -> dict[str, Any] | None:
    """(R3) in one pass over the NVLink flows; None when it holds, else a failure."""
    g, q = schedule.cluster.g, schedule.cluster.servers
    rs: dict[tuple[int, int], set[int]] = {}
    ag: dict[tuple[int, int], set[int]] = {}
    for i in nv:
        f = schedule.flows[i]
        l, s = rail[f.piece], f.src // g
        home = s * g + l
        if f.op == "add" and f.dst == home and f.src != home and f.coef == 1:
            senders = rs.setdefault((home, f.piece), set())
            if f.src in senders:
                return _fail("two reduce-scatter adds from one GPU", flow=i, rank=home, piece=f.piece)
            senders.add(f.src)
            first = ft.get((home, f.piece))
            if first is None or f.start + durs[i] > first:
                return _fail("a reduce-scatter add lands after the rail's first touch", flow=i, rank=home,
                             piece=f.piece, lands=str(f.start + durs[i]),
                             first_touch=None if first is None else str(first))
        elif f.op == "copy" and f.src == home and f.dst != home:
            receivers = ag.setdefault((home, f.piece), set())
            if f.dst in receivers:
                return _fail("two all-gather copies to one GPU", flow=i, rank=home, piece=f.piece)
            receivers.add(f.dst)
            last = lw.get((home, f.piece))
            if last is None or f.start < last:
                return _fail("an all-gather copy starts before the rail's last landing", flow=i, rank=home,
                             piece=f.piece, starts=str(f.start), last_landing=None if last is None else str(last))
        else:
            return _fail("an NVLink flow is neither a reduce-scatter add into its piece's rail GPU nor an "
                         "all-gather copy out of it", flow=i, piece=f.piece)
    for p, l in rail.items():
        for s in range(q):
            home = s * g + l
            if len(rs.get((home, p), ())) != g - 1 or len(ag.get((home, p), ())) != g - 1:
                return _fail("a server's bracket misses a GPU", rank=home, piece=p,
                             reduce_scatter=len(rs.get((home, p), ())), all_gather=len(ag.get((home, p), ())))
    return None


def _theorem_facts() -> dict[str, Any]:
    """The theorem's machine-checked part (verifier.parametric.rails, every q, g), summarised."""
    from verifier.parametric.rails import composition_theorem
    th = composition_theorem()
    return {"status": th["status"], "for_all": th["for_all"], "obligations": len(th["obligations"]),
            "controls_refuted": sum(c["status"] == "refuted" for c in th["controls"]), "argued": th["argued"]}


def prove_rails_composition(schedule: Schedule) -> Proof:
    """A verifier.proof.Proof of `schedule` by the composition theorem (module docstring):
    properties sum and causality by (R1)-(R3), capacity and time checked on the whole schedule.
    A schedule outside the theorem's shape is not proved (counterexample names the condition);
    it may still be correct: prove it with prove_allreduce. `facts`: rails, distinct rail
    proofs, seconds of each stage."""
    from verifier.port_checks import check_capacity_property
    from verifier.proof import Proof, prove_allreduce
    from verifier.time_property import check_time

    t0 = time.perf_counter()
    schedule.validate()
    c = schedule.cluster
    facts: dict[str, Any] = {"method": "rails composition (verifier.rails_composition)", "stage_seconds": {}}

    def done(ok_props: dict[str, bool], cx: dict[str, Any] | None = None) -> Proof:
        return Proof(proved=cx is None and all(ok_props.values()), properties=ok_props, counterexample=cx,
                     seconds=time.perf_counter() - t0, counterexamples={cx["property"]: cx} if cx else {},
                     facts=facts)
    if c.g < 2 or c.servers < 2:
        return done({"sum": False, "causality": False}, _fail("needs q ≥ 2 servers of g ≥ 2 GPUs"))
    split = _split(schedule)
    if isinstance(split, dict):
        return done({"sum": False, "causality": False}, split)
    rail, nic, ops, nv = split
    t = time.perf_counter()
    proved: dict[str, Proof] = {}
    for l in sorted(set(rail.values())):
        rs = rail_schedule(schedule, l, rail, nic.get(l, []), ops.get(l, []))
        key = hashlib.sha256(rs.canonical_bytes()).hexdigest()
        if key not in proved:
            proved[key] = prove_allreduce(rs, properties=("sum", "causality", "capacity"), reported=())
        pr = proved[key]
        if not pr.proved:
            return done({"sum": False, "causality": False},
                        _fail("a rail is not an AllReduce", rail=l, rail_counterexample=pr.counterexample))
    facts["composition_theorem"] = _theorem_facts()
    facts["rails"] = len(set(rail.values()))
    facts["distinct_rail_proofs"] = len(proved)
    facts["stage_seconds"]["rails"] = round(time.perf_counter() - t, 4)
    t = time.perf_counter()
    durs = durations(schedule)
    ft, lw = _touches(schedule, durs, nic, ops)
    cx = check_brackets(schedule, rail, nv, ft, lw, durs)
    facts["stage_seconds"]["brackets"] = round(time.perf_counter() - t, 4)
    if cx is not None:
        return done({"sum": False, "causality": False}, cx)
    props = {"sum": True, "causality": True}
    t = time.perf_counter()
    grid = IntegerTimes(schedule, durs)
    ok: bool | None
    ok, cx = check_capacity_property(schedule, grid)
    props["capacity"] = ok
    first = None if ok else cx
    ok, cx, time_facts = check_time(schedule, grid)
    facts.update(time_facts)
    if ok is not None:
        props["time"] = ok
        if ok is False and first is None:
            first = cx
    facts["stage_seconds"]["capacity_time"] = round(time.perf_counter() - t, 4)
    return done(props, first)
