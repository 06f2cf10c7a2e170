"""Single-straggler OptCC (p ≥ 3, g = 1) as eight flow families; `optcc_flows` enumerates them.

Derived from optcc.algorithms.single.build (its docstring has the construction and the slot
pattern; the four stages are the paper's, Figures 4-7). Nodes: healthy ring positions
0..H−1 (H = p−1; position h is rank h + [h ≥ s]) and the straggler S = node H. Shard piece
key (σ, o) is piece σ·H + o; point-to-point piece key (σ,) is piece k·H + σ (ℓ < 2 only).

Three time phases, each with its own slot: 0 prologue (slot δ, a synchronous ring
reduce-scatter of segment 0), 1 pipeline (slot λ = δ for ℓ < 2, ℓδ/2 for ℓ ≥ 2; starts at
(H−1)δ), 2 epilogue (slot δ, ring all-gather of segment k−1; starts when the pipeline ends, at
pipeline slot L = 2H + ℓ for ℓ < 2 and k = 1, else 2Hk + 2). Job (σ, o) has pipeline base slot
B = σ·2H + 2(H−1−o); ring hops sit at B + τ_RS(j), B + τ_AG(j); S's window is [B, B+2).
"""
from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING, Any

from optcc.algorithms.families import INT, Arith, Family, Params, Term, Terms

if TYPE_CHECKING:
    from optcc.schedule import Flow


def _H(P: Params) -> Term:
    return P.p - 1


def _small(P: Params) -> Term:
    return P.ell < 2


def _hop(A: Arith, P: Params) -> Term:
    """A healthy hop (size δ at rate 1) in pipeline slots: 1 (λ = δ) or 2/ℓ (λ = ℓδ/2)."""
    return A.ite(_small(P), 1, A.div(2, P.ell))


def _s_dur(A: Arith, P: Params) -> Term:
    """A shard to or from S (size δ at rate 1/ℓ) in pipeline slots: ℓ or 2."""
    return A.ite(_small(P), P.ell, 2)


def _base(A: Arith, P: Params, sigma: Term, o: Term) -> Term:
    H = _H(P)
    return A.mul(sigma, 2 * H) + 2 * (H - 1 - o)


def _tau_rs(A: Arith, P: Params, j: Term) -> Term:
    H = _H(P)
    return A.ite(A.odd(H), 2 * j + 1 - 2 * H, A.ite(2 * j <= H, 2 * j - 1 - 2 * H, 2 * j + 1 - 2 * H))


def _tau_ag(A: Arith, P: Params, j: Term) -> Term:
    H = _H(P)
    return A.ite(A.odd(H), 2 * j + 4, A.ite(2 * j <= H - 4, 2 * j + 4, 2 * j + 6))


def _ring_step(A: Arith, P: Params, t: Term, i: Term) -> Term:
    return [t >= 0, t <= _H(P) - 2, i >= 0, i < _H(P)]


def _pro(A: Arith, P: Params, t: Term, i: Term) -> Term:
    H = _H(P)
    return Terms(i, A.mod(i + 1, H, 0, 1), (0, A.mod(i - t - 1, H, -1, 0)), t, 1, 0, 1, 0)


def _epi(A: Arith, P: Params, t: Term, i: Term) -> Term:
    H = _H(P)
    return Terms(i, A.mod(i + 1, H, 0, 1), (P.k - 1, A.mod(i - t, H, -1, 0)), t, 1, 0, 1, 2)


def _rs_dom(A: Arith, P: Params, sigma: Term, o: Term, j: Term) -> Term:
    return [sigma >= 1, sigma < P.k, o >= 0, o < _H(P), j >= 1, j <= _H(P) - 1]


def _rs(A: Arith, P: Params, sigma: Term, o: Term, j: Term) -> Term:
    H = _H(P)
    a = A.mod(o + j, H, 0, 1)
    return Terms(a, A.mod(a + 1, H, 0, 1), (sigma, o), _base(A, P, sigma, o) + _tau_rs(A, P, j), 1, 0,
                 _hop(A, P), 1)


def _ag_dom(A: Arith, P: Params, sigma: Term, o: Term, j: Term) -> Term:
    return [sigma >= 0, sigma <= P.k - 2, o >= 0, o < _H(P), j >= 0, j <= _H(P) - 2]


