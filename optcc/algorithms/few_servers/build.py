"""Few servers, one straggler server, g ≥ 2 GPUs each: a lagged direct exchange between the
servers, lifted to g GPUs per server with NVLink brackets, whose critical path holds a constant
number of latencies Li + L for every segment count k (derived; docs/optcc_servers.md
"Few servers").

Construction (derived):
- Instance: `direct.build(instance cluster, k, lag=LAG)` on the q servers (one node each, the
  straggler server's ℓ): shards x_j from the exact exclusive-port LP (direct.shard_lp), round r
  carries the reduce-scatter (RS) of chunk r and the all-gather (AG) of chunk r − LAG. With
  LAG = 2 every AG starts one whole round after the RS it reads landed, so in the event model
  (optcc.timing) an AG waits on no latency while Li + L ≤ that round's length (the knee).
- Lift (optcc_servers.lift_instance, server_lift): instance l runs on the l-th GPU of every
  server on 1/g of the data; NVLink RS batches before each piece's first touch, AG batches after
  its last write, as optcc_servers places them.
- Slot time (`slot_time`): with c = (g−1)/(g·k·s_nv) (one chunk's NVLink RS or AG work at a
  server), F = max_i max(RS send_i, RS recv_i) and M = max_i (RS send_i + RS recv_i) of the LP
  shards (direct._round_loads times k), T_inst = (2·min(k, LAG)·F + max(0, k − LAG)·M)/k:
      T = c + T_inst/g + (1 − min_j x_j)·c
  (lead: chunk 0's RS batches, all touched at time 0; tail: the last round's AG batches at the
  server owning least). It holds when 2(g−1)/s_nv ≤ F (a chunk's NVLink work at a server is at
  most half a round, so no batch waits on the NVLink queue); outside it raises.
- Latency (`latencies`): B = 3 (k ≥ LAG) below the knee Li + L ≤ F/(g·k) (the shortest round, g GPUs):
  one Li before the first flow, one Li + L from each NVLink RS batch to its NIC flows and from
  the last NIC landing to the AG batch, one L at the end; every NIC-to-NIC edge has a round of
  slack. A = k + LAG rounds (a round's flows share a port concurrently, so a port chain has one
  flow per round) plus 2(g−1) flows per NVLink batch chain, as for optcc_servers. Tested ≥ the
  event time in tests/optcc/test_few_servers.py.
- Where the dispatcher takes it (measured, the docstring of `accepts`): g ≥ 2, 3 ≤ q ≤ Q_MAX,
  one straggler server, the NVLink condition, and Li + L > 0, so latency-free results stay
  optcc_servers'. `build` itself covers 2 ≤ q ≤ Q_MAX at any latency.
"""
from __future__ import annotations

import functools
from fractions import Fraction
from typing import TYPE_CHECKING

from optcc.algorithms.direct import build as direct
from optcc.algorithms.limits import check_segments
from optcc.algorithms.servers.build import _plan, lift_instance
from optcc.algorithms.servers.shape import instance_cluster, straggler_server
from optcc.algorithms.stated import states_slot_time
from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.schedule import Schedule

if TYPE_CHECKING:
    from optcc.event_arrays import EventArrays

NAME = "few_servers"
LAG = 2          # derived: the AG of chunk c runs LAG rounds after its RS, LAG − 1 rounds of slack
Q_MAX = 8        # "few servers": at most 8 (derived: the measured rule in `accepts`)


@functools.lru_cache(maxsize=256)
def _shards(ell: tuple[Fraction, ...]) -> tuple[tuple[Fraction, ...], Fraction, Fraction]:
    """(x, F, M) of the instance slowdowns (an exact simplex: cached, the dispatcher asks often)."""
    x = tuple(direct.shard_lp(ell))
    first, middle, _ = direct._round_loads(ell, x, 1)   # at k = 1: F and M themselves
    return x, first, middle


def _check(cluster: Cluster) -> tuple[Cluster, tuple[Fraction, ...], Fraction, Fraction]:
    """(instance cluster, shards x, F, M) of a cluster this construction covers (else OptccError)."""
    g, q = cluster.g, cluster.servers
    if g < 2:
        raise OptccError("g", "few_servers covers g ≥ 2 GPUs per server")
    if not 2 <= q <= Q_MAX:
        raise OptccError("p", f"few_servers covers 2 ≤ q ≤ {Q_MAX} servers, got q = {q}")
    straggler_server(cluster)
    inst, _ = instance_cluster(cluster)
    x, first, middle = _shards(tuple(inst.slowdown))
    s_nv = cluster.nvlink_speedup
    if 2 * (g - 1) / s_nv > first:
        raise OptccError("nvlink_bandwidth", f"few_servers needs 2(g−1)/s_nv ≤ F = {first} (NVLink at most "
                                             f"half a round per chunk), got s_nv = {s_nv}")
    return inst, x, first, middle


def _nvlink_chunk(cluster: Cluster, k: int) -> Fraction:
    """c = (g−1)/(g·k·s_nv): one chunk's NVLink RS (or AG) work at a server."""
    g = cluster.g
    return Fraction(g - 1, g * k) / cluster.nvlink_speedup


