"""All-size obligations for single-straggler OptCC (optcc.algorithms.single.families), p ≥ 3.

Quantified range: p ≥ 3, k ≥ 1, real ℓ ≥ 1, straggler rank 0 ≤ s < p (ℓ = 1: rank s plays
S). p = 2 is a different schedule (one exchange) and stays with the per-instance verifier.
Nodes 0..H−1 are the healthy ring positions, node H is S; rank(h) = h + [h ≥ s], rank(H) = s.

Sum invariant, shard piece (σ, c) (chain of 2H flows: H−1 reduce-scatter hops from node c+1+j,
the upload c → S, the download S → c, H−1 all-gather hops from node c+j−H−1), with
x = (v − c − 1) mod H and e = (v − c) mod H: S holds its own input until the upload lands
(j ≥ H), then the full sum; healthy v holds the full sum if j ≥ H+1 and e ≤ j − H − 1, else
inputs c+1..c+1+x if x ≤ j, else its own input. P2P piece σ (ℓ < 2): uploads from
o = H−1, H−2, .., 0 then downloads to o = H−1, .., 0; S holds inputs H−j..H−1 plus its own
after j uploads; healthy v holds the full sum once j ≥ 2H − v.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import z3

from optcc.algorithms.families import Params
from optcc.algorithms.single import families as F
from verifier.parametric import values as V
from verifier.parametric.arith import Z3Arith, Z3RealArith
from verifier.parametric import generic as G
from verifier.parametric.generic import Chain, Gap, GeneratorModel, Segment, fresh_index
from verifier.parametric.obligations import Obligation

if TYPE_CHECKING:
    from optcc.algorithms.families import Arith, Family, Term
    from verifier.parametric.arith import Z3Term

Witness = tuple[Callable[[Params], list["Z3Term"]], "Family", Callable[[Params], tuple["Term", ...]]]
# (case assumptions, family, index): a flow that ends exactly at the limit in that case

FOR_ALL = "all p ≥ 3, k ≥ 1, real ℓ ≥ 1, straggler rank 0 ≤ s < p (p = 2: per instance)"


def params() -> tuple[Params, list[Z3Term]]:
    p, k, s = z3.Ints("p k s")
    ell = z3.Real("ell")
    return Params(p, k, ell, s), [p >= 3, k >= 1, ell >= 1, s >= 0, s < p]


def _piece_ok(A: Arith, P: Params, key: tuple[Term, ...]) -> Z3Term:
    H = P.p - 1
    if len(key) == 2:
        return z3.And(key[0] >= 0, key[0] < P.k, key[1] >= 0, key[1] < H)
    return z3.And(key[0] >= 0, key[0] <= P.k - 2, P.ell < 2)


def generator_model(families: tuple[Family, ...] = F.FAMILIES) -> GeneratorModel:
    P, assume = params()
    f = _by_role(families)
    shared = frozenset({(f["up"].name, f["p2p_up"].name), (f["down"].name, f["p2p_down"].name)})
    gaps = {(f[a].name, f[b].name, what): Gap.const(g) for (a, b, what), g in PAIR_GAPS.items()}
    return GeneratorModel("optcc", P, assume, tuple(families), lambda P: P.p, _piece_ok, shared, gaps)


ROLES = ("pro", "rs", "up", "down", "p2p_up", "p2p_down", "ag", "epi")     # the families, in order


def _by_role(families: tuple[Family, ...]) -> dict[str, Family]:
    return dict(zip(ROLES, families))


# Chain flows j1 < j2 of one piece that never meet back to back: the least gap, pipeline slots
# (derived as PAIR_GAPS below, attained within p ≤ 8, k ≤ 3): consecutive hops 1, a reduce-scatter
# hop and its piece's download 2, its all-gather hop 4, the upload and the all-gather hop 2, the
# P2P upload and download 2.
ORDER_GAPS: dict[tuple[str, str], int] = {
    ("rs", "rs"): 1, ("ag", "ag"): 1, ("rs", "down"): 2, ("rs", "ag"): 4, ("up", "ag"): 2, ("p2p_up", "p2p_down"): 2}


def _order_gaps(families: tuple[Family, ...]) -> dict[tuple[str, str], Gap]:
    f = _by_role(families)
    return {(f[a].name, f[b].name): Gap.const(g) for (a, b), g in ORDER_GAPS.items()}


# Pipeline slots between two flows of a pair that never meets back to back (derived: the least
# gap read off the flows on p = 3–10, k = 1–4 and seven ℓ, attained within p ≤ 8, k ≤ 3; proved for
# every p, k, ℓ by the obligations, tight: one slot more is refuted). Keys: (first family, second
# family, relation) by role; "read during a write": the first writes what the second reads.
PAIR_GAPS: dict[tuple[str, str, str], int] = {
    ("rs", "ag", "read during a write"): 4,       # the piece goes up to S and down in between
    ("ag", "rs", "read during a write"): 6,       # the all-gather writes what a later segment's hop reads
    ("rs", "ag", "two writes at once"): 8, ("ag", "rs", "two writes at once"): 8,
    ("rs", "down", "two writes at once"): 2, ("down", "rs", "two writes at once"): 2,
    ("rs", "rs", "read during a write"): 1, ("ag", "ag", "read during a write"): 1,
    ("p2p_up", "p2p_down", "read during a write"): 2, ("p2p_down", "p2p_up", "read during a write"): 4,
    ("rs", "rs", "one send port"): 1, ("ag", "ag", "one send port"): 1,
    ("up", "up", "one send port"): 2, ("p2p_up", "p2p_up", "one send port"): 2,
    ("rs", "rs", "one receive port"): 1, ("ag", "ag", "one receive port"): 1,
    ("down", "down", "one receive port"): 2, ("p2p_down", "p2p_down", "one receive port"): 2,
}


def _shard_value(A: Arith, P: Params, key: tuple[Term, Term], v: Term, j: Term) -> V.Val:
    sigma, c = key
    H = P.p - 1
    full = V.full(H, 1)
    h = z3.If(v == H, 0, v)                 # the healthy branch only matters for v < H
    x = A.mod(h - c - 1, H, -1, 0)
    e = A.mod(h - c, H, -1, 0)
    partial = V.ite(x <= j, V.Val(A.mod(c + 1, H, 0, 1), x + 1, 0), V.unit(v))
    healthy = V.ite(z3.And(j >= H + 1, e <= j - H - 1), full, partial)
    return V.ite(v == H, V.ite(j >= H, full, V.Val(0, 0, 1)), healthy)


def _p2p_value(A: Arith, P: Params, key: tuple[Term], v: Term, j: Term) -> V.Val:
    H = P.p - 1
    full = V.full(H, 1)
    s_val = V.ite(j >= H, full, V.Val(z3.If(j == 0, 0, H - j), j, 1))
    return V.ite(v == H, s_val, V.ite(j >= 2 * H - v, full, V.unit(v)))


def _init(P: Params, v: Term) -> V.Val:
    return V.ite(v == P.p - 1, V.Val(0, 0, 1), V.unit(v))


def shard_chain(families: tuple[Family, ...] = F.FAMILIES) -> Chain:
    pro, rs, up, down, _, _, ag, epi = families
    sigma, c = z3.Ints("sigma_piece c_piece")

    def H(P: Params) -> Term:
        return P.p - 1

    def pos(fam: Family, A: Arith, P: Params, idx: tuple[Term, ...]) -> Term:
        if fam is pro:
            return idx[0]
        if fam is rs:
            return idx[2] - 1
        if fam is ag:
            return H(P) + 1 + idx[2]
        if fam is epi:
            return H(P) + 1 + idx[0]
        return H(P) - 1 if fam is up else H(P)
    segs = [
        Segment(pro, lambda P, key: 0, lambda P, key: z3.If(key[0] == 0, H(P) - 2, -1),
                lambda A, P, key, j: (j, A.mod(key[1] + j + 1, H(P), 0, 1))),
        Segment(rs, lambda P, key: 0, lambda P, key: z3.If(key[0] >= 1, H(P) - 2, -1),
                lambda A, P, key, j: (key[0], key[1], j + 1)),
        Segment(up, lambda P, key: H(P) - 1, lambda P, key: H(P) - 1, lambda A, P, key, j: key),
        Segment(down, lambda P, key: H(P), lambda P, key: H(P), lambda A, P, key, j: key),
        Segment(ag, lambda P, key: H(P) + 1, lambda P, key: z3.If(key[0] <= P.k - 2, 2 * H(P) - 1, H(P)),
                lambda A, P, key, j: (key[0], key[1], j - H(P) - 1)),
        Segment(epi, lambda P, key: H(P) + 1, lambda P, key: z3.If(key[0] == P.k - 1, 2 * H(P) - 1, H(P)),
                lambda A, P, key, j: (j - H(P) - 1, A.mod(key[1] + j - H(P) - 1, H(P), 0, 1))),
    ]
    return Chain("optcc shard piece (σ, c)", (sigma, c), _piece_ok, H, lambda P: 2 * H(P), segs, pos,
                 _shard_value, _init, lambda P: V.full(H(P), 1), _order_gaps(families))


def p2p_chain(families: tuple[Family, ...] = F.FAMILIES) -> Chain:
    p2p_up, p2p_down = families[4], families[5]
    sigma = z3.Int("sigma_p2p")

    def H(P: Params) -> Term:
        return P.p - 1

    def pos(fam: Family, A: Arith, P: Params, idx: tuple[Term, ...]) -> Term:
        return (H(P) - 1 - idx[1]) if fam is p2p_up else (2 * H(P) - 1 - idx[1])
    segs = [Segment(p2p_up, lambda P, key: 0, lambda P, key: H(P) - 1,
                    lambda A, P, key, j: (key[0], H(P) - 1 - j)),
            Segment(p2p_down, lambda P, key: H(P), lambda P, key: 2 * H(P) - 1,
                    lambda A, P, key, j: (key[0], 2 * H(P) - 1 - j))]
    return Chain("optcc P2P piece (σ,)", (sigma,), _piece_ok, H, lambda P: 2 * H(P), segs, pos,
                 _p2p_value, _init, lambda P: V.full(H(P), 1), _order_gaps(families))


def _real(P: Params) -> tuple[Z3Term, Z3Term, Z3Term]:
    H, k, ell = z3.ToReal(P.p - 1), z3.ToReal(P.k), P.ell
    return H, k, ell


def closed_form(H: Term, k: Term, ell: Term) -> Z3Term:
    """optcc_slot_time's closed form (derived, optcc_single docstring), for Z3 terms."""
    return z3.If(ell >= 2, (2 * (H - 1) + (H * k + 1) * ell) / (k * H),
                 z3.If(k == 1, (4 * H - 2 + ell) / H, (2 * H * k + 2 * H) / (k * H + (k - 1) * (2 / ell - 1))))


