"""All-size obligations for multi-GPU OptCC with one straggler server (optcc_servers).

Quantified range: q ≥ 1 servers, g ≥ 2 GPUs each, k ≥ 1, real ℓ ≥ 1, straggler server
0 ≤ s < q, real NVLink speed-up s_nv > 0, any instance piece count P ≥ 1, any instance
first-touch and last-write times. The schedule is (optcc.algorithms.servers.families):
g copies of an instance (instance l on GPUs s·g + l, pieces l·P + π, time D + t/g) between
an NVLink reduce-scatter and an all-gather bracket per (server, π), placed in closed form.

The theorem, in four parts, each a set of obligations over the `Lift` formulas:
1. instance (property "instance"): the instance is an AllReduce of its nodes' inputs, for
   every size: q ≥ 3 single-straggler OptCC (verifier.parametric.optcc's obligations, p = q);
   q = 2 the k-segment swap (both servers send segment i at slot i, each adds the other's);
   q = 1 none (the identity).
2. lift (lemmas, well_formed, ports): rank (s, l) ↦ s·g + l and piece (l, π) ↦ l·P + π are
   injective and in range, GPU s·g + l is on server s (so it has server s's ℓ); flows of
   distinct instances share no NIC port and no piece; within one instance, lifted flows share
   a port or piece iff the instance flows do and instance-time order is kept; a lifted flow
   lasts what the timing model says (size/g · max ℓ) and sizes add up to 1. So the instance's
   port exclusivity, causality and chains hold for each lifted copy.
3. brackets (sum, ports, well_formed): each NVLink round is a permutation of the server's g
   GPUs, its flows stay on the server, rounds of a batch do not overlap and lie in the batch;
   reduce-scatter: after rounds 1..t GPU d holds inputs d−t..d (an arc over the server's g
   local indices) of its instance's piece, so after g−1 rounds the server sum, and it writes
   nothing else; all-gather: every GPU d gets instance l's piece exactly from GPU l (round
   (d − l) mod g), copying the full value F, and never writes an instance's own piece.
4. placement (ports, causality): consecutive RS batches of a server do not overlap; the lead D
   makes every RS batch end by the instance's first touch of (s, π) (D + ft/g); every AG batch
   starts at or after its release D + lw/g (the instance's last write lands there) and after
   the previous NVLink batch of the server.
5. closed form, q ≤ 2 (property "finish_q_le_2", and "causality" for the touch times): the
   q = 2 instance's first touch and last landing of segment i are i and i + 1 slots of ℓ/k at
   either server (families.servers.PLACEMENT, attained by flow (i, 1 − s)); then the sorted
   orders are segment order, and the RS starts i·c, the lead max(c, kc − (k−1)N), the AG
   starts and the finish max(ℓ/g + W/k, W) are what the placement computes (one step of the
   batch sequence each, for every segment i); q = 1: finish W. q ≥ 3 (property "causality"):
   the closed forms optcc_first_touch / optcc_last_landing, as (phase, slot), bound every
   instance flow (none touches (v, π) before ft, none lands there after lw), lie in their phase's
   window, where (phase, slot) order is time order; in each case of (v, piece) (the cases cover
   every node) one flow attains each, so they are the min and the max. The q ≥ 3 finish stays
   per instance.
Values of the brackets use verifier.parametric.values over N = g (the server's local inputs);
the straggler bit stands for "plus the other servers' sums" (0 when q = 1), so F = Val(0, g,
[q ≥ 2]). Composing 1-4 (the instance fed the server sums y_s at its first touch returns
Σ y_s, which is every input, since it is linear in its inputs) is argued in docs/parametric.md
"Multi-GPU servers", not machine-checked.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, NamedTuple

import z3

from optcc.algorithms.families import Params
from optcc.algorithms.servers import families as S
from verifier.parametric import values as V
from verifier.parametric.arith import Z3Arith
from verifier.parametric.generic import Gap, GeneratorModel, fresh_index
from verifier.parametric.obligations import Obligation

if TYPE_CHECKING:
    from optcc.algorithms.families import Family, Term
    from verifier.parametric.arith import Z3Term

FOR_ALL = ("all q ≥ 1 servers, g ≥ 2 GPUs per server, k ≥ 1, real ℓ ≥ 1, straggler server 0 ≤ s < q, "
           "NVLink speed-up s_nv > 0 (finish time in closed form: q ≤ 2; q ≥ 3 per instance)")


class ServerParams(NamedTuple):
    q: Any
    g: Any
    k: Any
    ell: Any
    s: Any
    s_nv: Any


class NLArith(Z3Arith):
    """Z3 namespace whose products are real products (the lift's few nonlinear lemmas are
    small; Z3's nonlinear arithmetic proves them directly)."""

    def mul(self, a: Term, b: Term) -> Term:
        return a * b


def params() -> tuple[ServerParams, list[Z3Term]]:
    q, g, k, s = z3.Ints("q g k s")
    ell, s_nv = z3.Reals("ell s_nv")
    return ServerParams(q, g, k, ell, s, s_nv), [q >= 1, g >= 2, k >= 1, ell >= 1, s >= 0, s < q, s_nv > 0]


def _ob(prop: str, name: str, P: tuple[Any, ...], assume: list[Z3Term], goal: Z3Term, A: Z3Arith | None = None,
        premise: Sequence[Z3Term] = ()) -> Obligation:
    side = list(A.side) if A is not None else []
    extra = A.product_lemmas() if A is not None else []
    return Obligation(prop, f"servers: {name}", assume + extra, goal, side, P, [], list(premise))


def _in(x: Term, lo: Term, hi: Term) -> Z3Term:
    return z3.And(x >= lo, x <= hi)


# ---- 2. the lift

def lift_obligations(L: S.Lift) -> list[Obligation]:
    P, base = params()
    q, g = P.q, P.g
    A = NLArith()
    s1, s2, l1, l2, n, pi1, pi2 = z3.Ints("s1 s2 l1 l2 npieces pi1 pi2")
    r1, r2 = L.rank(A, g, s1, l1), L.rank(A, g, s2, l2)
    gpus = [_in(s1, 0, q - 1), _in(s2, 0, q - 1), _in(l1, 0, g - 1), _in(l2, 0, g - 1)]
    out = [_ob("lemmas", "rank (s, l) ↦ s·g + l is injective, in 0..qg−1, and on server s", P,
               base + gpus,
               z3.And(z3.Implies(r1 == r2, z3.And(s1 == s2, l1 == l2)), r1 >= 0, r1 < q * g,
                      r1 >= s1 * g, r1 < s1 * g + g), A)]
    A = NLArith()
    c1, c2 = L.piece(A, n, l1, pi1), L.piece(A, n, l2, pi2)
    pieces = [n >= 1, _in(pi1, 0, n - 1), _in(pi2, 0, n - 1), _in(l1, 0, g - 1), _in(l2, 0, g - 1)]
    out.append(_ob("lemmas", "piece (l, π) ↦ l·P + π is injective and in 0..gP−1", P, base + pieces,
                   z3.And(z3.Implies(c1 == c2, z3.And(l1 == l2, pi1 == pi2)), c1 >= 0, c1 < g * n), A))
    # ports: distinct instances never meet; one instance meets exactly where its instance does
    A = NLArith()
    a1, b1, a2, b2 = z3.Ints("a1 b1 a2 b2")
    nodes = [_in(x, 0, q - 1) for x in (a1, b1, a2, b2)]
    flows = base + nodes + pieces
    out.append(_ob("ports", "flows of distinct instances share no NIC port (send or receive) and no piece", P,
                   flows + [l1 != l2],
                   z3.And(L.rank(A, g, a1, l1) != L.rank(A, g, a2, l2), L.rank(A, g, b1, l1) != L.rank(A, g, b2, l2),
                          L.rank(A, g, a1, l1) != L.rank(A, g, b2, l2), L.piece(A, n, l1, pi1) != L.piece(A, n, l2, pi2)),
                   A))
    A = NLArith()
    out.append(_ob("ports", "one instance: lifted flows share a port or a piece iff the instance flows do", P,
                   flows + [l1 == l2],
                   z3.And((L.rank(A, g, a1, l1) == L.rank(A, g, a2, l2)) == (a1 == a2),
                          (L.rank(A, g, b1, l1) == L.rank(A, g, a2, l2)) == (b1 == a2),
                          (L.piece(A, n, l1, pi1) == L.piece(A, n, l2, pi2)) == (pi1 == pi2)), A))
    A = NLArith()
    D, t1, d1, t2, x, m = z3.Reals("D t1 d1 t2 x m")
    times = [D >= 0, t1 >= 0, d1 > 0, t2 >= 0]
    out.append(_ob("ports", "instance-time order is kept: t1 + d1 ≤ t2 ⇒ lifted flow 1 ends before flow 2 starts",
                   P, base + times + [t1 + d1 <= t2],
                   L.time(A, D, t1, g) + L.dur(A, d1, g) <= L.time(A, D, t2, g), A))
    A = NLArith()
    out.append(_ob("well_formed", "a lifted NIC flow lasts the timing model's size/g · max ℓ and lands at "
                                  "the lift of its instance landing", P,
                   base + times + [x > 0, m >= 1, d1 == x * m],
                   z3.And(L.dur(A, d1, g) == L.size(A, x, g) * m,
                          L.time(A, D, t1 + d1, g) == L.time(A, D, t1, g) + L.dur(A, d1, g),
                          L.time(A, D, t1, g) >= D), A))
    A = NLArith()
    out.append(_ob("well_formed", "lifted piece sizes are positive and the g copies of the instance's add up to 1",
                   P, base + [x > 0],
                   z3.And(L.size(A, x, g) > 0, g * L.size(A, z3.RealVal(1), g) == 1,
                          L.size(A, x, g) * g == x), A))
    return out


# ---- 3. the NVLink brackets

def bracket_obligations(L: S.Lift) -> list[Obligation]:
    P, base = params()
    g, q = P.g, P.q
    t, t1, t2, j, j1, j2, d, l = z3.Ints("t t1 t2 j j1 j2 d l")
    st, rnd, x = z3.Reals("st rnd x")
    out: list[Obligation] = []
    A = Z3Arith()
    lo, hi = L.rounds(A, g)
    rng = [_in(t, lo, hi), _in(j, 0, g - 1)]
    for op, what in ((L.rs_op, "reduce-scatter"), (L.ag_op, "all-gather")):
        A = Z3Arith()
        src, dst, inst = L.round_flow(A, g, t, j, op)
        out.append(_ob("well_formed", f"{what} round t: local src, dst and instance in 0..g−1, src ≠ dst", P,
                       base + rng, z3.And(_in(src, 0, g - 1), _in(dst, 0, g - 1), src != dst, _in(inst, 0, g - 1)), A))
        A = Z3Arith()
        sa, da, _ = L.round_flow(A, g, t, j1, op)
        sb, db, _ = L.round_flow(A, g, t, j2, op)
        out.append(_ob("ports", f"{what} round t is a permutation: one flow per NVLink send and receive port", P,
                       base + [_in(t, lo, hi), _in(j1, 0, g - 1), _in(j2, 0, g - 1)],
                       z3.And(sa != sb, da != db), A, [j1 != j2]))
    A = NLArith()
    sz = L.size(A, x, g)
    r = L.round_len(A, sz, P.s_nv)
    b = L.batch_len(A, g, r)
    rounds = base + [x > 0, st >= 0]
    out.append(_ob("well_formed", "an NVLink round lasts the timing model's size/s_nv and lies inside its batch "
                                  "[st, st + batch]", P, rounds + [_in(t, lo, hi)],
                   z3.And(r == sz / P.s_nv, L.round_start(A, st, t, r) >= st,
                          L.round_start(A, st, t, r) + r <= st + b), A))
    A = NLArith()
    r = L.round_len(A, L.size(A, x, g), P.s_nv)
    out.append(_ob("ports", "rounds of one batch do not overlap (round t1 < t2 ends before t2 starts)", P,
                   rounds + [_in(t1, lo, hi), _in(t2, lo, hi)],
                   L.round_start(A, st, t1, r) + r <= L.round_start(A, st, t2, r), A, [t1 < t2]))
    # reduce-scatter chain: after rounds ≤ t, GPU d holds inputs d−t..d of its instance's piece
    def rs_val(A: Z3Arith, d: Term, t: Term) -> V.Val:
        return V.Val(A.mod(d - t, g, -1, 0), t + 1, 0)
    A = Z3Arith()
    _, _, inst = L.round_flow(A, g, t, j, L.rs_op)
    src, dst, _ = L.round_flow(A, g, t, j, L.rs_op)
    out.append(_ob("causality", "reduce-scatter writes at GPU d only instance d's piece, and reads elsewhere "
                                "(never a value the instance touches)", P, base + rng,
                   z3.And(inst == dst, src != inst), A))
    A = Z3Arith()
    out.append(_ob("sum", "reduce-scatter init: before its first round GPU d holds its own input", P,
                   base + [_in(d, 0, g - 1)], z3.And(*V.well_formed(rs_val(A, d, lo - 1), g),
                                                     V.same(rs_val(A, d, lo - 1), V.unit(d), g)), A))
    A = Z3Arith()
    src, dst, inst = L.round_flow(A, g, t, j, L.rs_op)
    a, old, new = V.unit(src), rs_val(A, dst, t - 1), rs_val(A, dst, t)
    got = V.add(A, a, old, g) if L.rs_op == "add" else a
    ok = V.add_ok(A, a, old, g) if L.rs_op == "add" else z3.BoolVal(True)
    out.append(_ob("sum", "reduce-scatter round t: the receiver's arc grows by the sender's input", P,
                   base + rng, z3.And(*V.well_formed(a, g), *V.well_formed(old, g), ok, *V.well_formed(new, g),
                                      V.same(got, new, g)), A))
    A = Z3Arith()
    fin = rs_val(A, d, hi)
    out.append(_ob("sum", "reduce-scatter final: after the last round GPU d holds the server sum", P,
                   base + [_in(d, 0, g - 1)], z3.And(*V.well_formed(fin, g), V.same(fin, V.full(g, 0), g)), A))
    # all-gather: F is the instance's result (server sum, plus the other servers when q ≥ 2)
    A = Z3Arith()
    F = V.Val(0, g, z3.If(q >= 2, 1, 0))
    src, dst, inst = L.round_flow(A, g, t, j, L.ag_op)
    a = V.ite(inst == src, F, V.unit(src))          # a GPU holds F only of its own instance's piece
    old = V.ite(inst == dst, F, V.unit(dst))
    got = V.add(A, a, old, g) if L.ag_op == "add" else a
    ok = V.add_ok(A, a, old, g) if L.ag_op == "add" else z3.BoolVal(True)
    out.append(_ob("sum", "all-gather round t: the receiver gets F of the sender's instance's piece", P,
                   base + rng, z3.And(ok, inst != dst, *V.well_formed(got, g), V.same(got, F, g)), A))
    A = Z3Arith()
    tw = A.mod(d - l, g, -1, 0)
    ws, wd, wi = L.round_flow(A, g, tw, l, L.ag_op)
    out.append(_ob("sum", "all-gather coverage: GPU d ≠ l gets instance l's piece from GPU l in round (d − l) mod g",
                   P, base + [_in(d, 0, g - 1), _in(l, 0, g - 1), d != l],
                   z3.And(_in(tw, lo, hi), ws == l, wd == d, wi == l), A))
    return out


# ---- 4. placement of the brackets

def placement_obligations(L: S.Lift) -> list[Obligation]:
    P, base = params()
    g = P.g
    st, x, D, ft, lw, free = z3.Reals("st x D ft lw free")
    out: list[Obligation] = []
    A = NLArith()
    b = L.batch_len(A, g, L.round_len(A, L.size(A, x, g), P.s_nv))
    ctx = base + [x > 0, st >= 0, D >= 0, ft >= 0, lw >= 0, free >= 0]
    out.append(_ob("ports", "RS batches of a server run back to back: the next starts when this one ends", P,
                   ctx, L.rs_next(A, st, b) >= st + b, A))
    A = NLArith()
    b = L.batch_len(A, g, L.round_len(A, L.size(A, x, g), P.s_nv))
    out.append(_ob("causality", "the lead makes every RS batch end by the instance's first touch D + ft/g", P,
                   ctx + [D >= L.lead_need(A, st, b, ft, g)], st + b <= L.time(A, D, ft, g), A))
    A = NLArith()
    rel = L.time(A, D, lw, g)
    a = L.ag_start(A, rel, free)
    out.append(_ob("causality", "an AG batch starts after its release D + lw/g (the instance's last write there)",
                   P, ctx, a >= rel, A))
    A = NLArith()
    a = L.ag_start(A, L.time(A, D, lw, g), free)
    out.append(_ob("ports", "an AG batch starts after the server's previous NVLink batch ends", P, ctx, a >= free, A))
    return out


# ---- 5. q ≤ 2: the placement's times and the finish in closed form (families.servers.Placement)

FINISH = "finish_q_le_2"


def _cf_params(q: int) -> tuple[ServerParams, list[Z3Term]]:
    """q fixed; g, k and the index i real (a statement for all reals g ≥ 2 and k = 1 or k ≥ 2 holds
    for every integer), which keeps each query in nonlinear real arithmetic."""
    qv, s = z3.Ints("q s")
    g, k, ell, s_nv = z3.Reals("g k ell s_nv")
    return ServerParams(qv, g, k, ell, s, s_nv), [qv == q, g >= 2, z3.Or(k == 1, k >= 2), ell >= 1, s >= 0,
                                                  s < qv, s_nv > 0]


def two_server_touch_obligations(PL: S.Placement, families: tuple[Family, ...] = S.TWO_SERVER_FAMILIES,
                                 ) -> list[Obligation]:
    """ft(i), lw(i) (slots of ℓ/k) are the first touch and the last landing of segment i at each
    server: no swap flow on (s, i) starts before ft or lands after lw, and flow (i, 1 − s) attains both."""
    C = _swap_model(families)
    P = C.P
    srv = z3.Int("server")
    out: list[Obligation] = []
    for fam in C.families:
        A = Z3Arith()
        idx = fresh_index(fam, "1")
        T = fam.terms(A, P, *idx)
        i = T.piece[0]
        touches = z3.Or(T.src == srv, T.dst == srv)
        goal = z3.And(T.box + T.offset >= PL.first_touch(A, P.k, i),
                      z3.Implies(T.dst == srv, T.box + T.offset + T.dur <= PL.last_write(A, P.k, i)))
        out.append(Obligation("causality", f"servers: q = 2: no {fam.name} flow on (s, i) starts before ft(i) "
                                           "or lands at s after lw(i)", C.assume + fam.domain(A, P, *idx)
                              + [srv >= 0, srv <= 1], goal, list(A.side), P, [(fam, idx)], [touches]))
    fam = C.families[0]
    A = Z3Arith()
    i = z3.Int("i_seg")
    idx = (i, 1 - srv)
    T = fam.terms(A, P, *idx)
    out.append(Obligation("causality", f"servers: q = 2: flow (i, 1 − s) of {fam.name} lands at s on segment i, "
                                       "starting at ft(i) and landing at lw(i)",
                          C.assume + [srv >= 0, srv <= 1, i >= 0, i < P.k],
                          z3.And(*fam.domain(A, P, *idx), T.dst == srv, T.piece[0] == i,
                                 T.box + T.offset == PL.first_touch(A, P.k, i),
                                 T.box + T.offset + T.dur == PL.last_write(A, P.k, i)), list(A.side), P, [(fam, idx)]))
    return out


def two_server_finish_obligations(L: S.Lift, PL: S.Placement) -> list[Obligation]:
    """q = 2, per server (both see the same ft and lw): the sorted orders are segment order, the
    RS starts, the lead and the AG starts the placement computes are PL's closed forms, and the
    last AG batch ends at PL.finish, after every other flow. u = ℓ/k is one segment's instance time."""
    P, base = _cf_params(2)
    g, k, ell, s_nv = P.g, P.k, P.ell, P.s_nv
    i = z3.Real("i")
    u = ell / k
    out: list[Obligation] = []

    def ctx(A: Z3Arith) -> tuple[Term, Term, Term]:
        c = L.batch_len(A, g, L.round_len(A, L.size(A, 1 / k, g), s_nv))
        N = L.dur(A, u, g)
        D = PL.lead(A, k, c, N)
        return c, N, D

    def ft(A: Z3Arith, j: Term) -> Term:
        return PL.first_touch(A, k, j) * u

    def rel(A: Z3Arith, j: Term, D: Term) -> Term:
        return L.time(A, D, PL.last_write(A, k, j) * u, g)

    def ag(A: Z3Arith, j: Term) -> Term:
        c, N, D = ctx(A)
        return PL.ag_start(A, j, k, c, N, D)
    seg = [i >= 0, i <= k - 1]
    step = [i >= 0, i <= k - 2]
    A = NLArith()
    c, N, D = ctx(A)
    out.append(_ob(FINISH, "q = 2: first touches and releases increase with the segment (RS and AG run in "
                           "segment order); a segment's global exchange lasts N = ℓ/(g·k), its batch c > 0",
                   P, base + step, z3.And(ft(A, i) < ft(A, i + 1), rel(A, i, D) < rel(A, i + 1, D),
                                          N == ell / (g * k), c > 0), A))
    A = NLArith()
    c, N, D = ctx(A)
    out.append(_ob(FINISH, "q = 2: RS batch 0 starts at 0 and batch i + 1 where batch i ends (rs_start)", P,
                   base + step, z3.And(PL.rs_start(A, 0, c) == 0,
                                       L.rs_next(A, PL.rs_start(A, i, c), c) == PL.rs_start(A, i + 1, c)), A))
    A = NLArith()
    c, N, D = ctx(A)
    out.append(_ob(FINISH, "q = 2: the lead D meets every RS deadline (D ≥ 0, D ≥ need(i))", P, base + seg,
                   z3.And(D >= 0, D >= L.lead_need(A, PL.rs_start(A, i, c), c, ft(A, i), g)), A))
    A = NLArith()
    c, N, D = ctx(A)
    need = [L.lead_need(A, PL.rs_start(A, j, c), c, ft(A, j), g) for j in (0, k - 1)]
    out.append(_ob(FINISH, "q = 2: the lead D is the least: need(0) = D or need(k − 1) = D", P, base,
                   z3.Or(need[0] == D, need[1] == D), A))
    A = NLArith()
    c, N, D = ctx(A)
    free0 = PL.rs_start(A, k - 1, c) + c
    out.append(_ob(FINISH, "q = 2: AG batch 0 starts at max(release, end of the RS block) (ag_start)", P, base,
                   ag(A, 0) == L.ag_start(A, rel(A, 0, D), free0), A))
    A = NLArith()
    c, N, D = ctx(A)
    out.append(_ob(FINISH, "q = 2: AG batch i + 1 starts at max(its release, end of AG batch i) (ag_start)", P,
                   base + step, ag(A, i + 1) == L.ag_start(A, rel(A, i + 1, D), ag(A, i) + c), A))
    A = NLArith()
    c, N, D = ctx(A)
    T = PL.finish(A, g, k, ell, s_nv)
    lo, hi = L.rounds(A, g)
    r = L.round_len(A, L.size(A, 1 / k, g), s_nv)
    out.append(_ob(FINISH, "q = 2: the last AG batch's last round ends at the finish T", P, base,
                   z3.And(L.round_start(A, ag(A, k - 1), hi, r) + r == ag(A, k - 1) + c, ag(A, k - 1) + c == T), A))
    A = NLArith()
    c, N, D = ctx(A)
    T = PL.finish(A, g, k, ell, s_nv)
    out.append(_ob(FINISH, "q = 2: every RS and AG batch ends by T, and so does every NIC flow (instance end ℓ)",
                   P, base + seg, z3.And(PL.rs_start(A, i, c) + c <= T, ag(A, i) + c <= T,
                                         L.time(A, D, k * u, g) <= T), A))
    return out


def one_server_finish_obligations(L: S.Lift, PL: S.Placement) -> list[Obligation]:
    """q = 1 (one piece, ft = lw = 0): the RS batch at 0, the lead, the AG batch, and the finish."""
    P, base = _cf_params(1)
    g, s_nv = P.g, P.s_nv
    A = NLArith()
    b = L.batch_len(A, g, L.round_len(A, L.size(A, z3.RealVal(1), g), s_nv))
    need = L.lead_need(A, z3.RealVal(0), b, z3.RealVal(0), g)
    D = z3.If(need >= 0, need, 0)
    st = L.ag_start(A, L.time(A, D, z3.RealVal(0), g), L.rs_next(A, z3.RealVal(0), b))
    T = PL.finish_one(A, g, s_nv)
    return [_ob(FINISH, "q = 1: RS at 0, AG after it; the AG batch ends at the finish T, after the RS batch", P,
                base, z3.And(st + b == T, b <= T, b > 0), A)]


def _lex_ge(a: Sequence[Term], b: Sequence[Term]) -> Z3Term:
    return z3.Or(a[0] > b[0], z3.And(a[0] == b[0], a[1] >= b[1]))


# Slots between the piece's first touch at a node and the first flow of a later family that
# leaves that node with it, where both fall in one phase (derived: read off the flows on p = 3–9,
# k = 1–4 and seven ℓ; proved for every p, k, ℓ and attained, so one slot more is refuted): the
# upload follows the last reduce-scatter hop, the download S's upload, the all-gather hop the
# download, the P2P download the P2P uploads of every healthy node. The reduce-scatter hops and the
# P2P upload make the first touch (0); the epilogue's flows always fall in a later phase.
FIRST_TOUCH_MARGINS: dict[str, Gap] = {
    "optcc.upload": Gap.const(1), "optcc.download": Gap.const(2),
    "optcc.ag_hop": Gap.const(5), "optcc.p2p_download": Gap("2p", lambda P: 2 * P.p)}
LATER_PHASE = frozenset({"optcc.epilogue_ag"})      # its flows leave a node a phase after the first touch


def optcc_touch_obligations(PL: S.Placement) -> list[Obligation]:
    """q ≥ 3: no instance flow touches node v on a piece before first(v, piece), none lands at v
    after last(v, piece), both (phase, slot) lie in their phase's window, and (phase, slot)
    order there is time order; so the RS deadline D + ft/g and the AG release D + lw/g are safe."""
    from optcc.algorithms.single import families as F
    from verifier.parametric import optcc as O
    first, last = PL.optcc_first, PL.optcc_last
    C = O.generator_model()
    P = C.P
    out: list[Obligation] = []
    for fam in C.families:
        for end in ("src", "dst"):
            A = Z3Arith()
            idx = fresh_index(fam, "1")
            T = fam.terms(A, P, *idx)
            v = getattr(T, end)
            ft_phase, ft_slot = first(A, P, v, T.piece)
            margin = FIRST_TOUCH_MARGINS.get(fam.name) if end == "src" else None
            if end == "src" and fam.name in LATER_PHASE:
                goal, what = T.phase >= ft_phase + 1, "starts in ft's phase or before"
            elif margin is not None:
                goal = _lex_ge((T.phase, T.box + T.offset), (ft_phase, ft_slot + margin.slots(P)))
                what = f"starts before ft + {margin.text} (in ft's phase)"
            else:
                goal, what = _lex_ge((T.phase, T.box + T.offset), (ft_phase, ft_slot)), "starts before ft"
            if end == "dst":
                goal = z3.And(goal, _lex_ge(last(A, P, v, T.piece), (T.phase, T.box + T.offset + T.dur)))
                what += " or lands after lw"
            out.append(Obligation("causality", f"servers: q ≥ 3: no {fam.name} flow at its {end} {what}",
                                  C.assume + fam.domain(A, P, *idx) + A.product_lemmas(), goal, list(A.side),
                                  P, [(fam, idx)]))
    H = P.p - 1
    v, sg, o = z3.Ints("v_node sigma_key o_key")
    for key, ok in (((sg, o), [sg >= 0, sg < P.k, o >= 0, o < H]), ((sg,), [P.ell < 2, sg >= 0, sg <= P.k - 2])):
        A = Z3Arith()
        pts = [first(A, P, v, key), last(A, P, v, key)]

        def window(pt: Sequence[Term]) -> Z3Term:
            lim = z3.If(pt[0] == 1, O._pipeline_len(A, P), z3.ToReal(H - 1))
            return z3.And(pt[0] >= 0, pt[0] <= 2, pt[1] >= 0, pt[1] <= lim)
        goal = z3.And(*[window(pt) for pt in pts])          # before product_lemmas: it builds products
        out.append(Obligation("causality", f"servers: q ≥ 3: ft and lw of a piece {'(σ, o)' if len(key) == 2 else '(σ,)'} "
                                           "lie in their phase's window", C.assume + ok + [v >= 0, v <= H]
                              + A.product_lemmas(), goal, list(A.side), P))
    ph1, ph2 = z3.Ints("ph1 ph2")
    s1, s2 = z3.Reals("slot1 slot2")
    A = Z3Arith()
    (o0, o1, o2), units = F.phase_clock(A, P)
    L_ = F.pipeline_slots(A, P)                           # the pipeline length the origins use

    def t(ph: Term, sl: Term) -> Z3Term:
        return z3.If(ph == 0, o0 + sl * units[0], z3.If(ph == 1, o1 + sl * units[1], o2 + sl * units[2]))

    def win(ph: Term, sl: Term) -> Z3Term:
        return z3.And(ph >= 0, ph <= 2, sl >= 0, sl <= z3.If(ph == 1, L_, z3.ToReal(H - 1)))
    out.append(Obligation("causality", "servers: q ≥ 3: in the phase windows, (phase, slot) order is time order",
                          C.assume + [win(ph1, s1), win(ph2, s2)] + A.product_lemmas(),
                          z3.Implies(_lex_ge((ph1, s1), (ph2, s2)), t(ph1, s1) >= t(ph2, s2)), list(A.side), P))
    return out


def optcc_touch_witnesses(PL: S.Placement) -> list[Obligation]:
    """q ≥ 3: in every case of (v, piece) one instance flow attains ft (starts there, touching v)
    and one attains lw (lands at v there), so with optcc_touch_obligations they are the min and max."""
    from optcc.algorithms.single import families as F
    from verifier.parametric import optcc as O
    C = O.generator_model()
    P = C.P
    H = P.p - 1
    v, sg, o = z3.Ints("v_node sigma_key o_key")
    shard = [sg >= 0, sg < P.k, o >= 0, o < H]
    p2p = [P.ell < 2, sg >= 0, sg <= P.k - 2]

    def x(A: Z3Arith) -> Term:
        return A.mod(v - o - 1, H, -1, 0)
    cases: list[tuple[str, Callable[[Z3Arith], list[Z3Term]], Family, Callable[[Z3Arith], tuple[Term, ...]], str, str,
                      tuple[Z3Term, ...]]] = [   # (what, conditions, family, index, end touching v, "first" | "last", key)
        ("S, shard: its upload", lambda A: [v == H], F.UP, lambda A: (sg, o), "dst", "first", (sg, o)),
        ("healthy, σ = 0, x = 0: prologue step 0 from v", lambda A: [v < H, v >= 0, sg == 0, x(A) == 0], F.PRO,
         lambda A: (0, v), "src", "first", (sg, o)),
        ("healthy, σ = 0, x ≥ 1: prologue step x − 1 into v", lambda A: [v < H, v >= 0, sg == 0, x(A) >= 1], F.PRO,
         lambda A: (x(A) - 1, A.mod(v - 1, H, -1, 0)), "dst", "first", (sg, o)),
        ("healthy, σ ≥ 1, x = 0: RS hop 1 from v", lambda A: [v < H, v >= 0, sg >= 1, x(A) == 0], F.RS,
         lambda A: (sg, o, 1), "src", "first", (sg, o)),
        ("healthy, σ ≥ 1, x ≥ 1: RS hop x into v", lambda A: [v < H, v >= 0, sg >= 1, x(A) >= 1], F.RS,
         lambda A: (sg, o, x(A)), "dst", "first", (sg, o)),
        ("S, shard: its upload lands", lambda A: [v == H], F.UP, lambda A: (sg, o), "dst", "last", (sg, o)),
        ("owner v = o: its download lands", lambda A: [v == o], F.DOWN, lambda A: (sg, o), "dst", "last", (sg, o)),
        ("healthy v ≠ o, σ ≤ k − 2: AG hop x lands", lambda A: [v < H, v >= 0, v != o, sg <= P.k - 2], F.AG,
         lambda A: (sg, o, x(A)), "dst", "last", (sg, o)),
        ("healthy v ≠ o, σ = k − 1: epilogue step x lands", lambda A: [v < H, v >= 0, v != o, sg == P.k - 1], F.EPI,
         lambda A: (x(A), A.mod(o + x(A), H, 0, 1)), "dst", "last", (sg, o)),
        ("S, P2P: o = H − 1's upload", lambda A: [v == H], F.P2P_UP, lambda A: (sg, H - 1), "dst", "first", (sg,)),
        ("healthy, P2P: its upload", lambda A: [v < H, v >= 0], F.P2P_UP, lambda A: (sg, v), "src", "first", (sg,)),
        ("S, P2P: o = 0's upload lands", lambda A: [v == H], F.P2P_UP, lambda A: (sg, 0), "dst", "last", (sg,)),
        ("healthy, P2P: its download lands", lambda A: [v < H, v >= 0], F.P2P_DOWN, lambda A: (sg, v), "dst",
         "last", (sg,)),
    ]
    out: list[Obligation] = []
    for what, cond, fam, idx, end, which, key in cases:
        A = Z3Arith()
        i = idx(A)
        T = fam.terms(A, P, *i)
        at = (T.phase, T.box + T.offset + (T.dur if which == "last" else 0))
        want = (PL.optcc_first if which == "first" else PL.optcc_last)(A, P, v, key)
        goal = z3.And(*fam.domain(A, P, *i), getattr(T, end) == v, *[a == b for a, b in zip(T.piece, key)],
                      at[0] == want[0], at[1] == want[1])
        conds = cond(A) + (shard if len(key) == 2 else p2p)
        out.append(Obligation("causality", f"servers: q ≥ 3: {which} touch attained: {what}",
                              C.assume + conds + A.product_lemmas(), goal, list(A.side), P, [(fam, i)]))
    for klen, rng in ((2, shard), (1, p2p)):
        for which in ("first", "last"):
            A = Z3Arith()
            cover = z3.Or(*[z3.And(*c[1](A)) for c in cases if c[5] == which and len(c[6]) == klen])
            out.append(Obligation("causality", f"servers: q ≥ 3: the {which}-touch cases of a "
                                               f"{'(σ, o)' if klen == 2 else '(σ,)'} piece cover every node",
                                  C.assume + rng + [v >= 0, v <= H], cover, list(A.side), P))
    return out


def finish_obligations(L: S.Lift, PL: S.Placement, two_server: tuple[Family, ...] = S.TWO_SERVER_FAMILIES,
                       ) -> list[Obligation]:
    return (optcc_touch_obligations(PL) + optcc_touch_witnesses(PL) + two_server_touch_obligations(PL, two_server)
            + two_server_finish_obligations(L, PL) + one_server_finish_obligations(L, PL))


# ---- 1. the instance

def _swap_model(families: Sequence[Family]) -> GeneratorModel:
    k, s = z3.Ints("k s")
    ell = z3.Real("ell")
    P = Params(2, k, ell, s)
    return GeneratorModel("servers.swap", P, [k >= 1, ell >= 1, s >= 0, s <= 1], tuple(families), lambda P: 2,
                          lambda A, P, key: z3.And(len(key) == 1, key[0] >= 0, key[0] < P.k))


def two_server_obligations(families: tuple[Family, ...] = S.TWO_SERVER_FAMILIES) -> list[Obligation]:
    from verifier.parametric import generic as G
    C = _swap_model(families)
    P = C.P
    obs = G.well_formed(C) + G.ports(C)
    for fam in C.families:
        A = Z3Arith()
        idx = fresh_index(fam, "1")
        T = fam.terms(A, P, *idx)
        a, old = V.unit(T.src), V.unit(T.dst)
        got = V.add(A, a, old, 2) if fam.op == "add" else a
        ok = V.add_ok(A, a, old, 2) if fam.op == "add" else z3.BoolVal(True)
        obs.append(Obligation("sum", f"{fam.name}: the receiver adds the sender's input to its own (both read "
                                     "their inputs at the segment's start)", C.assume + fam.domain(A, P, *idx),
                              z3.And(ok, V.same(got, V.full(2, 0), 2)), list(A.side), P, [(fam, idx)]))
        obs.append(Obligation("finish", f"{fam.name} ends by slot k (time ℓ)", C.assume + fam.domain(A, P, *idx),
                              T.box + T.offset + T.dur <= P.k, list(A.side), P, [(fam, idx)]))
    for f1 in C.families:
        for f2 in C.families:
            A = Z3Arith()
            i1, i2 = fresh_index(f1, "1"), fresh_index(f2, "2")
            T1, T2 = f1.terms(A, P, *i1), f2.terms(A, P, *i2)
            same_piece = z3.And(*[u == v for u, v in zip(T1.piece, T2.piece)]) if len(T1.piece) == len(T2.piece) \
                else z3.BoolVal(False)
            distinct = z3.BoolVal(True) if f1 is not f2 else z3.Or(*[u != v for u, v in zip(i1, i2)])
            obs.append(Obligation(
                "causality", f"{f1.name} vs {f2.name}: two flows of one piece are the exchange (one slot, "
                             "opposite directions), so each reads its sender's input before any landing",
                C.assume + f1.domain(A, P, *i1) + f2.domain(A, P, *i2),
                z3.And(T1.box == T2.box, T1.offset == T2.offset, T1.dur > 0, T1.src == T2.dst, T1.dst == T2.src),
                list(A.side), P, [(f1, i1), (f2, i2)], [same_piece, distinct]))
    return [replace(ob, prop="instance", name="q = 2 swap: " + ob.prop + ": " + ob.name) for ob in obs]


def optcc_instance_obligations() -> list[Obligation]:
    from verifier.parametric import lemmas
    from verifier.parametric import optcc as O
    obs = lemmas.product_lemmas() + [lemmas.box_lemma()] + lemmas.arc_lemmas() + O.obligations()
    return [replace(ob, prop="instance", name="q ≥ 3 OptCC (p = q): " + ob.prop + ": " + ob.name) for ob in obs]


def obligations(lift: S.Lift | None = None, two_server: tuple[Family, ...] | None = None,
                placement: S.Placement | None = None) -> list[Obligation]:
    L = lift or S.LIFT
    two = two_server or S.TWO_SERVER_FAMILIES
    from verifier.parametric import lemmas
    return (lemmas.arc_lemmas() + lift_obligations(L) + bracket_obligations(L) + placement_obligations(L)
            + finish_obligations(L, placement or S.PLACEMENT, two)
            + two_server_obligations(two) + optcc_instance_obligations())