def slot_time(cluster: Cluster, k: int) -> Fraction:
    """Exact slot time of `build(cluster, k)` (module docstring), n/B."""
    k = check_segments(k)
    _, x, first, middle = _check(cluster)
    t_inst = (2 * min(k, LAG) * first + max(0, k - LAG) * middle) / k
    c = _nvlink_chunk(cluster, k)
    return c + t_inst / cluster.g + (1 - min(x)) * c


def _instance(cluster: Cluster, k: int) -> Schedule:
    inst, _, _, _ = _check(cluster)
    return direct.build(inst, k, lag=LAG)


@states_slot_time("slot_time")
def build(cluster: Cluster, k: int) -> Schedule:
    """The lifted lagged direct exchange of the module docstring (exclusive port model)."""
    k = check_segments(k)
    s_star, _ = straggler_server(cluster)
    inst = _instance(cluster, k)
    meta = {"algorithm": NAME, "segments": k, "capacity": "exclusive", "g": cluster.g,
            "straggler_server": s_star, "lag": LAG, "shards": inst.meta["shards"],
            "construction": "NVLink RS + g lagged direct exchanges between the servers + NVLink AG, "
                            "see few_servers (derived)"}
    return lift_instance(cluster, _plan(cluster, k, inst), meta)


def arrays(cluster: Cluster, k: int) -> EventArrays:
    """build(cluster, k)'s flows as EventArrays (optcc.algorithms.servers.arrays)."""
    from optcc.algorithms.servers.arrays import lifted_event_arrays
    k = check_segments(k)
    return lifted_event_arrays(cluster, _plan(cluster, k, _instance(cluster, k)))


# ---- latency counts (module docstring) -------------------------------------------------------
def overheads(cluster: Cluster, k: int) -> int:
    """A = max(k + LAG, 2(g−1)·P) + 4(g−1), P = instance pieces (k per owner)."""
    _, x, _, _ = _check(cluster)
    g = cluster.g
    pieces = k * sum(1 for v in x if v != 0)
    return max(k + LAG, 2 * (g - 1) * pieces) + 4 * (g - 1)


def latencies(cluster: Cluster, k: int) -> Fraction:
    """B = 3 below the knee (module docstring); 4 for k < LAG, where the AG round follows its
    RS round directly (one zero-slack edge more)."""
    return Fraction(3 if k >= LAG else 4)


def knee(cluster: Cluster) -> Fraction:
    """Li + L ≤ knee/(k·p) ⟺ Li + L ≤ F/(g·k), the shortest round: knee = F·p/g = F·q."""
    _, _, first, _ = _check(cluster)
    return first * cluster.servers


def accepts(cluster: Cluster) -> tuple[bool, str]:
    """Where the "optcc" dispatcher takes it before optcc_servers: g ≥ 2, 3 ≤ q ≤ Q_MAX, one
    straggler server, 2(g−1)/s_nv ≤ F, and Li + L > 0 (so every latency-free result is
    optcc_servers', and the build depends on the latency only through Li + L > 0).

    Measured by benchmarks/few_servers_dispatch.py (8 GiB, 50 GB/s, NVLink 9×; best k of
    2, 4, …, 1024 by event time up to 0.4 M flows, few_servers' closed-form upper bound beyond),
    over NCCLNoFailure's event time at ℓ = 2, few_servers vs optcc_servers:
      p = 16, g = 4:  simai 6.92 vs 8.94%, nccl 6.94 vs 10.92%, alpha 9.15 vs 10.47%
      p = 32, g = 4:  simai 3.47 vs 6.07%, nccl 3.49 vs 8.73%, alpha 5.75 vs 8.87%
      p = 32, g = 8:  simai 3.53 vs 6.74%, nccl 3.57 vs 9.94%, alpha 11.76 vs 9.10% (worse)
      p = 64, g = 8:  simai 1.88 vs 6.45%, nccl 1.93 vs 9.33%, alpha 14.40 vs 10.13% (worse)
      p = 16, g = 8 (q = 2): simai 6.88 vs 6.77%, nccl 6.95 vs 6.82% (worse)
    ℓ = 4/3, 8/7 at g = 4 gain 1.5–3.5 pp; at g = 8 they fail the NVLink condition. o alone
    (alpha) is excluded as a whole: it loses at g = 8, and a g threshold would be fitted to two
    points."""
    if cluster.g < 2:
        return False, "covers g ≥ 2 GPUs per server"
    try:
        _check(cluster)
    except OptccError as e:
        return False, e.message
    if not cluster.stragglers:
        return False, "needs one straggler server"
    if cluster.servers < 3:
        return False, "q = 2 stays optcc_servers' (its swap is as good: measured, see above)"
    if not cluster.issue_delay + cluster.latency:
        return False, ("needs Li + L > 0: latency-free clusters and overhead-only ones (o alone, the alpha "
                       "preset) stay optcc_servers' (measured, see above)")
    return True, ""