def _ag(A: Arith, P: Params, sigma: Term, o: Term, j: Term) -> Term:
    H = _H(P)
    a = A.mod(o + j, H, 0, 1)
    return Terms(a, A.mod(a + 1, H, 0, 1), (sigma, o), _base(A, P, sigma, o) + _tau_ag(A, P, j), 1, 0,
                 _hop(A, P), 1)


def _job_dom(A: Arith, P: Params, sigma: Term, o: Term) -> Term:
    return [sigma >= 0, sigma < P.k, o >= 0, o < _H(P)]


def _up(A: Arith, P: Params, sigma: Term, o: Term) -> Term:
    return Terms(o, _H(P), (sigma, o), _base(A, P, sigma, o), 2, 0, _s_dur(A, P), 1)


def _down(A: Arith, P: Params, sigma: Term, o: Term) -> Term:
    return Terms(_H(P), o, (sigma, o), _base(A, P, sigma, o) + 2, 2, 0, _s_dur(A, P), 1)


def _p2p_dom(A: Arith, P: Params, sigma: Term, o: Term) -> Term:
    return [_small(P), sigma >= 0, sigma <= P.k - 2, o >= 0, o < _H(P)]


def _p2p_up(A: Arith, P: Params, sigma: Term, o: Term) -> Term:
    """o's raw input of P2P piece σ, right after its shard upload in the same window."""
    return Terms(o, _H(P), (sigma,), _base(A, P, sigma, o), 2, P.ell, 2 - P.ell, 1)


def _p2p_down(A: Arith, P: Params, sigma: Term, o: Term) -> Term:
    """The P2P sum back to o, right after job (σ+1, o)'s download, in the same window."""
    return Terms(_H(P), o, (sigma,), _base(A, P, sigma + 1, o) + 2, 2, P.ell, 2 - P.ell, 1)


PRO = Family("optcc.prologue_rs", ("t", "i"), "add", _ring_step, _pro)
RS = Family("optcc.rs_hop", ("sigma", "o", "j"), "add", _rs_dom, _rs)
UP = Family("optcc.upload", ("sigma", "o"), "add", _job_dom, _up)
DOWN = Family("optcc.download", ("sigma", "o"), "copy", _job_dom, _down)
P2P_UP = Family("optcc.p2p_upload", ("sigma", "o"), "add", _p2p_dom, _p2p_up)
P2P_DOWN = Family("optcc.p2p_download", ("sigma", "o"), "copy", _p2p_dom, _p2p_down)
AG = Family("optcc.ag_hop", ("sigma", "o", "j"), "copy", _ag_dom, _ag)
EPI = Family("optcc.epilogue_ag", ("t", "i"), "copy", _ring_step, _epi)
FAMILIES = (PRO, RS, UP, DOWN, P2P_UP, P2P_DOWN, AG, EPI)


# ---- the glue from family terms to a running schedule: written once over the arithmetic namespace,
# ---- evaluated as INT to build and run, as Z3 terms by verifier.parametric.optcc to prove.

def piece_index(A: Arith, P: Params, key: tuple[Term, ...]) -> Term:
    """Piece key ↦ schedule index: shard (σ, o) ↦ σH + o, P2P (σ,) ↦ kH + σ."""
    H = _H(P)
    return key[0] * H + key[1] if len(key) == 2 else P.k * H + key[0]


def node_rank(A: Arith, P: Params, node: Term) -> Term:
    """Healthy ring position h is rank h + [h ≥ s]; node H is the straggler s."""
    H = _H(P)
    return A.ite(node == H, P.s, A.ite(node >= P.s, node + 1, node))


def rank_node(A: Arith, P: Params, rank: Term) -> Term:
    """The inverse of node_rank (verifier.parametric.optcc proves it is)."""
    return A.ite(rank == P.s, _H(P), A.ite(rank > P.s, rank - 1, rank))


def shard_size(A: Arith, P: Params) -> Term:
    """δ (derived, optcc_single): 1/(kH) for ℓ ≥ 2, else 1/(kH + (k−1)(2/ℓ − 1))."""
    H, k = A.real(_H(P)), A.real(P.k)
    return A.ite(_small(P), 1 / (k * H + (k - 1) * (2 / P.ell - 1)), 1 / (k * H))


def p2p_size(A: Arith, P: Params) -> Term:
    """A point-to-point piece (ℓ < 2 only): (2/ℓ − 1)δ, derived (optcc_single)."""
    return A.ite(_small(P), (2 / P.ell - 1) * shard_size(A, P), A.real(0))


