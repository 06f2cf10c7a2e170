"""The multi-GPU server lift of optcc_servers as index formulas, and its enumeration.

Derived from optcc.algorithms.servers.build and optcc.algorithms.servers.lift (their docstrings
have the construction; paper: "Several GPUs per server", Figures 13-19). A `Lift` names every
formula the lift uses, once, over an arithmetic namespace `A` (families.INT here; the Z3
namespaces of verifier.parametric.servers there), so the proof and the enumeration read the
same formulas:

- GPU l of server s is rank s·g + l; instance l (local index l of every server) runs the
  q-server instance over its own NICs; instance piece π is global piece l·P + π, of size x/g
  for an instance piece of size x; instance time t is global time D + t/g (D the lead), an
  instance NIC flow lasting d lasts d/g.
- NVLink batch of piece π on one server: rounds t = 1..g−1; in round t local GPU j sends to
  (j + t) mod g the piece of the destination's instance (reduce-scatter, add) or of its own
  instance j (all-gather, copy); a round lasts x'/s_nv for the global piece size x'; round t
  of a batch starting at st starts at st + (t−1)·rnd; a batch lasts (g−1)·rnd.
- Placement (closed form in the instance's first-touch times ft and last-write times lw of
  each (server, π)): a server's RS batches run back to back from 0 in first-touch order; the
  lead D is the least D ≥ 0 with every RS batch ending by D + ft/g; the AG batches run in
  release order (release D + lw/g), each at max(release, end of the previous NVLink batch).
- The instance: q ≥ 3 single-straggler OptCC (families.optcc, proved for all p ≥ 3); q = 2
  the k-segment swap `SWAP` below; q = 1 none (the identity on one piece, touched at instance
  time 0).
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from optcc.algorithms.families import INT, Arith, Family, Params, Term, Terms

if TYPE_CHECKING:
    from optcc.cluster import Cluster
    from optcc.schedule import Flow, Schedule


def _max(A: Arith, a: Term, b: Term) -> Term:
    return A.ite(a >= b, a, b)


@dataclass(frozen=True)
class Lift:
    rank: Callable[..., Term]          # (A, g, s, l) -> global rank of GPU l of server s
    piece: Callable[..., Term]         # (A, P, l, pi) -> global piece of instance l's piece π
    size: Callable[..., Term]          # (A, x, g) -> global size of an instance piece of size x
    time: Callable[..., Term]          # (A, D, t, g) -> global time of instance time t, lead D
    dur: Callable[..., Term]           # (A, d, g) -> global NIC duration of an instance flow lasting d
    rounds: Callable[..., Term]        # (A, g) -> (first, last) NVLink round
    round_flow: Callable[..., Term]    # (A, g, t, j, op) -> (src local, dst local, instance) of round t
    rs_op: str              # the reduce-scatter rounds' op
    ag_op: str              # the all-gather rounds' op
    round_len: Callable[..., Term]     # (A, x, s_nv) -> one round of a batch of a global piece of size x
    round_start: Callable[..., Term]   # (A, st, t, rnd) -> start of round t of a batch starting at st
    batch_len: Callable[..., Term]     # (A, g, rnd) -> length of a batch of rounds of length rnd
    rs_next: Callable[..., Term]       # (A, st, b) -> start of the RS batch after one of length b at st
    lead_need: Callable[..., Term]     # (A, st, b, ft, g) -> least lead for that batch to end by its first touch
    ag_start: Callable[..., Term]      # (A, release, free) -> start of an AG batch released at `release`
    #                         when NVLink is free from `free`


def _round_flow(A: Arith, g: Term, t: Term, j: Term, op: Term) -> tuple[Term, Term, Term]:
    dst = A.mod(j + t, g, 0, 1)
    return j, dst, (dst if op == "add" else j)


LIFT = Lift(
    rank=lambda A, g, s, l: A.mul(s, g) + l,
    piece=lambda A, P, l, pi: A.mul(l, P) + pi,
    size=lambda A, x, g: x / g,
    time=lambda A, D, t, g: D + t / g,
    dur=lambda A, d, g: d / g,
    rounds=lambda A, g: (1, g - 1),
    round_flow=_round_flow,
    rs_op="add",
    ag_op="copy",
    round_len=lambda A, x, s_nv: x / s_nv,
    round_start=lambda A, st, t, rnd: st + (t - 1) * rnd,
    batch_len=lambda A, g, rnd: (g - 1) * rnd,
    rs_next=lambda A, st, b: st + b,
    lead_need=lambda A, st, b, ft, g: st + b - ft / g,
    ag_start=lambda A, release, free: _max(A, release, free),
)


# ---- q = 2: the instance is k segments swapped in turn (optcc_servers._two_server_instance)

def _swap_dom(A: Arith, P: Params, i: Term, d: Term) -> list[Term]:
    return [i >= 0, i < P.k, d >= 0, d <= 1]


def _swap(A: Arith, P: Params, i: Term, d: Term) -> Terms:
    """Segment i (size 1/k) from server d to server 1 − d, both ways at once; one slot = ℓ/k (the
    slower end is always the straggler server)."""
    return Terms(d, 1 - d, (i,), i, 1, 0, 1, 0)


SWAP = Family("servers.swap", ("i", "d"), "add", _swap_dom, _swap)
TWO_SERVER_FAMILIES = (SWAP,)
Touch = list[dict[int, Fraction]]   # per server or node: piece -> time


def two_server_flows(k: int, ell: Fraction,
                     families: tuple[Family, ...] = TWO_SERVER_FAMILIES) -> tuple[list[Fraction], list[Flow]]:
    """(pieces, flows) of the q = 2 instance: the swap family enumerated, slot ℓ/k."""
    from optcc.schedule import Flow
    (swap,) = families
    P = Params(2, k, Fraction(ell), 0)
    slot = Fraction(ell) / k
    flows: list[Flow] = []
    for i in range(k):
        for d in range(2):
            if all(swap.domain(INT, P, i, d)):
                T = swap.terms(INT, P, i, d)
                flows.append(Flow(T.src, T.dst, T.piece[0], swap.op, (T.box + T.offset) * slot))
    return [Fraction(1, k)] * k, flows


# ---- the placement's times in closed form (derived: docs/optcc_servers.md "Construction and slot
# time"; verifier.parametric.servers proves each is what the placement needs or computes): the
# touch times for every q, the lead, AG starts and finish for q ≤ 2

@dataclass(frozen=True)
class Placement:
    first_touch: Callable[..., Term]   # (A, k, i) -> q = 2: first swap flow on segment i at either server, slots of ℓ/k
    last_write: Callable[..., Term]    # (A, k, i) -> q = 2: last landing on segment i at either server, slots of ℓ/k
    rs_start: Callable[..., Term]      # (A, i, c) -> start of the i-th RS batch of a server (batch length c)
    lead: Callable[..., Term]          # (A, k, c, N) -> the lead D (N = ℓ/(g·k), one segment's NIC exchange)
    ag_start: Callable[..., Term]      # (A, i, k, c, N, D) -> start of AG batch i of a server
    finish: Callable[..., Term]        # (A, g, k, ell, s_nv) -> the schedule's finish time, q = 2
    finish_one: Callable[..., Term]    # (A, g, s_nv) -> the schedule's finish time, q = 1
    optcc_first: Callable[..., Term]   # (A, P, v, key) -> q ≥ 3: (phase, slot) of the first flow on (v, key)
    optcc_last: Callable[..., Term]    # (A, P, v, key) -> q ≥ 3: (phase, slot) of the last landing at (v, key)


def _max3(A: Arith, a: Term, b: Term, c: Term) -> Term:
    return _max(A, _max(A, a, b), c)


def _nvlink_work(A: Arith, g: Term, s_nv: Term) -> Term:
    """W = 2(g−1)/(g·s_nv): NVLink's whole work (one RS and one AG of every piece)."""
    return 2 * (g - 1) / (g * s_nv)


