"""OptCC's time for the checks: closed-form slot time + α per message on the critical path.

Three constructions of optcc.algorithms.registry, each named (only their closed forms are used):
- one straggler, g = 1: optcc_single.optcc_slot_time;
- m ≥ 2 stragglers, g = 1: optcc_multi.optcc_multi_slot_time;
- one straggler server, g > 1: optcc_servers.optcc_server_slot_time (raises OptccError outside
  its stated NVLink conditions; such k are skipped and the skip is reported);
- several straggler servers or mixed ℓ in a server, g > 1: optcc_rails.slot_time (exact,
  computed from its rails).
Which one serves a cluster is optcc.algorithms.registry's choice. Each α count below is derived
from its construction (its home: optcc.model_time) and tested ≥ the event model
(optcc.timing.event_time) on generated small schedules (tests/paper_checks/test_paper_checks.py,
tests/optcc/test_model_time.py).
"""
from __future__ import annotations

from fractions import Fraction
from functools import cache

from optcc.algorithms.registry import construction
from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.model_time import overhead_count, single_pieces
from paper_checks import settings

K_CANDIDATES = tuple(2**i for i in range(11))   # 1 … 1024 segments; best one per point (stated rule)
optcc_slot_time = construction("optcc_single").slot_time
optcc_multi_slot_time = construction("optcc_multi").slot_time
optcc_server_slot_time = construction("optcc_servers").slot_time
optcc_rails_slot_time = construction("optcc_rails").slot_time
RAILS_K_CANDIDATES = (16, 64)                   # optcc_rails builds its rails for every k: fewer
RAILS_K_MAX = 128     # per-model rows: auto k ≤ this for optcc_rails (each k builds its rails; a cost
                      # rule: a cap can only make OptCC slower, never faster)


# ---- α counts (derived; their home and derivations: optcc.model_time.overhead_count) -------
def optcc_messages_on_critical_path(p: int, k: int) -> int:
    """Overheads o on OptCC's (one straggler) critical path: 2(p−1)(k+1)."""
    return overhead_count("optcc", Cluster.build(p, stragglers={0: 2}), k)


def optcc_multi_messages_on_critical_path(p: int, m: int, k: int) -> int:
    """Overheads o on optcc_multi's critical path: 2(p−1)(k+1) + (p−m) − 1."""
    return overhead_count("optcc", Cluster.build(p, stragglers={i: 2 for i in range(m)}), k)


def optcc_single_pieces(q: int, ell, k: int) -> int:
    """Pieces of optcc_single on q nodes (optcc.model_time.single_pieces)."""
    return single_pieces(q, ell, k)


def optcc_server_messages_on_critical_path(p: int, g: int, ell, k: int) -> int:
    """Overheads o on optcc_servers' critical path: max(2(q−1)(k+1), 2(g−1)·P) + 4(g−1)."""
    return overhead_count("optcc", Cluster.build(p, g, stragglers={i: Fraction(ell) for i in range(g)}), k)


# ---- times ---------------------------------------------------------------------------------
def optcc_time(p: int, ell, k: int, au=Fraction(0)) -> Fraction:
    """Single straggler (g = 1), units n/B: closed-form slot time + α per message."""
    cluster = Cluster.build(p, stragglers={0: Fraction(ell)})
    return optcc_slot_time(cluster, k) + optcc_messages_on_critical_path(p, k) * au


def multi_straggler_cluster(p: int, ells) -> Cluster:
    return Cluster.build(p, stragglers={i: Fraction(e) for i, e in enumerate(ells)})


def optcc_multi_time(p: int, ells, k: int, au=Fraction(0)) -> Fraction:
    """m ≥ 2 stragglers (g = 1), units n/B: optcc_multi_slot_time + α per message."""
    slot = optcc_multi_slot_time(multi_straggler_cluster(p, ells), k)
    return slot + optcc_multi_messages_on_critical_path(p, len(ells), k) * au


