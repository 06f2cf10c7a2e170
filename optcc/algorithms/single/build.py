"""OptCC for one straggler, one GPU per server: a shard-level periodic four-stage pipeline.

What is the paper's (PAPER.md "OptCC", Figures 4-7): the four stages per segment (1: ring
reduce-scatter among the H = p−1 healthy GPUs over p−2 hops, 2: each healthy GPU uploads its
partial shard to the straggler S, 3: S adds its input and sends each shard's sum back, 4: ring
all-gather among the healthy GPUs); one flow per NIC direction at a time; stages of different
segments overlap on disjoint ports; for ℓ < 2 the straggler's bubbles are filled with a
point-to-point AllReduce between the healthy GPUs and S (Figure 7).

What is ours (derived; the paper's slot tables and its four patterns A-D are lost): the slot
pattern below. Units: δ = shard size (a healthy-to-healthy shard flow takes δ), slot length
λ = max(δ, ℓδ/2), H healthy GPUs in ring order h = 0..H−1 (the healthy ranks, increasing),
ring link h → h+1 (mod H).

- Jobs. Shard o of segment σ is a job with base slot B(σ,o) = 2Hσ + 2(H−1−o). Each period
  of 2H slots has H windows of 2 slots; window of node o = slots [B, B+2). In it S receives
  job (σ,o)'s upload from o and sends job (σ,o+1)'s download to o+1 (uploaded one window
  earlier). Both block only ring link o → o+1, which carries nothing in that window; all other
  links carry one shard hop per slot, every slot (at ℓ = 2 every port is busy all the time).
- Ring hops, relative to the job's base slot (τ_RS(j): hop j = link o+j → o+j+1, j = 1..H−1,
  ends at o before the upload at 0; τ_AG(j): hop j = link o+j → o+j+1, j = 0..H−2, after the
  download lands at 4):
    H odd:  τ_RS(j) = 2j + 1 − 2H,                    τ_AG(j) = 2j + 4;
    H even: τ_RS(j) = 2j − 1 − 2H (j ≤ H/2), 2j + 1 − 2H (j > H/2);
            τ_AG(j) = 2j + 4 (j ≤ H/2 − 2),   2j + 6 (j ≥ H/2 − 1).
  Per link (offset q = slot − window start of that link, mod 2H) these put RS hops and AG hops
  on distinct residues that together with the link's own window {0, 1} cover Z_2H exactly
  (H odd: RS = 4j+1, AG = 4j+4; H even: RS = {3,7,..} then {5,9,..}, AG = {4,8,..} then
  {2,6,..}), so no link carries two hops at once and none during its window.
- Prologue/epilogue: segment 0's reduce-scatter and segment k−1's all-gather are plain
  synchronous ring steps (H−1 steps of δ each) before the pipeline starts and after the last
  download, so fill and drain cost 2(H−1)δ ≈ 2 shards of time in total, not O(p) segments.
- ℓ < 2 (Figure 7's idea, our layout): the window stays 2δ (the ring needs it), the shard
  upload takes only ℓδ, so each window also carries x = (2/ℓ − 1)δ of point-to-point data:
  node o uploads its raw input of P2P piece σ right after its shard upload; in period σ+1 S
  sends the P2P sum to o right after job (σ+1,o)'s download. k−1 P2P pieces (σ = 0..k−2).
  This exactly reaches the exclusive-model fluid optimum (bounds.closed_form.exclusive_single_straggler_optimum).
- ℓ ≥ 2: slot λ = ℓδ/2, the shard upload fills the window, healthy hops take δ ≤ λ.
- p = 2: the two GPUs exchange their whole vectors at once (time ℓ, the cut bound).
- ℓ = 1 (no straggler): rank 0 plays S; the same construction then takes ≈ T0·(1 + 1/k).

Slot time (derived from the construction; `optcc_slot_time`, tested equal to the generated
schedule): ℓ ≥ 2: (2(H−1) + (Hk+1)ℓ)δ with δ = 1/(kH); ℓ < 2, k ≥ 2: (2Hk + 2H)δ with
δ = 1/(kH + (k−1)(2/ℓ−1)); ℓ < 2, k = 1: (4H − 2 + ℓ)/H; p = 2: ℓ.
So at ℓ = 2 the ratio to Theorem 1's bound ℓ is 1 + 1/k.

Slot table, p = 5, ℓ = 2, straggler 0, k = 2 (rows = GPUs, columns = slots of δ = 1/(kH) =
1/8 n/B; cell = destination of the flow the GPU sends, '.' idle; a straggler flow spans 2
slots). Slots 0-2: prologue RS; 3-20: pipeline (period 8 slots, windows of 2 slots: GPU 4
uploads (0 has nothing to send yet), then GPU 3 uploads while 0 sends GPU 4 its shard's sum,
...); 21-23: epilogue AG.
Slot time 24·δ = 3 = ℓ(1 + 1/k); regenerate with `slot_table(optcc_allreduce(c, 2))`:

    GPU 012345678901234567890123
    0   .....4433221144332211...
    1   222.2...2002.222.00..222
    2   333...300.3333.003...333
    3   444..00.444.4004...4.444
    4   11100.11..1001..11...111
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any
from collections.abc import Callable
from fractions import Fraction

from optcc.algorithms.stated import states_slot_time
from optcc.algorithms.limits import check_segments
from optcc.algorithms.families import INT, Params
from optcc.algorithms.single import families as _F
from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.schedule import Flow, Schedule

if TYPE_CHECKING:
    from optcc.algorithms.families.arrays import FlowArrays


def _straggler(cluster: Cluster) -> tuple[int, Fraction]:
    if cluster.g != 1:
        raise OptccError("g", "the single-straggler OptCC covers one GPU per server (g = 1); "
                                "for g > 1 use optcc_servers.optcc_server_allreduce (build_schedule picks it)")
    stragglers = cluster.stragglers
    if len(stragglers) > 1:
        raise OptccError("stragglers", f"single-straggler OptCC got {len(stragglers)} stragglers "
                                        f"(ranks {sorted(stragglers)}); several stragglers are optcc_multi.optcc_multi_allreduce (build_schedule picks it)")
    if not stragglers:
        return 0, Fraction(1)
    (rank, ell), = stragglers.items()
    return rank, ell


def _shard_size(H: int, k: int, ell: Fraction) -> Fraction:
    """δ: the shard size (fraction of n); the families' shard_size (H = 1: one exchange)."""
    return Fraction(1, k * H) if H == 1 else _F.shard_size(INT, Params(H + 1, k, Fraction(ell), 0))


