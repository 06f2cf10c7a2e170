"""Ring baselines the paper compares against (NCCL), as Schedules so they can be timed,
simulated and proved like OptCC.

- `pxn_ring_allreduce`: NCCL's ring with the straggler on it (PXN rerouting keeps the job
  alive; the ring runs at the slowest link, so it costs ℓ·T0). g = 1: optcc.algorithms.ring.build.
- `flat_ring_allreduce`: NCCL's ring over all p GPUs when g > 1, one channel per NIC
  (derived reading of the paper's NCCLNoFailure in Figure 10, PAPER.md "Derived, to read the
  claims right"): 2(p−1)/(p·g) · ℓ_max.
- `hierarchical_ring_allreduce`: NVLink reduce-scatter in each server, g parallel inter-server
  rings (one per NIC) over q = p/g servers, NVLink all-gather: 2(g−1)/(g·s_nv) + 2(q−1)/p · ℓ_max
  (derived; s_nv = B_nvlink/B). Its NIC part is the hierarchical optimum T0 = 2(p−g)/(g·p).
"""
from __future__ import annotations

from fractions import Fraction

from optcc.algorithms.stated import states_slot_time
from optcc.algorithms.ring.build import ring_allreduce, ring_slot_time, ring_step
from optcc.cluster import Cluster
from optcc.schedule import Flow, Schedule

ONE = Fraction(1)


def pxn_ring_allreduce(cluster: Cluster, segments: int = 1) -> Schedule:
    """NCCL ring with the straggler on the ring: g = 1 ring, g > 1 flat ring (both ℓ_max·fault-free)."""
    if cluster.g == 1:
        return ring_allreduce(cluster, segments)
    return flat_ring_allreduce(cluster)


# ---- flat ring for g > 1 -------------------------------------------------------------------
@states_slot_time("flat_ring_slot_time")
def flat_ring_allreduce(cluster: Cluster) -> Schedule:
    """Ring over all p GPUs, g channels (one per NIC); each channel carries 1/g of the data.

    Channel c visits each server's GPUs starting at local index c, so the server-boundary hop
    of channel c leaves from local (c−1) mod g over its NIC and enters local c: every NIC sends
    and receives exactly one channel. The g−1 NVLink hops a GPU serves at once share its
    NVLink port at rate 1/(g−1). With ONE server there is no NIC hop: the ring closes inside
    the server, every GPU serves g NVLink hops at once, so they share its port at rate 1/g
    (derived; 1/(g−1) overloaded the port to g/(g−1)). Steps are synchronous (NCCL): a step
    lasts its slowest hop (flat_ring_step). Total 2(p−1)·step (derived).
    """
    p, g = cluster.p, cluster.g
    if g == 1:
        return ring_allreduce(cluster, 1)
    step, nv_rate = flat_ring_step(cluster)
    shard = Fraction(1, g * p)
    flows = []
    for c in range(g):
        order = [s * g + (c + i) % g for s in range(cluster.servers) for i in range(g)]
        base = c * p
        for t in range(2 * (p - 1)):
            start = t * step
            offset, op = ring_step(t, p)
            for pos in range(p):
                src, dst = order[pos], order[(pos + 1) % p]
                nic = src // g != dst // g
                link, rate = ("nic", ONE) if nic else ("nvlink", nv_rate)
                flows.append(Flow(src, dst, base + (pos + offset) % p, op, start, link, rate))
    meta = {"algorithm": "flat_ring", "channels": g, "capacity": "exclusive"}
    return Schedule(cluster, [shard] * (g * p), flows, meta=meta)


def flat_ring_slot_time(cluster: Cluster) -> Fraction:
    """Derived: 2(p−1)·step (units n/B; 2(p−1)/(g·p)·ℓ_max where NVLink keeps pace), the 2(p−1)
    steps of flat_ring_step each. With one
    server there is no NIC hop: the last step ends when its NVLink hops land, shard·g/s_nv after
    it starts, so T = (2(p−1) − 1)·step + shard·g/s_nv (derived from flat_ring_allreduce;
    the hop fits in its step, flat_ring_step). g = 1 is the ring's ℓ·T0."""
    p, g = cluster.p, cluster.g
    if g == 1:
        return ring_slot_time(cluster)
    step, nv_rate = flat_ring_step(cluster)
    if cluster.servers > 1:
        return 2 * (p - 1) * step
    return (2 * (p - 1) - 1) * step + cluster.nvlink_time(Fraction(1, g * p), nv_rate)


