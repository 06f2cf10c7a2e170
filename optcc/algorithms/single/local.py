"""Single-straggler OptCC's rank-local enumeration (optcc.algorithms.families.local): healthy
positions 0..H−1, the straggler is node H."""
from __future__ import annotations

from fractions import Fraction

from optcc.algorithms.families import INT, Arith, Params, Term
from optcc.algorithms.families.arrays import NP
from optcc.algorithms.families.local_form import Branch, LocalForm, every
from optcc.algorithms.single import families as F


def form() -> LocalForm:
    """Single-straggler OptCC's rank-local enumeration."""
    pro, rs, up, down, p2p_up, p2p_down, ag, epi = F.FAMILIES

    def healthy(A: Arith, P: Params, r: Term) -> Term:
        return r < P.p - 1

    def straggler(A: Arith, P: Params, r: Term) -> Term:
        return r == P.p - 1

    def ring_src(A: Arith, P: Params, r: Term, t: Term) -> tuple[Term, ...]:                    # prologue / epilogue (t, i): i -> i+1 mod H
        return (t, r)

    def ring_dst(A: Arith, P: Params, r: Term, t: Term) -> tuple[Term, ...]:
        return (t, A.mod(r - 1, P.p - 1, -1, 0))

    def hop_src(A: Arith, P: Params, r: Term, sigma: Term, j: Term) -> tuple[Term, ...]:              # hop (σ, o, j) sends a = (o+j) mod H -> a+1 mod H
        return (sigma, A.mod(r - j, P.p - 1, -1, 0), j)

    def hop_dst(A: Arith, P: Params, r: Term, sigma: Term, j: Term) -> tuple[Term, ...]:
        return (sigma, A.mod(r - 1 - j, P.p - 1, -1, 0), j)

    def at_o(A: Arith, P: Params, r: Term, sigma: Term) -> tuple[Term, ...]:                    # job (σ, o) with o = r
        return (sigma, r)

    branches = (
        Branch(pro, "src", 1, ring_src, healthy), Branch(pro, "dst", 1, ring_dst, healthy),
        Branch(rs, "src", 1, hop_src, healthy), Branch(rs, "dst", 1, hop_dst, healthy),
        Branch(up, "src", 1, at_o, healthy), Branch(up, "dst", None, every, straggler),
        Branch(down, "src", None, every, straggler), Branch(down, "dst", 1, at_o, healthy),
        Branch(p2p_up, "src", 1, at_o, healthy), Branch(p2p_up, "dst", None, every, straggler),
        Branch(p2p_down, "src", None, every, straggler), Branch(p2p_down, "dst", 1, at_o, healthy),
        Branch(ag, "src", 1, hop_src, healthy), Branch(ag, "dst", 1, hop_dst, healthy),
        Branch(epi, "src", 1, ring_src, healthy), Branch(epi, "dst", 1, ring_dst, healthy),
    )

    def ranges(P: Params) -> dict[str, tuple[tuple[int, int], ...]]:
        H = P.p - 1
        ring = ((0, H - 2), (0, H - 1))
        job = ((0, P.k - 1), (0, H - 1))
        return {pro.name: ring, epi.name: ring, rs.name: job + ((1, H - 1),), ag.name: job + ((0, H - 2),),
                up.name: job, down.name: job, p2p_up.name: job, p2p_down.name: job}

    return LocalForm("optcc", F.FAMILIES, branches, ranges, lambda P: P.p,
                     lambda P, r: F.rank_node(INT, P, r), lambda P, n: F.node_rank(NP, P, n),
                     lambda P, key: F.piece_index(NP, P, key), lambda P: F.phase_clock(INT, P), F.piece_sizes, _finish)


def _finish(P: Params) -> Fraction:
    """The last phase's origin plus its p − 1 units: after every start."""
    origin, unit = F.phase_clock(INT, P)
    return Fraction(origin[-1] + (P.p - 1) * unit[-1])
