"""OptCC for several stragglers (g = 1, m ≥ 2): periodic healthy ring plus straggler leaves.

Paper (PAPER.md "Multiple stragglers", Appendix D): the H = p − m healthy GPUs reduce-scatter
and all-gather each segment along a ring of H − 1 hops; every straggler exchanges one shard per
healthy GPU in each direction; one flow per NIC direction.

Derived (ours; the paper's slot tables and patterns B, D, A′, C′ are lost), docs/optcc_multi.md:
- Combining rule (subtraction-free). At the cut bound each straggler receives one message per
  shard, so it must receive F (the full sum) while m − 1 stragglers send raw input before
  anyone receives. Every straggler sends its raw shard to the shard's owner ("add"), the ring
  reduce-scatter ends at the owner, the owner copies F to every straggler and starts the
  all-gather. Only additions.
- Slots of λ = max(δ, ℓ1·δ/2) (δ = shard size = a healthy hop), windows of 2 slots, period
  L = 2W slots, W = H + m − 1 windows. Straggler i (sorted ℓ1 ≥ … ≥ ℓm) serves ring link a
  (healthy a → a+1) in window a + i: it receives F of shard a from a and sends the raw of the
  next segment's shard a+1 to its owner a+1. Link a rests in windows a..a+m−1 (slots [2a, 2a+2m)
  of each period, never across a period boundary); straggler i idles in m − 1 windows
  (m = 2 changes one window, see "coincide" below).
- Job (σ, a) (shard a of segment σ) has base B = L(σ+1) + 2a. With w = [a + j ≥ H] (the hop
  has crossed the ring's closing link H−1 → 0):
    RS hop j = 1..H−1 (link a+j): B − L + j + (2m−2)w;  AG hop j = 0..H−2 (link a+j):
    B + 2m + H − 2 + j + (2m−2)w;  F to straggler i: B + 2i;  raw of (σ, a) from straggler i:
    in link a−1's rest block of the previous period.
  On link b the local offset (slot − 2b mod L) of RS hop j is L − j and of AG hop j is
  2m + H − 2 − j: the RS hops fill [2m+H−1, L), the AG hops [2m, 2m+H−1), the rest [0, 2m).
  The chains move one link per slot and wait 2m − 2 slots where they cross the closing link:
  that wait is exactly the closing link's extra shift (−2H ≡ 2m − 2 mod L), which is why
  a fixed per-hop offset (the single-straggler pattern) cannot work here and these do.
- m = 2, H ≥ 3: the "coincide" rotation (`Pattern.windows`): straggler 1 serves the closing
  link H−1 in window 0 (not H), so link H−1 rests in windows H−1 and 0 and both stragglers idle
  in window H. Its F to straggler 1 goes one period later (`Pattern.f_slot`). Window 0 of link
  H−1 held two all-gather hops (job 1's hop H−2, job 2's hop H−3); they move into the freed
  window H one period later, job 2's last hop a period later too (`Pattern.ag_slot`; how the
  repair was found: docs/optcc_multi.md). Port-checked by the tests for H = 3..12, 20, 31, 62;
  not proved for every H. H = 2 keeps the default rotation and the relay fill below.
- Fill (Figure 7's idea; our layout, `optcc_multi_fill.chain_fill_plan`): piece P_r is rooted
  at straggler r.
  Each healthy a sends its input to S_r after F in S_r's window for link a and gets the result
  after the raw in a later period, both at S_r's own speed. Stragglers i and i+1 are both idle
  in one window (m = 2 coincide: window H; m ≥ 3: window H + 1 + i); there the pair exchanges
  one message per root and direction at ℓ_i (inputs along S_0 → … → S_r ← … ← S_{m−1},
  results back out). Sizes x_r = s·(2λ − ℓ_rδ)/(ℓ_rδ) shards with s ≤ 1 so ℓ1·Σx_r ≤ 2λ/δ.
  Only pieces whose flows end by the no-fill slot time are made.
- Fill for m = 2, H = 2 (relay layout, `optcc_multi_fill.relay_fill_flows`): the stragglers
  are never idle together, so the straggler–straggler parts go through the idle straggler at
  ℓ1 (c1 = R_1/ℓ1 instead of R_1/ℓ2: every S0–S1 transfer needs both ports, and with that
  rotation they are free together only in one straggler's window remainder,
  ℓ1(c0 + c1) ≤ R_0 + R_1).
- Fill and drain: segment 0's raws and reduce-scatter take period 0. Segment k−1's all-gather
  (and, coincide rotation, segment k−2's moved tail) is placed by
  `optcc_multi_drain.drain_slots` in the ring slots the pattern leaves free, slot by slot, ready
  job with most hops left first. Its last hop starts at slot `drain_last_slot` = L(k+1) − 2
  (coincide, k ≥ 2: L(k+1) − 1) for every size tried (asserted by the tests, not proved). What
  remains is about one period: raws travel one period ahead of F, so the stragglers' receive
  ports idle in period 0 and their send ports in period k. Slot time:
  `optcc_multi_slot_time`.
- Latency: the offsets above put a job's consecutive ring hops in consecutive slots,
  so under pipelined latency (Li + L > 0) a delay runs diagonally across the links, ≈ (H−1)/2
  latencies per period. With Li + L > 0 the pattern uses hop spread 3 (`Pattern.spread`:
  consecutive hops 3 slots apart, 2 slots of slack each; F and the all-gather one period later;
  no coincide rotation): O(p + k) latencies for one period more (docs/optcc_multi.md "Latency").
"""
from __future__ import annotations