PLACEMENT = Placement(
    first_touch=lambda A, k, i: i,
    last_write=lambda A, k, i: i + 1,
    rs_start=lambda A, i, c: i * c,
    lead=lambda A, k, c, N: _max(A, c, k * c - (k - 1) * N),
    ag_start=lambda A, i, k, c, N, D: _max3(A, k * c + i * c, D + N + i * c, D + (i + 1) * N),
    finish=lambda A, g, k, ell, s_nv: _max(A, ell / g + _nvlink_work(A, g, s_nv) / k, _nvlink_work(A, g, s_nv)),
    finish_one=lambda A, g, s_nv: _nvlink_work(A, g, s_nv),
    optcc_first=lambda A, P, v, key: optcc_first_touch(A, P, v, key),
    optcc_last=lambda A, P, v, key: optcc_last_landing(A, P, v, key),
)


def two_server_touch_times(k: int, ell: Fraction, placement: Placement = PLACEMENT) -> tuple[Touch, Touch]:
    """(ft, lw) per server of the q = 2 instance, instance time, from the closed forms."""
    slot = Fraction(ell) / k
    ft = {i: placement.first_touch(INT, k, i) * slot for i in range(k)}
    lw = {i: placement.last_write(INT, k, i) * slot for i in range(k)}
    return [ft, dict(ft)], [lw, dict(lw)]