def optcc_slot_time(cluster: Cluster, segments: int) -> Fraction:
    """Closed-form slot time (n/B) of `optcc_allreduce(cluster, segments)` (derived above)."""
    _, ell = _straggler(cluster)
    H, k = cluster.p - 1, check_segments(segments)
    if H == 1:
        return ell
    d = _shard_size(H, k, ell)
    if ell >= 2:
        return (2 * (H - 1) + (H * k + 1) * ell) * d
    if k == 1:
        return (4 * H - 2 + ell) * d
    return (2 * H * k + 2 * H) * d


@states_slot_time("optcc_slot_time")
def optcc_allreduce(cluster: Cluster, segments: int = 1) -> Schedule:
    """The schedule described in the module docstring: k segments, exclusive port model."""
    s_rank, ell = _straggler(cluster)
    k = check_segments(segments)
    p = cluster.p
    H = p - 1
    meta = optcc_meta(cluster, k)
    if H == 1:
        h = 1 - s_rank
        flows = [Flow(h, s_rank, 0, "add", Fraction(0)), Flow(s_rank, h, 0, "add", Fraction(0))]
        return Schedule(cluster, [Fraction(1)], flows, meta=meta)
    # The flows are the enumeration of the proved flow families (optcc.algorithms.single.families),
    # the formulas verifier.parametric proves for every p ≥ 3, k, ℓ and straggler rank.
    pieces, flows = _F.optcc_flows(p, k, s_rank, ell)
    return Schedule(cluster, pieces, flows, meta=meta)


def optcc_meta(cluster: Cluster, segments: int) -> dict[str, Any]:
    """The schedule's meta (its generated form, optcc.generated, states the same)."""
    return {"algorithm": "optcc", "segments": segments, "capacity": "exclusive",
            "straggler": _straggler(cluster)[0],
            "construction": "shard-level periodic ring pattern (derived), see optcc_single"}


def optcc_flow_arrays(cluster: Cluster, segments: int = 1) -> FlowArrays | None:
    """optcc_allreduce(cluster, segments)'s flows as FlowArrays (optcc.algorithms.families.arrays:
    the same family formulas on index arrays, no Flow objects); None for p = 2 (one exchange)."""
    s_rank, ell = _straggler(cluster)
    k = check_segments(segments)
    if cluster.p < 3:
        return None
    from optcc.algorithms.families.arrays import optcc_flow_arrays as arrays
    return arrays(cluster.p, k, s_rank, ell)


def tick_clock(unit: Fraction) -> Callable[[int], Fraction]:
    """at(ticks) = ticks·unit as one shared Fraction per tick value: many flows start together,
    and optcc.timing converts each distinct start object once."""
    cache: dict[int, Fraction] = {}

    def at(ticks: int) -> Fraction:
        f = cache.get(ticks)
        if f is None:
            f = cache[ticks] = ticks * unit
        return f
    return at


def slot_table(schedule: Schedule, slot: Fraction | None = None) -> str:
    """Text table: rows = ranks, columns = slots of length `slot` (default: smallest piece's
    healthy time), cell = destination of the NIC flow the rank sends in that slot."""
    c = schedule.cluster
    slot = slot or min(schedule.pieces)
    from optcc.timing import durations
    durs = durations(schedule)
    end = max(f.start + dd for f, dd in zip(schedule.flows, durs))
    n = -(-end // slot)
    rows = [["."] * int(n) for _ in range(c.p)]
    for f, dd in zip(schedule.flows, durs):
        first = (f.start / slot).__floor__()
        last = ((f.start + dd) / slot).__ceil__()
        for col in range(first, last):
            rows[f.src][col] = str(f.dst)
    width = len(str(c.p - 1))
    head = "GPU " + "".join(f"{i % 10}" for i in range(int(n)))
    lines = [head] + [f"{r:>{width}}   " + "".join(row) for r, row in enumerate(rows)]
    return "\n".join(lines)