from fractions import Fraction

from optcc.algorithms.stated import states_slot_time
from optcc.algorithms.limits import check_segments
from optcc.algorithms.multi.drain import drain_last_slot as _drain_last_slot  # noqa: F401  (tests)
from optcc.algorithms.multi.drain import drain_slots as _drain_slots
from optcc.algorithms.multi.drain import nofill_end
from optcc.algorithms.multi.fill import SlotGrid, fill_coefs, relay_fill_flows
from optcc.algorithms.multi.fill import chain_fill_plan as _chain_fill_plan
from optcc.algorithms.multi.pattern import Pattern
from optcc.algorithms.single.build import tick_clock
from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.schedule import Flow, Schedule


def _check(cluster: Cluster, segments: object) -> list[tuple[int, Fraction]]:
    if cluster.g != 1:
        raise OptccError("g", "multi-straggler OptCC covers one GPU per server (g = 1)")
    check_segments(segments)
    st = cluster.stragglers
    if len(st) < 2:
        raise OptccError("stragglers", f"multi-straggler OptCC needs m ≥ 2 stragglers, got {len(st)}")
    if len(st) >= cluster.p:
        raise OptccError("stragglers", "at least one GPU must be healthy")
    return sorted(st.items(), key=lambda kv: (-kv[1], kv[0]))


def hop_spread(cluster: Cluster) -> int:
    """Slots between consecutive ring hops of a job: 3 (latency-robust, every hop 2 slots of
    slack) when the cluster's latency model delays flows without holding ports (Li + L > 0),
    else 1 (the issue-8 pattern, one period shorter). Derived: docs/optcc_multi.md "Latency"."""
    return 3 if cluster.issue_delay + cluster.latency > 0 else 1


def _slot(H: int, k: int, ells: list[Fraction], spread: int = 1) -> tuple[Fraction, Fraction]:
    """(δ, λ): shard size and slot length, fill included."""
    c0, c1 = fill_coefs(H, k, ells, spread)
    plan = _chain_fill_plan(H, k, ells, spread)
    extra = plan.pieces * sum(plan.sizes) if plan else 0
    d = 1 / (k * H + (k - 1) * (c0 + c1) + extra)
    return d, max(d, ells[0] * d / 2)


def optcc_multi_slot_time(cluster: Cluster, segments: int) -> Fraction:
    """Closed-form slot time (n/B) of `optcc_multi_allreduce` (derived from the offsets above).

    The first flow starts at 0. The last flows are segment k−1's F to the stragglers
    (`Pattern.f_slot`, taking ℓ_i·δ; with the H = 2 relay fill, straggler 1's F moves to its window's
    end and straggler 0's relay of the last fill result starts at slot Lk + 2H plus ℓ2·δ, taking
    ℓ1·c1·δ) and the drain's last hop (`optcc_multi_drain.drain_last_slot`, taking δ; an identity
    with `drain_slots`, see `drain_last_slot`; not proved). Fill pieces are made only
    where they end by then, so they change δ only.
    """
    stragglers = _check(cluster, segments)
    m, k = len(stragglers), segments
    H = cluster.p - m
    ells = [e for _, e in stragglers]
    spread = hop_spread(cluster)
    d, lam = _slot(H, k, ells, spread)
    c0, c1 = fill_coefs(H, k, ells, spread)
    L = Pattern(H, m, spread).L
    ends = [nofill_end(H, k, ells, spread) * d]
    if c1 > 0:
        f_last = Pattern(H, m, spread).f_slot(k - 1, H - 1, 1)   # L·k + 2H (spread 3: a period later)
        ends.append(f_last * lam + 2 * lam)
        ends.append((L * k + 2 * H) * lam + ells[1] * d + ells[0] * c1 * d)
    return max(ends)


