"""OptCC's time for the checks: the closed form from optcc.algorithms.optcc_single when it exists.

Single straggler, g = 1 only (issue 2's optcc_single). g > 1 OptCC is issue 8, not built yet:
`optcc_multi_gpu_available()` says so and the checks print "not built yet (issue 8)".
"""
from __future__ import annotations

import importlib
from fractions import Fraction

from optcc.cluster import Cluster

NOT_BUILT_SINGLE = "not built yet (optcc.algorithms.optcc_single missing)"
NOT_BUILT_MULTI_GPU = "not built yet (issue 8)"
K_CANDIDATES = tuple(2**i for i in range(11))   # 1 … 1024 segments; best one per point (stated rule)


def _single():
    try:
        module = importlib.import_module("optcc.algorithms.optcc_single")
    except ImportError:
        return None
    if not hasattr(module, "optcc_slot_time"):
        return None
    return module


def optcc_single_available() -> bool:
    return _single() is not None


def optcc_multi_gpu_available() -> bool:
    return False


def optcc_messages_on_critical_path(p: int, k: int) -> int:
    """Derived α count: 2(p−1)(k+1) messages (units of α) on OptCC's critical path.

    A healthy NIC carries about 2(p−1)·k shard flows (k segments, ring hops of stages 1 and 4
    plus its upload/download share) and the event model charges α per flow on a busy port.
    Measured on optcc_allreduce (tests/test_paper_checks.py): event_time ≤ slot_time +
    2(p−1)(k+1)·α for ℓ ∈ {8/7, 4/3, 3/2, 2, 3}, p ≤ 12, k ≤ 16, α up to 0.1 n/B, with
    equality for ℓ < 2, k ≥ 3 — so this is the event model's time or a slight overestimate.
    """
    return 2 * (p - 1) * (k + 1)


def optcc_time(p: int, ell, k: int, au=Fraction(0)) -> Fraction:
    """OptCC time (units n/B): closed-form slot time + α per message on the critical path."""
    module = _single()
    if module is None:
        raise RuntimeError(NOT_BUILT_SINGLE)
    cluster = Cluster.build(p, stragglers={0: Fraction(ell)})
    return module.optcc_slot_time(cluster, k) + optcc_messages_on_critical_path(p, k) * au


def optcc_best_time(p: int, ell, au=Fraction(0), candidates=K_CANDIDATES) -> tuple[Fraction, int]:
    """The best time over the fixed candidate set of k, and that k."""
    best = None
    for k in candidates:
        t = optcc_time(p, ell, k, au)
        if best is None or t < best[0]:
            best = (t, k)
    return best
