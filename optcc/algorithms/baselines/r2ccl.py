"""R2CCL-AllReduce, the paper's other baseline, as Schedules.

- `r2ccl_allreduce`: R2CCL-AllReduce as PAPER.md describes its repository (arXiv 2512.25059;
  src/r2cc/allreduce/r2cc_allreduce.cc): a global AllReduce on (1−Y) of the data runs alongside
  a healthy-only AllReduce on Y; then the degraded node's Y part is reduced into a helper and
  broadcast from the helper, pipelined in K chunks. See `r2ccl_slot_time` for its exact time.
- `r2ccl_server_allreduce` (g > 1): NVLink reduce-scatter, the g = 1 R2CCL schedule over the
  q servers once per local index (PAPER.md's node-level formula with N = q, each NIC carrying
  1/g of the data; optcc.algorithms.servers.lift), NVLink all-gather; `r2ccl_server_slot_time`
  is its exact time (derived).
"""
from __future__ import annotations

from fractions import Fraction

from optcc.algorithms.stated import states_slot_time
from optcc.algorithms.ring.build import ring_step
from optcc.algorithms.servers.lift import lifted_flow, nvlink_round
from optcc.algorithms.servers.shape import instance_cluster, straggler_server
from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.schedule import Flow, Schedule
from optcc.timing import slot_time

ONE = Fraction(1)


# ---- R2CCL-AllReduce -----------------------------------------------------------------------
def _single_straggler(cluster: Cluster) -> tuple[int, Fraction]:
    if cluster.g != 1:
        raise OptccError("g", "the R2CCL schedule is built for one GPU per server (g = 1)")
    if len(cluster.stragglers) != 1:
        raise OptccError("stragglers", "R2CCL-AllReduce needs exactly one degraded node")
    (rank, ell), = cluster.stragglers.items()
    return rank, ell                       # p ≥ 2 (Cluster), so a healthy helper exists


def r2ccl_slot_time(cluster: Cluster, chunks: int = 4, subpieces: int | None = 8, tail: Fraction | None = None) -> Fraction:
    """Exact slot time of `r2ccl_allreduce` (derived from its construction, units n/B).

    With X = 1 − 1/ℓ and tail fraction Y (default Y = X):
      T1 = 2(p−1)/p · (1−Y)·ℓ            global ring on the main part, straggler-paced
      T2 = 2(p−2)/(p−1) · Y/X            healthy-only ring on the tail at the spare rate X
      T3 = (K+1)·ℓY/K + (p−2)·Y/(K·S)    reduce into the helper then pipelined chain broadcast
      T  = max(T1, T2) + T3.
    As S → ∞ (subpieces=None: a cost model, no schedule) this is PAPER.md's R2CCL formula
    with the (1 + 1/K) factor on T3 = ℓY.
    """
    _, ell = _single_straggler(cluster)
    p, k, s = cluster.p, chunks, subpieces
    x = 1 - 1 / ell
    y = x if tail is None else Fraction(tail)
    t1 = Fraction(2 * (p - 1), p) * (1 - y) * ell
    t2 = Fraction(2 * (p - 2), p - 1) * y / x if y else Fraction(0)
    t3 = (k + 1) * ell * y / k + (0 if s is None else (p - 2) * y / (k * s))
    return max(t1, t2) + t3