def server_finish_time(cluster: Cluster, k: int, placement: Placement = PLACEMENT) -> Fraction:
    """The finish time of server_flows for q ≤ 2, proved for every size (prove-all --algo servers,
    property finish_q_le_2). Raises OptccError (field "servers") for q ≥ 3 (per instance there)."""
    from optcc.algorithms.servers.shape import straggler_server
    from optcc.errors import OptccError
    g, q, s_nv = cluster.g, cluster.servers, cluster.nvlink_speedup
    _, ell = straggler_server(cluster)
    if q == 1:
        finish_one: Fraction = placement.finish_one(INT, Fraction(g), s_nv)
        return finish_one
    if q == 2:
        finish: Fraction = placement.finish(INT, Fraction(g), k, ell, s_nv)
        return finish
    raise OptccError("servers", f"the servers finish time is proved in closed form for q ≤ 2, not q = {q}")


# ---- q ≥ 3: the OptCC instance's first touch and last landing of every (node, piece) in closed
# form, as (phase, slot) of families.optcc (phases run back to back, so (phase, slot) order is time
# order). Derived from the families: piece (σ, o) travels from node o + 1 around the ring to o
# (prologue for σ = 0, RS hops otherwise), o ↔ S, then from o around the ring (AG hops, epilogue
# for σ = k − 1); x = (v − o − 1) mod H is healthy v's distance from the chain's first node.

def _x(A: Arith, P: Params, v: Term, o: Term) -> Term:
    from optcc.algorithms.single.families import _H
    return A.mod(v - o - 1, _H(P), -1, 0)


def optcc_first_touch(A: Arith, P: Params, v: Term, key: tuple[Term, ...]) -> tuple[Term, Term]:
    """(phase, slot) of the first instance flow from or to node v on piece `key`."""
    from optcc.algorithms.single.families import _H, _base, _tau_rs
    H = _H(P)
    if len(key) == 1:                                      # P2P piece σ: o's upload; S: o = H − 1's
        (sigma,) = key
        o = A.ite(v == H, H - 1, v)
        return 1, _base(A, P, sigma, o) + P.ell
    sigma, o = key
    x = _x(A, P, A.ite(v == H, 0, v), o)
    ring = A.ite(sigma == 0, 0, 1)
    slot = A.ite(sigma == 0, _max(A, x - 1, 0), _base(A, P, sigma, o) + _tau_rs(A, P, _max(A, x, 1)))
    return A.ite(v == H, 1, ring), A.ite(v == H, _base(A, P, sigma, o), slot)


