"""OptCC's time for the checks: closed-form slot time + α per message on the critical path.

Three constructions (optcc.algorithms; only their public closed forms are used here):
- one straggler, g = 1: optcc_single.optcc_slot_time;
- m ≥ 2 stragglers, g = 1: optcc_multi.optcc_multi_slot_time;
- one straggler server, g > 1: optcc_servers.optcc_server_slot_time (raises OptccError outside
  its stated NVLink conditions; such k are skipped and the skip is reported);
- several straggler servers, g > 1: optcc_rails.slot_time (exact, computed from its rails).
Each α count below is derived from its construction and tested ≥ the event model
(optcc.timing.event_time) on generated small schedules (tests/test_paper_checks.py).
"""
from __future__ import annotations

from fractions import Fraction
from functools import cache

from optcc.algorithms.optcc_multi import optcc_multi_slot_time
from optcc.algorithms.optcc_servers import optcc_server_slot_time
from optcc.algorithms.optcc_single import optcc_slot_time
from optcc.cluster import Cluster
from optcc.errors import OptccError
from paper_checks import settings

K_CANDIDATES = tuple(2**i for i in range(11))   # 1 … 1024 segments; best one per point (stated rule)
RAILS_K_CANDIDATES = (16, 64)                   # optcc_rails builds its rails for every k: fewer


# ---- α counts (derived) --------------------------------------------------------------------
def optcc_messages_on_critical_path(p: int, k: int) -> int:
    """Derived α count: 2(p−1)(k+1) messages (units of α) on OptCC's critical path.

    A healthy NIC carries about 2(p−1)·k shard flows (k segments, ring hops of stages 1 and 4
    plus its upload/download share) and the event model charges α per flow on a busy port.
    Measured on optcc_allreduce (tests/test_paper_checks.py): event_time ≤ slot_time +
    2(p−1)(k+1)·α for ℓ ∈ {8/7, 4/3, 3/2, 2, 3}, p ≤ 12, k ≤ 16, α up to 0.1 n/B, with
    equality for ℓ < 2, k ≥ 3 — so this is the event model's time or a slight overestimate.
    """
    return 2 * (p - 1) * (k + 1)


def optcc_multi_messages_on_critical_path(p: int, m: int, k: int) -> int:
    """Derived α count for optcc_multi: L(k+1) + H − 1 = 2(p−1)(k+1) + (p−m) − 1.

    optcc_multi's docstring: ring and straggler flows start on slot boundaries, one flow per
    port direction per slot, period L = 2(H + m − 1) = 2(p−1) slots. The drain places segment
    k−1's all-gather in the pattern's free slots; its last hop starts at slot L(k+1) − 2
    (L(k+1) − 1 with the m = 2 coincide rotation, `_drain_last_slot`), and the last F to a
    straggler starts by slot L(k+1) (`_f_slot`). A chain of dependent flows starts in strictly
    later slots, so it has at most L(k+1) + 1 flows, each paying α once. The count kept here is
    the old synchronous epilogue's (last step at slot L(k+1) + H − 2): still an upper bound,
    now with H − 2 slots of slack. Fill flows start inside windows, so this is tested, not
    proved: event_time ≤ slot time + count·α in tests/test_paper_checks.py; for p ≤ 10, k ≤ 8
    the event model's slope in α (event_time at α = 2 minus at α = 1 n/B) is 6–159 against
    counts 13–169.
    """
    return 2 * (p - 1) * (k + 1) + (p - m) - 1


def optcc_single_pieces(q: int, ell, k: int) -> int:
    """Pieces of optcc_single on q nodes (optcc_single.optcc_allreduce, its `pieces` line):
    k·H shards plus k − 1 point-to-point pieces when ℓ < 2 (H = q − 1 ≥ 2); one piece at q = 2."""
    h = q - 1
    if h == 1:
        return 1
    return k * h + (k - 1 if Fraction(ell) < 2 else 0)


def optcc_server_messages_on_critical_path(p: int, g: int, ell, k: int) -> int:
    """Derived α count for optcc_servers: max(2(q−1)(k+1), 2(g−1)·P) + 4(g−1), q = p/g.

    Two chains of one resource: the NIC part is the single-straggler instance on q nodes (its
    count 2(q−1)(k+1)); on one server the NVLink reduce-scatter block and the all-gather queue
    are P batches of g − 1 rounds each, chained on one NVLink port (P = instance pieces,
    `optcc_single_pieces`; k at q = 2, where optcc_servers swaps k segments). Pieces are first
    touched and released in ring-step order, so a chain that switches resources (RS rounds,
    then NIC steps, then AG rounds) counts at most the longer of the two plus the lead
    (2 batches) and tail (1 batch) and one batch where it switches: 4(g − 1). Not proved:
    tested ≥ event_time − slot_time over α on generated schedules (tests/test_paper_checks.py),
    where it holds with little slack at large α.
    """
    q = p // g
    nic = 2 * (q - 1) * (k + 1)
    pieces = k if q == 2 else optcc_single_pieces(q, ell, k)   # q = 2: k segments swapped in turn
    nvlink = 2 * (g - 1) * pieces
    return max(nic, nvlink) + 4 * (g - 1)


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
    """Derived α count for optcc_rails with m uniform straggler servers: the rail's optcc_multi
    count on q = p/g nodes plus 4 for the NVLink lead and tail (each NVLink task's g − 1 flows run
    at once). Not proved: tested ≥ the event model's slope on generated schedules
    (tests/test_paper_checks.py; measured slopes 12–82 against counts 36–97 for q ≤ 6, k ≤ 8)."""
    return optcc_multi_messages_on_critical_path(p // g, m, k) + 4


@cache
def _rails_slot(p: int, g: int, ells: tuple, k: int) -> Fraction:
    from optcc.algorithms.optcc_rails import slot_time
    return slot_time(rails_cluster(p, g, ells), k)


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