@states_slot_time("r2ccl_slot_time")
def r2ccl_allreduce(cluster: Cluster, chunks: int = 4, subpieces: int = 8, tail: Fraction | None = None) -> Schedule:
    """R2CCL-AllReduce on a cluster with one degraded node (g = 1), capacity model "shared".

    Main part (1−Y): ring AllReduce over all p nodes; flows touching the straggler run at rate 1
    (its whole, slow port), healthy–healthy flows at rate 1/ℓ so every step lasts shard·ℓ.
    Tail Y: ring AllReduce over the p−1 healthy nodes at rate X = 1 − 1/ℓ, the healthy ports'
    spare share (R2CCL's "healthy-only AllReduce on the lost fraction"). Then for each of K
    chunks (S sub-pieces each): the straggler's tail is added into the helper (the first
    healthy node) back to back; once chunk c has fully landed the helper broadcasts it along
    the chain helper → healthy nodes → straggler (copy; the last hop into the straggler sets
    the pace). Requires 0 < Y < 1 and ℓ > 1.
    """
    rank, ell = _single_straggler(cluster)
    if ell <= 1:
        raise OptccError("stragglers", "R2CCL needs a degraded node (ℓ > 1)")
    if isinstance(chunks, bool) or not isinstance(chunks, int) or chunks < 1:
        raise OptccError("chunks", f"expected a positive integer, got {chunks!r}")
    if isinstance(subpieces, bool) or not isinstance(subpieces, int) or subpieces < 1:
        raise OptccError("subpieces", f"expected a positive integer, got {subpieces!r}")
    p, k, s = cluster.p, chunks, subpieces
    x = 1 - 1 / ell
    y = x if tail is None else Fraction(tail)
    if not 0 < y < 1:
        raise OptccError("tail", f"the tail fraction Y must be in (0, 1), got {y}")
    healthy = [r for r in range(p) if r != rank]
    ring_all = list(range(p))

    # Pieces: main part cut in p shards; tail cut at the common refinement of the healthy
    # ring's p−1 shards and the K·S broadcast sub-pieces.
    main_shard = (1 - y) / p
    cuts = sorted({Fraction(i, p - 1) for i in range(p)} | {Fraction(i, k * s) for i in range(k * s + 1)})
    tail_pieces = [(cuts[i], cuts[i + 1]) for i in range(len(cuts) - 1)]   # as fractions of Y
    pieces = [main_shard] * p + [(b - a) * y for a, b in tail_pieces]

    def tail_range(a: Fraction, b: Fraction) -> list[tuple[int, Fraction]]:
        """(piece index, share of [a, b)) for every refinement piece inside [a, b) of the tail."""
        out = []
        for i, (lo, hi) in enumerate(tail_pieces):
            if lo >= a and hi <= b:
                out.append((p + i, (hi - lo) / (b - a)))
        return out

    flows: list[Flow] = []
    # Global ring on the main part.
    step1 = main_shard * ell
    for t in range(2 * (p - 1)):
        offset, op = ring_step(t, p)
        for i in range(p):
            src, dst = ring_all[i], ring_all[(i + 1) % p]
            rate = ONE if rank in (src, dst) else 1 / ell
            flows.append(Flow(src, dst, (i + offset) % p, op, t * step1, "nic", rate))
    t1 = 2 * (p - 1) * step1
    # Healthy-only ring on the tail, at rate X (split over the refinement pieces of each shard).
    h = len(healthy)
    step2 = y / (h * x) if h > 1 else Fraction(0)
    for t in range(2 * (h - 1)):
        offset, op = ring_step(t, h)
        for i in range(h):
            src, dst = healthy[i], healthy[(i + 1) % h]
            shard = (i + offset) % h
            for piece, share in tail_range(Fraction(shard, h), Fraction(shard + 1, h)):
                flows.append(Flow(src, dst, piece, op, t * step2, "nic", x * share))
    t2 = 2 * (h - 1) * step2
    # Reduce into the helper, then chain broadcast, K chunks of S sub-pieces.
    start3 = max(t1, t2)
    helper = healthy[0]
    chain = healthy + [rank]
    sub = Fraction(1, k * s)                  # sub-piece, as a fraction of Y
    u, v = sub * y, sub * y * ell             # healthy hop, hop touching the straggler
    for c in range(k):
        for j in range(s):
            idx = c * s + j
            for piece, share in tail_range(idx * sub, (idx + 1) * sub):
                flows.append(Flow(rank, helper, piece, "add", start3 + idx * v, "nic", share))
        bcast = start3 + (c + 1) * s * v       # chunk c has landed in the helper
        for j in range(s):
            idx = c * s + j
            for hop in range(len(chain) - 1):
                src, dst = chain[hop], chain[hop + 1]
                start = bcast + j * v + hop * u
                for piece, share in tail_range(idx * sub, (idx + 1) * sub):
                    flows.append(Flow(src, dst, piece, "copy", start, "nic", share))
    meta = {"algorithm": "r2ccl", "chunks": k, "subpieces": s, "tail": str(y), "helper": helper,
            "capacity": "shared"}
    return Schedule(cluster, pieces, flows, meta=meta)


