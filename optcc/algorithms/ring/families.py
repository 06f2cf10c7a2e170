"""Ring AllReduce as two flow families (reduce-scatter, all-gather); `ring_flows` enumerates them.

Derived from optcc.algorithms.ring.build (NCCL's ring, paper Section 1): segment σ = 0..k−1, step t of
2(p−1) steps, node i = 0..p−1 sends to i+1 mod p. Reduce-scatter step t adds shard (i − t) mod p;
all-gather step u = t − (p−1) copies shard (i + 1 − u) mod p. Piece key (σ, shard) is piece
σ·p + shard. One slot = one step = shard size · max ℓ; flow (σ, t) owns slot box σ·2(p−1) + t
and lasts max(ℓ_src, ℓ_dst)/ℓ of it (ℓ_r = ℓ for the straggler rank s, else 1).
"""
from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING

from optcc.algorithms.families import INT, Arith, Family, Params, Term, Terms

if TYPE_CHECKING:
    from optcc.schedule import Flow


def rate(A: Arith, P: Params, src: Term, dst: Term) -> Term:
    """A flow's time per unit of size (n/B): ℓ when the straggler is an end, else 1 (optcc.cluster's
    NIC rule: the slower end's bandwidth, paper Section 2)."""
    return A.ite(A.Or(src == P.s, dst == P.s), P.ell, 1)


def _dur(A: Arith, P: Params, src: Term, dst: Term) -> Term:
    return A.div(rate(A, P, src, dst), P.ell)


def _rs_domain(A: Arith, P: Params, sigma: Term, t: Term, i: Term) -> Term:
    return [sigma >= 0, sigma < P.k, t >= 0, t <= P.p - 2, i >= 0, i < P.p]


def _rs_terms(A: Arith, P: Params, sigma: Term, t: Term, i: Term) -> Term:
    dst = A.mod(i + 1, P.p, 0, 1)
    return Terms(i, dst, (sigma, A.mod(i - t, P.p, -1, 0)), A.mul(sigma, 2 * P.p - 2) + t, 1, 0,
                 _dur(A, P, i, dst))


def _ag_domain(A: Arith, P: Params, sigma: Term, u: Term, i: Term) -> Term:
    return [sigma >= 0, sigma < P.k, u >= 0, u <= P.p - 2, i >= 0, i < P.p]


def _ag_terms(A: Arith, P: Params, sigma: Term, u: Term, i: Term) -> Term:
    dst = A.mod(i + 1, P.p, 0, 1)
    return Terms(i, dst, (sigma, A.mod(i + 1 - u, P.p, -1, 1)),
                 A.mul(sigma, 2 * P.p - 2) + P.p - 1 + u, 1, 0, _dur(A, P, i, dst))


RS = Family("ring.reduce_scatter", ("sigma", "t", "i"), "add", _rs_domain, _rs_terms)
AG = Family("ring.all_gather", ("sigma", "u", "i"), "copy", _ag_domain, _ag_terms)
FAMILIES = (RS, AG)


# ---- the glue from family terms to a running schedule, written once over the arithmetic namespace
# ---- (INT builds and runs it, verifier.parametric.ring proves it)

def piece_index(A: Arith, P: Params, key: tuple[Term, ...]) -> Term:
    """Piece key (σ, shard) ↦ schedule index σ·p + shard."""
    sigma, shard = key
    return sigma * P.p + shard


def shard_size(A: Arith, P: Params) -> Term:
    """Every piece is a shard 1/(kp) of n."""
    return 1 / (A.real(P.k) * A.real(P.p))


def slot(A: Arith, P: Params) -> Term:
    """One step in time (n/B): a shard at the slowest rate, ℓ (ℓ ≥ 1; NCCL's synchronous steps)."""
    return shard_size(A, P) * P.ell


def piece_sizes(P: Params) -> list[Fraction]:
    """The piece list on concrete parameters: shard_size at the piece_index of every key (the
    keys must map one-to-one onto 0..kp−1)."""
    n = P.k * P.p
    seen = bytearray(n)
    for sigma in range(P.k):
        for shard in range(P.p):
            i = piece_index(INT, P, (sigma, shard))
            if not 0 <= i < n or seen[i]:
                raise ValueError(f"families.ring: piece key {(sigma, shard)} maps to index {i}")
            seen[i] = 1
    return [shard_size(INT, P)] * n


def ring_flows(p: int, k: int, step: Fraction, families: tuple[Family, ...] = FAMILIES) -> list[Flow]:
    """The flows of every family on concrete (p, k), in the generator's order (σ, t, i), with
    start = box · step; `families` lets tests enumerate mutants the same way."""
    from optcc.schedule import Flow
    rs, ag = families
    P = Params(p, k, 1, -1)          # durations are the timing model's; only starts are stated
    starts: dict[int, Fraction] = {}
    flows: list[Flow] = []
    for sigma in range(k):
        for t in range(2 * (p - 1)):
            fam, h = (rs, t) if t < p - 1 else (ag, t - (p - 1))
            for i in range(p):
                if not all(fam.domain(INT, P, sigma, h, i)):
                    continue
                T = fam.terms(INT, P, sigma, h, i)
                start = starts.get(T.box)
                if start is None:
                    start = starts[T.box] = T.box * step
                flows.append(Flow(T.src, T.dst, piece_index(INT, P, T.piece), fam.op, start))
    return flows