@states_slot_time("optcc_multi_slot_time")
def optcc_multi_allreduce(cluster: Cluster, segments: int = 1) -> Schedule:
    """The schedule of the module docstring: k segments, H shards each, exclusive ports."""
    stragglers = _check(cluster, segments)
    k, _p = segments, cluster.p
    m = len(stragglers)
    healthy = cluster.healthy
    H = len(healthy)
    spread = hop_spread(cluster)
    d, lam = _slot(H, k, [e for _, e in stragglers], spread)
    pat = Pattern(H, m, spread)
    L = pat.L
    c0, c1 = fill_coefs(H, k, [e for _, e in stragglers], spread)
    at = tick_clock(lam)
    flows: list[Flow] = []
    app = flows.append
    tail = pat.moved_tail()
    for sigma in range(k):
        for a in range(H):
            piece = sigma * H + a
            owner = healthy[a]
            # raws of (σ, a) to the owner, in link a−1's rest block of period σ (derived)
            for i, (s, _) in enumerate(stragglers):
                app(Flow(s, owner, piece, "add", at(pat.raw_slot(sigma, a, i))))
            for j in range(1, H):                                  # reduce-scatter
                b = (a + j) % H
                app(Flow(healthy[b], healthy[(b + 1) % H], piece, "add", at(pat.rs_slot(sigma, a, j))))
            for i, (s, ell) in enumerate(stragglers):              # full sum to the stragglers
                late = (i == 0 and a == 0 and c0 > 0) or (i == 1 and a == H - 1 and c1 > 0)
                app(Flow(owner, s, piece, "copy",
                         at(pat.f_slot(sigma, a, i)) + (2 * lam - ell * d if late else 0)))
            if sigma == k - 1:
                continue                                           # drain below
            for j in range(H - 1):                                 # all-gather
                if sigma == k - 2 and a in tail and j >= tail[a]:
                    continue                                       # drain below
                b = (a + j) % H
                app(Flow(healthy[b], healthy[(b + 1) % H], piece, "copy", at(pat.ag_slot(sigma, a, j))))
    if c0 > 0 or c1 > 0:
        flows += relay_fill_flows(healthy, stragglers, k, SlotGrid(L, d, at), (c0 * d, c1 * d), k * H)
    plan = _chain_fill_plan(H, k, [e for _, e in stragglers], spread)
    chain_pieces = []
    if plan:
        xs = plan.sizes
        roots = [r for r in range(m) if xs[r] > 0]
        for pi in range(plan.pieces):
            for e in plan.events:
                pid = k * H + pi * len(roots) + roots.index(e.root)
                app(Flow(e.src.rank(healthy, stragglers), e.dst.rank(healthy, stragglers), pid, e.op,
                         at(L * pi + 2 * e.window) + e.offset * d))
            chain_pieces += [xs[r] * d for r in roots]
    # Drain: segment k−1's all-gather in the free ring slots of the last periods (derived,
    # optcc_multi_drain).
    for (sigma, a, j), slot in _drain_slots(H, m, k, spread).items():
        b = (a + j) % H
        app(Flow(healthy[b], healthy[(b + 1) % H], sigma * H + a, "copy", at(slot)))
    meta = {"algorithm": "optcc", "segments": k, "capacity": "exclusive",
            "stragglers": [s for s, _ in stragglers],
            "construction": "multi-straggler periodic ring + straggler leaves (derived), see optcc_multi"}
    if spread != 1:
        meta["hop_spread"] = spread       # latency-robust pattern (Li + L > 0)
    fills = ([c0 * d] * (k - 1) if c0 > 0 else []) + ([c1 * d] * (k - 1) if c1 > 0 else [])
    return Schedule(cluster, [d] * (k * H) + fills + chain_pieces, flows, meta=meta)