def _ends_by(C: GeneratorModel, fams: Sequence[Family], limit: Callable[[Arith, Params], Term], name: str,
             witnesses: Sequence[Witness]) -> list[Obligation]:
    P = C.P
    out: list[Obligation] = []
    for fam in fams:
        A = Z3Arith()
        idx = fresh_index(fam, "1")
        T = fam.terms(A, P, *idx)
        goal = T.box + T.offset + T.dur <= limit(A, P)
        out.append(Obligation("finish", f"{fam.name} ends by {name}",
                              C.assume + fam.domain(A, P, *idx) + A.product_lemmas(),
                              goal, list(A.side), P, [(fam, idx)]))
    for case, fam, at in witnesses:
        A = Z3Arith()
        T = fam.terms(A, P, *at(P))
        goal = z3.And(*fam.domain(A, P, *at(P)), T.box + T.offset + T.dur == limit(A, P))
        out.append(Obligation("finish", f"{fam.name} {at.__doc__} ends at {name}",
                              C.assume + case(P) + A.product_lemmas(), goal, list(A.side), P,
                              [(fam, at(P))]))
    return out


def _pipeline_len(A: Arith, P: Params) -> Term:
    """L in pipeline slots: the families' pipeline_slots, in A (products shared with the boxes')."""
    return F.pipeline_slots(A, P)