def flat_ring_step(cluster: Cluster) -> tuple[Fraction, Fraction]:
    """(step, NVLink rate) of the flat ring (g > 1). A step lasts its slowest hop: the NIC hop
    shard·ℓ_max, or the NVLink hop shard/(s_nv·rate) where NVLink at that share is the slower
    (s_nv < g − 1 with several servers, e.g. 450 GB/s NVLink against 100 GB/s NICs at g = 8:
    the ring is NVLink-bound, 2(p−1)·shard·(g−1)/s_nv). shard = 1/(g·p). Derived."""
    g = cluster.g
    nv_rate = Fraction(1, g - 1) if cluster.servers > 1 else Fraction(1, g)
    shard = Fraction(1, g * cluster.p)
    return shard * max(max(cluster.slowdown), 1 / (cluster.nvlink_speedup * nv_rate)), nv_rate


# ---- hierarchical ring ---------------------------------------------------------------------
@states_slot_time("hierarchical_ring_slot_time")
def hierarchical_ring_allreduce(cluster: Cluster) -> Schedule:
    """NVLink reduce-scatter (g−1 steps), g inter-server rings over q servers, NVLink all-gather.

    Pieces: p pieces of 1/p; shard j of a server = pieces j·q .. j·q+q−1. After the NVLink
    reduce-scatter GPU with local index l holds its server's partial sum of shard (l+1) mod g;
    the q GPUs with local index l then run a ring AllReduce of that shard over the NICs.
    """
    p, g, q = cluster.p, cluster.g, cluster.servers
    if g == 1:
        return ring_allreduce(cluster, 1)
    piece = Fraction(1, p)
    nv_rate = Fraction(1, q)                 # q pieces of a shard move at once on one NVLink port
    step_nv = Fraction(1, g) / cluster.nvlink_speedup
    step_nic = piece * max(cluster.slowdown)
    flows = []

    def shard_pieces(j: int) -> range:
        return range(j * q, j * q + q)

    t = Fraction(0)
    for step in range(g - 1):                # NVLink reduce-scatter inside every server
        for s in range(q):
            for l in range(g):
                src, dst = s * g + l, s * g + (l + 1) % g
                for pc in shard_pieces((l - step) % g):
                    flows.append(Flow(src, dst, pc, "add", t, "nvlink", nv_rate))
        t += step_nv
    if q > 1:
        for step in range(2 * (q - 1)):      # g inter-server rings, one per local index
            offset, op = ring_step(step, q)
            for l in range(g):
                j = (l + 1) % g              # the shard GPU l reduced
                for s in range(q):
                    src, dst = s * g + l, ((s + 1) % q) * g + l
                    flows.append(Flow(src, dst, j * q + (s + offset) % q, op, t))
            t += step_nic
    for step in range(g - 1):                # NVLink all-gather inside every server
        for s in range(q):
            for l in range(g):
                src, dst = s * g + l, s * g + (l + 1) % g
                for pc in shard_pieces((l + 1 - step) % g):
                    flows.append(Flow(src, dst, pc, "copy", t, "nvlink", nv_rate))
        t += step_nv
    meta = {"algorithm": "hierarchical_ring", "capacity": "exclusive"}
    return Schedule(cluster, [piece] * p, flows, meta=meta)


def hierarchical_ring_slot_time(cluster: Cluster) -> Fraction:
    """Derived: 2(g−1)/(g·s_nv) + 2(q−1)/p·ℓ_max (units n/B; s_nv = B_nvlink/B)."""
    p, g, q = cluster.p, cluster.g, cluster.servers
    if g == 1:
        return Fraction(2 * (p - 1), p) * max(cluster.slowdown)
    return (Fraction(2 * (g - 1), g) / cluster.nvlink_speedup
            + Fraction(2 * (q - 1), p) * max(cluster.slowdown))