def server_cluster(p: int, g: int, ell) -> Cluster:
    """Server 0's g GPUs slowed by ℓ; NIC and NVLink bandwidths from settings."""
    return Cluster.build(p, g, stragglers={i: Fraction(ell) for i in range(g)},
                         bandwidth=settings.NIC_BANDWIDTH, nvlink_bandwidth=settings.NVLINK_BANDWIDTH)


def optcc_server_time(p: int, g: int, ell, k: int, au=Fraction(0)) -> Fraction:
    """One straggler server (g > 1), units n/B: optcc_server_slot_time + α per message.

    Raises OptccError where the closed form does not hold (optcc_servers' NVLink conditions)."""
    slot = optcc_server_slot_time(server_cluster(p, g, ell), k)
    return slot + optcc_server_messages_on_critical_path(p, g, ell, k) * au


def _best(time_of_k, candidates) -> tuple[Fraction, int]:
    best = None
    refused = []
    for k in candidates:
        try:
            t = time_of_k(k)
        except OptccError:
            refused.append(k)
            continue
        if best is None or t < best[0]:
            best = (t, k)
    if best is None:
        raise OptccError("segments", f"no closed form for any k in {list(candidates)}")
    return best


def rails_cluster(p: int, g: int, ells) -> Cluster:
    """Servers 0..m−1 slowed (all g GPUs of server i at ells[i]: a lost NIC with PXN)."""
    slow = {i * g + j: Fraction(e) for i, e in enumerate(ells) for j in range(g)}
    return Cluster.build(p, g, slow, bandwidth=settings.NIC_BANDWIDTH, nvlink_bandwidth=settings.NVLINK_BANDWIDTH)


def optcc_rails_messages_on_critical_path(p: int, g: int, m: int, k: int) -> int:
    """Overheads o on optcc_rails' critical path with m uniform straggler servers (2 ≤ m < p/g):
    the rail's optcc_multi count on q = p/g nodes plus 4 for the NVLink lead and tail
    (optcc.model_time.overhead_count; tested ≥ the event model's slope in tests/paper_checks/test_paper_checks.py)."""
    return overhead_count("optcc", Cluster.build(p, g, stragglers={i * g + j: 2 for i in range(m) for j in range(g)}), k)


@cache
def _rails_slot(p: int, g: int, ells: tuple, k: int) -> Fraction:
    return optcc_rails_slot_time(rails_cluster(p, g, ells), k)


def optcc_rails_time(p: int, g: int, ells, k: int, au=Fraction(0)) -> Fraction:
    """m ≥ 2 straggler servers (g > 1), units n/B: optcc_rails.slot_time + α per message."""
    ells = tuple(Fraction(e) for e in ells)
    return _rails_slot(p, g, ells, k) + optcc_rails_messages_on_critical_path(p, g, len(ells), k) * au


def optcc_rails_best_time(p: int, g: int, ells, au=Fraction(0), candidates=RAILS_K_CANDIDATES) -> tuple[Fraction, int]:
    """Best over RAILS_K_CANDIDATES (fewer than K_CANDIDATES: each k builds the rails' schedules)."""
    return _best(lambda k: optcc_rails_time(p, g, ells, k, au), candidates)


def optcc_best_time(p: int, ell, au=Fraction(0), candidates=K_CANDIDATES) -> tuple[Fraction, int]:
    """The best single-straggler time over the fixed candidate set of k, and that k."""
    return _best(lambda k: optcc_time(p, ell, k, au), candidates)


def optcc_multi_best_time(p: int, ells, au=Fraction(0), candidates=K_CANDIDATES) -> tuple[Fraction, int]:
    return _best(lambda k: optcc_multi_time(p, ells, k, au), candidates)


def optcc_server_best_time(p: int, g: int, ell, au=Fraction(0), candidates=K_CANDIDATES) -> tuple[Fraction, int]:
    """Best over the candidate k where the closed form holds (k it refuses are skipped)."""
    return _best(lambda k: optcc_server_time(p, g, ell, k, au), candidates)