# The pipeline families that end before L, each by its own margin (derived: read off their last
# flows on p = 4–8, k = 1–3 and seven ℓ, proved for every p, k, ℓ by the obligation itself, and
# tight: some flow ends exactly there, so its one-step-stronger control is refuted). For ℓ ≥ 2 a
# healthy hop lasts 2/ℓ of a pipeline slot, hence the 2/ℓ terms; the all-gather's last hop
# depends on p's parity.
def _rs_margin(A: Arith, P: Params) -> Term:
    return A.ite(P.ell >= 2, 5 - 2 / P.ell, A.real(4))


def _upload_margin(A: Arith, P: Params) -> Term:
    return A.ite(P.ell >= 2, A.real(2), A.ite(P.k >= 2, 4 - P.ell, A.real(2)))


def _p2p_upload_margin(A: Arith, P: Params) -> Term:
    return A.real(2 * P.p)


def _ag_margin(A: Arith, P: Params) -> Term:
    return A.ite(P.p % 2 == 0, A.real(3), A.real(1)) + A.ite(P.ell >= 2, 1 - 2 / P.ell, A.real(0))


PIPELINE_MARGINS: dict[str, tuple[str, Callable[[Arith, Params], Term]]] = {
    "optcc.rs_hop": ("(5 − 2/ℓ if ℓ ≥ 2, else 4)", _rs_margin),
    "optcc.upload": ("(2 if ℓ ≥ 2 or k = 1, else 4 − ℓ)", _upload_margin),
    "optcc.p2p_upload": ("2p", _p2p_upload_margin),
    "optcc.ag_hop": ("((3 if p is even, else 1) + (1 − 2/ℓ if ℓ ≥ 2))", _ag_margin),
}


