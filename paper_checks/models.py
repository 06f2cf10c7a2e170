"""α-β cost models (exact Fractions, units of n/B) for the baselines and the lower bound.

Each model is the time of a schedule in optcc.algorithms (tests compare them with
optcc.timing.event_time on the generated schedules at small p), except where marked "model".
α enters as `au` = α·B/n, the per-message latency in units of n/B.
"""
from __future__ import annotations

from fractions import Fraction

from bounds.closed_form import (fault_free_optimum, lower_bound_multi_straggler, lower_bound_single_straggler,
                                lower_bound_straggler_server)
from optcc.algorithms.baselines import flat_ring_slot_time, hierarchical_ring_slot_time
from optcc.cluster import Cluster
from paper_checks import settings


def alpha_units(n_bytes: int, alpha=None, bandwidth=None) -> Fraction:
    """α·B/n: the per-message latency in units of n/B."""
    alpha = settings.ALPHA_SECONDS if alpha is None else Fraction(alpha)
    bandwidth = settings.NIC_BANDWIDTH if bandwidth is None else Fraction(bandwidth)
    return alpha * bandwidth / n_bytes


def seconds(units: Fraction, n_bytes: int, bandwidth=None) -> float:
    bandwidth = settings.NIC_BANDWIDTH if bandwidth is None else Fraction(bandwidth)
    return float(units * n_bytes / bandwidth)


def nvlink_speedup() -> Fraction:
    return settings.NVLINK_BANDWIDTH / settings.NIC_BANDWIDTH


def _cluster(p: int, g: int, ell) -> Cluster:
    """p GPUs, g per server, GPU 0 slowed by ℓ; bandwidths from settings (the ring slot times
    below read only ℓ_max and the NVLink speedup)."""
    return Cluster.build(p, g, stragglers={0: Fraction(ell)}, bandwidth=settings.NIC_BANDWIDTH,
                         nvlink_bandwidth=settings.NVLINK_BANDWIDTH)


def flat_ring_time(p: int, g: int, ell=1, au=Fraction(0)) -> Fraction:
    """Flat ring over p GPUs, g channels (baselines.flat_ring_allreduce): its slot time
    (baselines.flat_ring_slot_time) plus α per step, 2(p−1) steps: 2(p−1)(α + ℓ/(g·p))."""
    return flat_ring_slot_time(_cluster(p, g, ell)) + 2 * (p - 1) * au


def ring_time(p: int, ell=1, au=Fraction(0)) -> Fraction:
    """NCCL ring, g = 1 (optcc.algorithms.ring.build, k = 1): the flat ring with one channel,
    2(p−1) synchronous steps of α + ℓ/p.

    ℓ = 1 is NCCLNoFailure; ℓ > 1 is the PXN ring with the straggler on it (ℓ·T0 at α = 0).
    """
    return flat_ring_time(p, 1, ell, au)


def hierarchical_ring_time(p: int, g: int, ell=1, au=Fraction(0)) -> Fraction:
    """baselines.hierarchical_ring_allreduce: its slot time (baselines.hierarchical_ring_slot_time)
    plus α per step, 2(g−1) NVLink and 2(q−1) NIC steps:
    2(g−1)(α + 1/(g·s_nv)) + 2(q−1)(α + ℓ/p)."""
    q = p // g
    return hierarchical_ring_slot_time(_cluster(p, g, ell)) + (2 * (g - 1) + 2 * (q - 1)) * au


def nccl_no_failure_time(p: int, g: int = 1, au=Fraction(0)) -> Fraction:
    """NCCLNoFailure: the ring (g = 1) or the flat ring (g > 1; PAPER.md's derived reading)."""
    return ring_time(p, 1, au) if g == 1 else flat_ring_time(p, g, 1, au)


def pxn_ring_time(p: int, g: int, ell, au=Fraction(0)) -> Fraction:
    """NCCL ring with the straggler (server) on it: every step runs at the slow link."""
    return ring_time(p, ell, au) if g == 1 else flat_ring_time(p, g, ell, au)


def r2ccl_time(p: int, ell, au=Fraction(0), chunks: int | None = settings.R2CCL_CHUNKS) -> Fraction:
    """R2CCL-AllReduce, model (PAPER.md's formula for R2CCL, plus α per ring step and chunk).

    X = 1 − 1/ℓ, Y = X:  T1 = 2(p−1)(α + (1−Y)ℓ/p),  T2 = 2(p−2)(α + Y/((p−1)X)),
    T3 = (K+1)(α + ℓY/K) (K chunks: reduce K, broadcast the last one), or ℓY + α with
    chunks=None (perfectly pipelined: PAPER.md's T/T0 = 1 + p(ℓ−1)/(2(p−1)) at α = 0).
    T = max(T1, T2) + T3. At α = 0 and S → ∞ this is baselines.r2ccl_slot_time.
    """
    ell = Fraction(ell)
    x = 1 - 1 / ell
    y = x
    t1 = 2 * (p - 1) * (au + (1 - y) * ell / p)
    t2 = 2 * (p - 2) * (au + y / ((p - 1) * x)) if p > 2 else Fraction(0)
    t3 = ell * y + au if chunks is None else (chunks + 1) * (au + ell * y / chunks)
    return max(t1, t2) + t3


def r2ccl_ratio_formula(n_nodes: int, ell) -> Fraction:
    """PAPER.md: T/T0 = 1 + N(ℓ−1)/(2(N−1)) for R2CCL with Y = X (no chunking factor)."""
    return 1 + Fraction(n_nodes) * (Fraction(ell) - 1) / (2 * (n_nodes - 1))


def lower_bound_units(p: int, g: int, ell) -> Fraction:
    """Theorem 1 (g = 1) or Theorem 3 (g > 1), paper; α = 0."""
    return lower_bound_single_straggler(p, ell) if g == 1 else lower_bound_straggler_server(p, g, ell)


def lower_bound_time(p: int, g: int, ell, au=Fraction(0)) -> Fraction:
    """Derived: the bandwidth bound plus one α (the straggler's port must carry ≥ 1 message)."""
    return lower_bound_units(p, g, ell) + au


def lower_bound_multi_time(p: int, ells, au=Fraction(0)) -> Fraction:
    """Derived (bounds.closed_form.lower_bound_multi_straggler) plus one α, as lower_bound_time."""
    return lower_bound_multi_straggler(p, [Fraction(e) for e in ells]) + au


def r2ccl_server_time(p: int, g: int, ell, au=Fraction(0), chunks: int | None = settings.R2CCL_CHUNKS) -> Fraction:
    """R2CCL for g > 1, model: PAPER.md's node-level formula with N = q = p/g servers, each
    node's g NICs carrying 1/g of the data (α per step unchanged), plus the synchronous NVLink
    reduce-scatter and all-gather inside each server, 2(g−1)(α + 1/(g·s_nv)), as in
    baselines.r2ccl_server_allreduce (whose slot time this is at α = 0, S → ∞)."""
    q = p // g
    return 2 * (g - 1) * (au + Fraction(1, g) / nvlink_speedup()) + r2ccl_time(q, ell, au * g, chunks) / g


def t0(p: int, g: int = 1) -> Fraction:
    return fault_free_optimum(p, g)
