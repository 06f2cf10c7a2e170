"""OptCC for several stragglers (g = 1, m ≥ 2): healthy ring plus straggler leaves, exact times.

Paper (PAPER.md "Multiple stragglers", Appendix D): the H = p − m healthy GPUs reduce-scatter
and all-gather each segment along a ring of H − 1 hops; every straggler exchanges one shard per
healthy GPU in each direction (it "receives and sends p − m shards"); one flow per NIC direction.

Derived (ours; the paper's slot tables and patterns B, D, A′, C′ are lost):
- Combining rule. At the cut bound each straggler receives exactly one shard-size message per
  shard and sends one. Its received message must then be F − s_i (F = full sum, s_i its own
  input), which contains every other straggler's input; so at most one straggler can receive
  before all others have sent, i.e. m − 1 stragglers must send their *raw* input first. The
  literal rule "every straggler gets the healthy partial P and returns P + s_i, the healthy GPU
  forms Σ(P + s_i) − (m − 1)P" therefore leaves straggler i with P + s_i, not F: it would need a
  second download (twice the cut load). We use the subtraction-free order of the paper's
  single-straggler pattern B (stage 3 before stage 1, stage 2 last): every straggler sends its
  raw shard to the shard's ring start ("add"), the ring reduce-scatter folds it in, the shard
  owner sends the full sum F to every straggler ("copy") and starts the all-gather. Integer
  data stay exact; floats see only additions (no cancellation; see docs/optcc_multi.md).
- Timing. Every flow is placed by list scheduling in job order (segment σ, owner o) at the
  earliest exact time at which both its ports are free (backfilling), one flow per NIC
  direction, straggler flows at the slower end's speed. Fill and drain are not padded.
"""
from __future__ import annotations

from bisect import bisect_right
from fractions import Fraction

from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.schedule import Flow, Schedule


def _check(cluster: Cluster, segments) -> list[tuple[int, Fraction]]:
    if cluster.g != 1:
        raise OptccError("--g", "multi-straggler OptCC covers one GPU per server (g = 1)")
    if isinstance(segments, bool) or not isinstance(segments, int) or segments < 1:
        raise OptccError("--segments", f"expected a positive integer, got {segments!r}")
    st = cluster.stragglers
    if len(st) < 2:
        raise OptccError("--straggler", f"multi-straggler OptCC needs m ≥ 2 stragglers, got {len(st)}")
    if len(st) >= cluster.p:
        raise OptccError("--straggler", "at least one GPU must be healthy")
    return sorted(st.items(), key=lambda kv: (-kv[1], kv[0]))


class _Port:
    """Busy intervals of one NIC direction, sorted and disjoint."""

    __slots__ = ("starts", "ends")

    def __init__(self):
        self.starts: list[Fraction] = []
        self.ends: list[Fraction] = []

    def first_gap(self, t: Fraction, d: Fraction) -> Fraction:
        """Earliest s ≥ t with [s, s + d) free."""
        i = bisect_right(self.starts, t) - 1
        if i >= 0 and self.ends[i] > t:
            t = self.ends[i]
        i += 1
        while i < len(self.starts) and self.starts[i] < t + d:
            t = max(t, self.ends[i])
            i += 1
        return t

    def busy(self, s: Fraction, e: Fraction) -> None:
        i = bisect_right(self.starts, s)
        self.starts.insert(i, s)
        self.ends.insert(i, e)


def optcc_multi_allreduce(cluster: Cluster, segments: int = 1) -> Schedule:
    """The schedule of the module docstring: k segments, H shards each, exclusive ports."""
    stragglers = _check(cluster, segments)
    k, p = segments, cluster.p
    healthy = cluster.healthy
    H = len(healthy)
    d = Fraction(1, k * H)
    send = [_Port() for _ in range(p)]
    recv = [_Port() for _ in range(p)]
    flows: list[Flow] = []

    def place(src, dst, piece, op, ready, dur):
        t = ready
        while True:
            t1 = send[src].first_gap(t, dur)
            t2 = recv[dst].first_gap(t1, dur)
            t = t2
            if t2 == t1:
                break
        send[src].busy(t, t + dur)
        recv[dst].busy(t, t + dur)
        flows.append(Flow(src, dst, piece, op, t))
        return t + dur

    for sigma in range(k):
        for o in range(H):
            piece = sigma * H + o
            start = healthy[(o + 1) % H]
            ready = Fraction(0)
            for s, ell in stragglers:                      # raw straggler shards to the ring start
                ready = max(ready, place(s, start, piece, "add", Fraction(0), ell * d))
            for j in range(1, H):                          # reduce-scatter, ends at owner o
                a = healthy[(o + j) % H]
                ready = place(a, healthy[(o + j + 1) % H], piece, "add", ready, d)
            f_ready = ready
            for s, ell in stragglers:                      # full sum to every straggler
                place(healthy[o], s, piece, "copy", f_ready, ell * d)
            for j in range(H - 1):                         # all-gather from the owner
                a = healthy[(o + j) % H]
                ready = place(a, healthy[(o + j + 1) % H], piece, "copy", ready, d)
    meta = {"algorithm": "optcc", "segments": k, "capacity": "exclusive",
            "stragglers": [s for s, _ in stragglers],
            "construction": "multi-straggler ring + raw-first straggler leaves, list-scheduled (derived), see optcc_multi"}
    return Schedule(cluster, [d] * (k * H), flows, meta=meta)