def _before_l(margin: Callable[[Arith, Params], Term]) -> Callable[[Arith, Params], Term]:
    def limit(A: Arith, P: Params) -> Term:
        return _pipeline_len(A, P) - margin(A, P)
    return limit


def finish(C: GeneratorModel) -> list[Obligation]:
    pro, rs, up, down, p2p_up, p2p_down, ag, epi = C.families

    def last_step(P: Params) -> tuple[Term, ...]:
        """(t = H−2, i = 0)"""
        return (P.p - 3, 0)

    def last_down(P: Params) -> tuple[Term, ...]:
        """(σ = k−1, o = 0)"""
        return (P.k - 1, 0)

    def last_p2p(P: Params) -> tuple[Term, ...]:
        """(σ = k−2, o = 0)"""
        return (P.k - 2, 0)
    out = _ends_by(C, [pro], lambda A, P: P.p - 2, "prologue slot H−1", [(lambda P: [], pro, last_step)])
    out += _ends_by(C, [down, p2p_down], _pipeline_len, "pipeline slot L",
                    [(lambda P: [z3.Or(P.ell >= 2, P.k == 1)], down, last_down),
                     (lambda P: [P.ell < 2, P.k >= 2], p2p_down, last_p2p)])
    for fam in (rs, up, p2p_up, ag):
        text, margin = PIPELINE_MARGINS[fam.name]
        out += _ends_by(C, [fam], _before_l(margin), f"pipeline slot L − {text}", [])
    out += _ends_by(C, [epi], lambda A, P: P.p - 2, "epilogue slot H−1", [(lambda P: [], epi, last_step)])
    H, k, ell = _real(C.P)
    d, x = sizes(C.P)
    out.append(phase_lemma(C))
    out.append(Obligation("well_formed", "piece sizes are positive and add up to 1", C.assume,
                          z3.And(d > 0, z3.Implies(ell < 2, x > 0), k * H * d + (k - 1) * x == 1), [], C.P))
    out += G.durations(C, lambda A, P: F.phase_clock(A, P)[1], F.piece_size, F.rate)
    return out


def bound(C: GeneratorModel) -> list[Obligation]:
    H, k, ell = _real(C.P)
    T = closed_form(H, k, ell)
    return [Obligation("bound", "closed form ≥ max(ℓ, 2ℓ(p−1)/(ℓ(p−1)+1)) (Theorem 1)", C.assume,
                       z3.And(T >= ell, T >= 2 * ell * H / (ell * H + 1)), [], C.P)]


def rank_of(A: Arith, n: Term, H: Term, s: Term) -> Term:
    """Node ↦ rank (node H is the straggler S): the families' node_rank."""
    return F.node_rank(A, Params(H + 1, None, None, s), n)


def piece_of(P: Params, key: tuple[Term, ...]) -> Term:
    """Piece key ↦ schedule index: the families' piece_index, as Z3 terms."""
    return F.piece_index(Z3Arith(), P, key)


def sizes(P: Params) -> tuple[Term, Term]:
    """(shard size δ, P2P piece size x): the families' terms, as Z3 terms."""
    A = Z3Arith()
    return F.shard_size(A, P), F.p2p_size(A, P)