# ---- R2CCL for g > 1 (node level) ----------------------------------------------------------
def _server_instance(cluster: Cluster) -> tuple[Cluster, Fraction]:
    """The q-node cluster R2CCL runs on between servers: one node per server (its ℓ)."""
    _, ell = straggler_server(cluster)
    if ell <= 1:
        raise OptccError("stragglers", "R2CCL needs a degraded server (ℓ > 1)")
    if cluster.servers < 2:
        raise OptccError("p", "R2CCL needs at least two servers")
    return instance_cluster(cluster)


def r2ccl_server_slot_time(cluster: Cluster, chunks: int = 4, subpieces: int | None = 8) -> Fraction:
    """Exact slot time of `r2ccl_server_allreduce` (derived): 2(g−1)/(g·s_nv) + T_R2CCL(q)/g.

    The NIC part is PAPER.md's node-level R2CCL formula with N = q servers on 1/g of the data
    per NIC (`r2ccl_slot_time` of the q-node instance, divided by g)."""
    inst, _ = _server_instance(cluster)
    g = cluster.g
    return Fraction(2 * (g - 1), g) / cluster.nvlink_speedup + r2ccl_slot_time(inst, chunks, subpieces) / g


@states_slot_time("r2ccl_server_slot_time")
def r2ccl_server_allreduce(cluster: Cluster, chunks: int = 4, subpieces: int = 8) -> Schedule:
    """R2CCL with g GPUs per server and one degraded server, as a hierarchical Schedule.

    NVLink reduce-scatter inside every server (g − 1 permutation rounds: in round t GPU j adds
    its copy of instance (j+t) mod g's pieces into GPU (j+t) mod g), then g copies of the
    g = 1 R2CCL schedule, one per local index l over the q GPUs {s·g + l} on 1/g of the data
    (instance time t ↦ D + t/g, its own NIC each), then the NVLink all-gather (round t: GPU j
    copies instance j's pieces to GPU (j+t) mod g). NVLink rounds move all pieces of a shard
    at once at rates proportional to their sizes (summing to 1 per port), so a round lasts
    1/(g·s_nv). Capacity model "shared" (R2CCL's healthy ports are split between its two
    AllReduces). g = 1 is `r2ccl_allreduce`.
    """
    g = cluster.g
    if g == 1:
        return r2ccl_allreduce(cluster, chunks, subpieces)
    inst_cluster, _ = _server_instance(cluster)
    inst = r2ccl_allreduce(inst_cluster, chunks, subpieces)
    if inst.local_ops:
        raise OptccError("r2ccl", "the R2CCL instance has local ops; the lift does not map them")
    P, q = len(inst.pieces), cluster.servers
    sizes = list(inst.pieces)
    gf = Fraction(g)
    rnd = Fraction(1, g) / cluster.nvlink_speedup            # one NVLink round
    lead = (g - 1) * rnd
    t_inst = slot_time(inst)
    flows: list[Flow] = []

    def nvlink_rounds(start: Fraction, op: str) -> None:
        for t in range(1, g):
            for s in range(q):
                for src, dst, inst_id in nvlink_round(s, g, t, op):
                    for pi in range(P):
                        flows.append(Flow(src, dst, inst_id * P + pi, op, start + (t - 1) * rnd, "nvlink", sizes[pi]))

    nvlink_rounds(Fraction(0), "add")
    for l in range(g):
        for f in inst.flows:
            flows.append(lifted_flow(f, l, g, P, lead + f.start / gf))
    nvlink_rounds(lead + t_inst / gf, "copy")
    pieces = [x / gf for _ in range(g) for x in sizes]
    meta = {"algorithm": "r2ccl_servers", "chunks": chunks, "subpieces": subpieces, "capacity": "shared",
            "construction": "NVLink RS + g R2CCL instances over the servers + NVLink AG (derived)"}
    return Schedule(cluster, pieces, flows, meta=meta)