def piece_size(A: Arith, P: Params, key: tuple[Term, ...]) -> Term:
    """The size (n) of the piece a key names: δ for a shard, the P2P size for (σ,)."""
    return shard_size(A, P) if len(key) == 2 else p2p_size(A, P)


def pipeline_slots(A: Arith, P: Params) -> Term:
    """L: pipeline length in pipeline slots (derived: the last download, or P2P download)."""
    H = _H(P)
    return A.ite(A.And(_small(P), P.k == 1), A.real(2 * H) + P.ell, A.real(A.mul(P.k, 2 * H) + 2))


def phase_clock(A: Arith, P: Params) -> Term:
    """(origins, units): each phase's start time and slot length (n/B), derived: prologue at 0 in
    slots δ, pipeline at (H−1)δ in slots λ (λ = δ for ℓ < 2, ℓδ/2 for ℓ ≥ 2), epilogue after
    the pipeline's L slots, in slots δ."""
    d = shard_size(A, P)
    lam = A.ite(_small(P), d, P.ell * d / 2)
    o1 = A.real(_H(P) - 1) * d
    return (A.real(0), o1, o1 + pipeline_slots(A, P) * lam), (d, lam, d)


def rate(A: Arith, P: Params, src: Term, dst: Term) -> Term:
    """A flow's time per unit of size (n/B) between two nodes: ℓ when S is an end, else 1
    (optcc.cluster's NIC rule: the slower end's bandwidth, paper Section 2)."""
    H = _H(P)
    return A.ite(A.Or(src == H, dst == H), P.ell, A.real(1))


def piece_keys(P: Params) -> list[tuple[int, ...]]:
    """Every piece key of concrete parameters, shards first."""
    H = _H(P)
    return [(sg, o) for sg in range(P.k) for o in range(H)] + ([(sg,) for sg in range(P.k - 1)] if _small(P) else [])


def piece_sizes(P: Params) -> list[Fraction]:
    """The schedule's piece list on concrete parameters: piece_size of each key kind (shard,
    P2P), placed at the piece_index of every key (an index no key lands on, or two keys on one,
    is an error)."""
    keys = piece_keys(P)
    n = len(keys)
    kind_size = {2: shard_size(INT, P), 1: p2p_size(INT, P)}    # by key length: one size per kind
    out: list[Any] = [None] * n          # None until its key is placed
    for key in keys:
        i = piece_index(INT, P, key)
        if not 0 <= i < n or out[i] is not None:
            raise ValueError(f"families.optcc: piece key {key} maps to index {i}")
        out[i] = kind_size[len(key)]
    return out


def optcc_flows(p: int, k: int, s: int, ell: Fraction,
                families: tuple[Family, ...] = FAMILIES) -> tuple[list[Fraction], list[Flow]]:
    """(pieces, flows) of every family on concrete parameters; the generator's schedule
    (optcc_single.optcc_allreduce) is exactly this."""
    from optcc.schedule import Flow
    pro, rs, up, down, p2p_up, p2p_down, ag, epi = families
    P = Params(p, k, Fraction(ell), s)
    H = p - 1
    origin, unit = phase_clock(INT, P)
    starts: dict[tuple[int, Fraction], Fraction] = {}
    flows: list[Flow] = []
    append = flows.append

    def emit(fam: Family, *idx: int) -> None:
        if not all(fam.domain(INT, P, *idx)):
            return
        T = fam.terms(INT, P, *idx)
        key = (T.phase, T.box + T.offset)
        start = starts.get(key)
        if start is None:
            start = starts[key] = origin[T.phase] + key[1] * unit[T.phase]
        append(Flow(node_rank(INT, P, T.src), node_rank(INT, P, T.dst), piece_index(INT, P, T.piece), fam.op, start))
    for t in range(H - 1):
        for i in range(H):
            emit(pro, t, i)
    for sigma in range(k):
        for o in range(H):
            for j in range(1, H):
                emit(rs, sigma, o, j)
            emit(up, sigma, o)
            emit(down, sigma, o)
            emit(p2p_up, sigma, o)
            emit(p2p_down, sigma, o)
            for j in range(H - 1):
                emit(ag, sigma, o, j)
    for t in range(H - 1):
        for i in range(H):
            emit(epi, t, i)
    return piece_sizes(P), flows