def optcc_last_landing(A: Arith, P: Params, v: Term, key: tuple[Term, ...]) -> tuple[Term, Term]:
    """(phase, slot) at which the last instance flow into node v on piece `key` lands."""
    from optcc.algorithms.single.families import _H, _base, _hop, _s_dur, _tau_ag
    H = _H(P)
    if len(key) == 1:                                      # S: o = 0's upload; o: its download
        (sigma,) = key
        return 1, A.ite(v == H, _base(A, P, sigma, 0) + 2, _base(A, P, sigma + 1, v) + 4)
    sigma, o = key
    x = _x(A, P, A.ite(v == H, 0, v), o)
    B = _base(A, P, sigma, o)
    last = sigma == P.k - 1
    phase = A.ite(v == H, 1, A.ite(v == o, 1, A.ite(last, 2, 1)))
    slot = A.ite(v == H, B + _s_dur(A, P), A.ite(v == o, B + 2 + _s_dur(A, P),
                                                 A.ite(last, x + 1, B + _tau_ag(A, P, x) + _hop(A, P))))
    return phase, slot


def optcc_touch_times(q: int, k: int, s_star: int, ell: Fraction,
                      placement: Placement = PLACEMENT) -> tuple[Touch, Touch]:
    """(ft, lw) per instance node of the q ≥ 3 instance, instance time, from the closed forms
    (nodes are ranks: healthy ring position h is rank h + [h ≥ s*], S is s*)."""
    from optcc.algorithms.single.families import node_rank, phase_clock, piece_index, piece_keys
    H = q - 1
    P = Params(q, k, Fraction(ell), s_star)
    origin, unit = phase_clock(INT, P)
    keys = piece_keys(P)
    ft: Touch = [dict() for _ in range(q)]
    lw: Touch = [dict() for _ in range(q)]

    def at(ph_slot: tuple[int, Fraction]) -> Fraction:
        ph, slot = ph_slot
        t: Fraction = origin[ph] + slot * unit[ph]
        return t
    for key in keys:
        c = piece_index(INT, P, key)
        for v in range(H + 1):
            r = node_rank(INT, P, v)
            ft[r][c] = at(placement.optcc_first(INT, P, v, key))
            lw[r][c] = at(placement.optcc_last(INT, P, v, key))
    return ft, lw


# ---- the enumeration

def _instance(cluster: Cluster, k: int,
              two_server: tuple[Family, ...]) -> tuple[Schedule, list[Fraction]] | None:
    """(instance Schedule or None for q = 1, starts, ends) in instance time."""
    from optcc.algorithms.single.families import optcc_flows
    from optcc.algorithms.servers.shape import instance_cluster, straggler_server
    from optcc.schedule import Schedule
    from optcc.timing import durations
    q = cluster.servers
    if q == 1:
        return None
    inst_cluster, ell = instance_cluster(cluster)
    s_star, _ = straggler_server(cluster)
    if q == 2:
        pieces, flows = two_server_flows(k, ell, two_server)
    else:
        pieces, flows = optcc_flows(q, k, s_star, ell)
    inst = Schedule(inst_cluster, pieces, flows)
    return inst, durations(inst)


def instance_touch_times(cluster: Cluster, k: int, inst_flows: list[Flow],
                         placement: Placement = PLACEMENT) -> tuple[Touch, Touch]:
    """(ft, lw) per server of the construction's q-node instance, instance time, from the closed
    forms (q = 1: the one piece, touched at time 0; q = 2: `placement`'s; q ≥ 3: optcc_first_touch
    / optcc_last_landing, keyed in order of first appearance in `inst_flows` so that RS batches
    with equal first touch keep the instance's order)."""
    from optcc.algorithms.servers.shape import straggler_server
    q = cluster.servers
    if q == 1:
        return [{0: Fraction(0)}], [{0: Fraction(0)}]
    s_star, ell = straggler_server(cluster)
    if q == 2:
        return two_server_touch_times(k, Fraction(ell), placement)
    cf_ft, lw = optcc_touch_times(q, k, s_star, Fraction(ell), placement)
    ft: Touch = [dict() for _ in range(q)]
    for f in inst_flows:
        for node in (f.src, f.dst):
            if f.piece not in ft[node]:
                ft[node][f.piece] = cf_ft[node][f.piece]
    return ft, lw