def spans(P: Params) -> dict[str, list[tuple[Any, Any]]]:
    """Index ranges (inclusive) the instance check enumerates, per family name; `span_lemmas`
    proves every domain point lies inside them, so enumerating them misses no flow."""
    H, k = P.p - 1, P.k
    ring = [(0, H - 2), (0, H - 1)]
    job = [(0, k - 1), (0, H - 1)]
    return {"optcc.prologue_rs": ring, "optcc.epilogue_ag": ring,
            "optcc.rs_hop": job + [(1, H - 1)], "optcc.ag_hop": job + [(0, H - 2)],
            "optcc.upload": job, "optcc.download": job, "optcc.p2p_upload": job, "optcc.p2p_download": job}


def span_lemmas(C: GeneratorModel) -> list[Obligation]:
    out: list[Obligation] = []
    sp = spans(C.P)
    for fam in C.families:
        A = Z3Arith()
        idx = fresh_index(fam, "1")
        rng = sp.get(fam.name)
        goal = z3.BoolVal(False) if rng is None else z3.And(
            *[z3.And(i >= lo, i <= hi) for i, (lo, hi) in zip(idx, rng)])
        out.append(Obligation("well_formed", f"{fam.name}: every domain point lies in the enumerated span",
                              C.assume + fam.domain(A, C.P, *idx) + A.product_lemmas(), goal,
                              list(A.side), C.P, [(fam, idx)]))
    return out


def phase_lemma(C: GeneratorModel) -> Obligation:
    """Phases follow one another in time (each starts when the previous one's last slot ends, the
    limits `finish` proves), their slots are positive, and the last ends at the closed form."""
    P = C.P
    H, k, ell = _real(P)
    A = Z3RealArith()
    (o0, o1, o2), (u0, u1, u2) = F.phase_clock(A, P)
    L = F.pipeline_slots(A, P)
    return Obligation("finish", "phase origins: prologue, pipeline, epilogue back to back; end = closed form",
                      C.assume,
                      z3.And(u0 > 0, u1 > 0, u2 > 0, o0 == 0, o1 == o0 + (H - 1) * u0,
                             o2 == o1 + L * u1, o2 + (H - 1) * u2 == closed_form(H, k, ell)), [], P)


def rank_lemma() -> Obligation:
    """Node ↦ rank is injective, so exclusivity per node is exclusivity per rank; rank ↦ node
    (what a rank enumerates from) is its inverse."""
    p, s, a, b, r = z3.Ints("p s a b r")
    H = p - 1
    A = Z3Arith()
    P = Params(p, None, None, s)
    back = F.rank_node(A, P, r)
    return Obligation("lemmas", "node ↦ rank is injective and onto 0..p−1; rank ↦ node is its inverse",
                      [p >= 3, s >= 0, s < p, a >= 0, a <= H, b >= 0, b <= H],
                      z3.And(z3.Implies(rank_of(A, a, H, s) == rank_of(A, b, H, s), a == b),
                             rank_of(A, a, H, s) >= 0, rank_of(A, a, H, s) < p,
                             z3.ForAll([r], z3.Implies(z3.And(r >= 0, r < p),
                                                        z3.And(back >= 0, back <= H, F.node_rank(A, P, back) == r)))))


def piece_lemma() -> Obligation:
    """Keys (σ, o) ↦ σH + o and (σ,) ↦ kH + σ are injective and never collide (piece_of)."""
    p, k, s1, s2, o1, o2 = z3.Ints("p k s1 s2 o1 o2")
    P = Params(p, k, None, None)
    H = p - 1
    rng = [H >= 2, k >= 1, s1 >= 0, s1 < k, s2 >= 0, s2 < k, o1 >= 0, o1 < H, o2 >= 0, o2 < H]
    a, b = piece_of(P, (s1, o1)), piece_of(P, (s2, o2))
    q1, q2 = piece_of(P, (s1,)), piece_of(P, (s2,))
    return Obligation("lemmas", "shard pieces σH + o are distinct, below the P2P pieces kH + σ, all in range", rng,
                      z3.And(z3.Implies(a == b, z3.And(s1 == s2, o1 == o2)), a >= 0, a < k * H,
                             z3.Implies(q1 == q2, s1 == s2), q1 >= k * H, q1 < k * H + k))


def obligations(families: tuple[Family, ...] | None = None) -> list[Obligation]:
    from verifier.parametric import generic as G
    fams = families or F.FAMILIES
    C = generator_model(fams)
    return ([rank_lemma(), piece_lemma()] + span_lemmas(C) + G.well_formed(C) + G.sum_property(C, shard_chain(fams))
            + G.sum_property(C, p2p_chain(fams)) + G.ports(C) + G.causality(C) + finish(C) + bound(C))