def place_batches(A: Arith, lift: Lift, ft: list[dict[int, Any]], lw: list[dict[int, Any]], batch: list[Any],
                  g: int) -> tuple[Any, list[tuple[int, Any, int, str]]]:
    """(D, batches) of the placement (module docstring): the lead D and every NVLink batch as
    (server, start, instance piece, op) in the schedule's order; ft, lw per server {π: instance
    time}, batch[π] the length of π's batch. The one placement every server schedule uses (the
    construction's, and lifts of other instances: optcc_servers._plan)."""
    q = len(ft)
    rs_seq: list[list[tuple[Any, int]]] = []
    D: Any = 0
    for s in range(q):
        t: Any = 0
        seq: list[tuple[Any, int]] = []
        for pi in sorted(ft[s], key=lambda pi: ft[s][pi]):
            seq.append((t, pi))
            D = _max(A, D, lift.lead_need(A, t, batch[pi], ft[s][pi], g))
            t = lift.rs_next(A, t, batch[pi])
        rs_seq.append(seq)
    batches: list[tuple[int, Any, int, str]] = []
    for s in range(q):
        free: Any = 0
        for st, pi in rs_seq[s]:
            batches.append((s, st, pi, lift.rs_op))
            free = st + batch[pi]
        for rel, pi in sorted((lift.time(A, D, lw[s][pi], g), pi) for pi in lw[s]):
            st = lift.ag_start(A, rel, free)
            batches.append((s, st, pi, lift.ag_op))
            free = st + batch[pi]
    return D, batches


def batch_lengths(A: Arith, lift: Lift, inst_sizes: list[Fraction], g: int,
                  s_nv: Fraction) -> tuple[list[Fraction], list[Fraction], list[Fraction]]:
    """(global piece sizes, round lengths, batch lengths) per instance piece."""
    sizes = [lift.size(A, Fraction(x), g) for x in inst_sizes]
    rnd = [lift.round_len(A, x, s_nv) for x in sizes]
    return sizes, rnd, [lift.batch_len(A, g, r) for r in rnd]


def server_flows(cluster: Cluster, k: int, lift: Lift = LIFT, two_server: tuple[Family, ...] = TWO_SERVER_FAMILIES,
                 placement: Placement = PLACEMENT) -> tuple[list[Fraction], list[Flow], Fraction]:
    """(pieces, flows, lead) of optcc_server_allreduce(cluster, k), built from `lift`'s formulas,
    the proved instance families and the instance's first-touch / last-write times in closed
    form, flow by flow in Fractions (the reading prove-all's enumeration and the tests use; the
    generator runs the same formulas on an integer grid: optcc_servers._plan, lift_instance)."""
    from optcc.schedule import Flow
    A = INT
    g = cluster.g
    s_nv = cluster.nvlink_speedup
    got = _instance(cluster, k, two_server)
    inst_sizes: list[Fraction]
    inst_flows: list[Flow]
    if got is None:
        inst_sizes, inst_flows = [Fraction(1)], []
    else:
        inst_sizes, inst_flows = got[0].pieces, got[0].flows
    P = len(inst_sizes)
    ft, lw = instance_touch_times(cluster, k, inst_flows, placement)
    sizes, rnd, batch = batch_lengths(A, lift, inst_sizes, g, s_nv)
    lead, batches = place_batches(A, lift, ft, lw, batch, g)
    D = Fraction(lead)
    flows: list[Flow] = []
    for f in inst_flows:
        start = lift.time(A, D, f.start, g)
        for l in range(g):
            flows.append(Flow(lift.rank(A, g, f.src, l), lift.rank(A, g, f.dst, l), lift.piece(A, P, l, f.piece),
                              f.op, start, f.link, f.rate, f.coef))
    lo, hi = lift.rounds(A, g)
    for s, start, pi, op in batches:
        for t in range(lo, hi + 1):
            st = lift.round_start(A, start, t, rnd[pi])
            for j in range(g):
                src, dst, inst_l = lift.round_flow(A, g, t, j, op)
                flows.append(Flow(lift.rank(A, g, s, src), lift.rank(A, g, s, dst), lift.piece(A, P, inst_l, pi),
                                  op, st, "nvlink"))
    pieces = [x for _ in range(g) for x in sizes]
    return pieces, flows, D
