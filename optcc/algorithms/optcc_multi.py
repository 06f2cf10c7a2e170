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
- m = 2, H ≥ 3: the "coincide" rotation (`_windows`): straggler 1 serves the closing link H−1
  in window 0 (not H), so link H−1 rests in windows H−1 and 0 and both stragglers idle in
  window H. Its F to straggler 1 goes one period later (`_f_slot`). Window 0 of link H−1 held
  two all-gather hops (job 1's hop H−2, job 2's hop H−3); they move into the freed window H one
  period later, job 2's last hop a period later too (`_ag_slot`). That repair came from a CP-SAT
  search (minimum number of changed offsets; 2 for H = 6, 8, 10, 12) and is port-checked by
  the tests for H = 3..12, 20, 31, 62; it is not proved for every H. H = 2 keeps the default
  rotation and the relay fill below.
- Fill (Figure 7's idea; our layout, `_chain_fill_plan`): piece P_r is rooted at straggler r.
  Each healthy a sends its input to S_r after F in S_r's window for link a and gets the result
  after the raw in a later period, both at S_r's own speed. Stragglers i and i+1 are both idle
  in one window (m = 2 coincide: window H; m ≥ 3: window H + 1 + i); there the pair exchanges
  one message per root and direction at ℓ_i (inputs along S_0 → … → S_r ← … ← S_{m−1},
  results back out). Sizes x_r = s·(2λ − ℓ_rδ)/(ℓ_rδ) shards with s ≤ 1 so ℓ1·Σx_r ≤ 2λ/δ.
  Only pieces whose flows end by the no-fill slot time are made.
- Fill for m = 2, H = 2 (old layout, `_fill_flows`): the stragglers are never idle together,
  so the straggler–straggler parts go through the idle straggler at ℓ1 (c1 = R_1/ℓ1 instead of
  R_1/ℓ2: every S0–S1 transfer needs both ports, and with that rotation they are free together
  only in one straggler's window remainder, ℓ1(c0 + c1) ≤ R_0 + R_1).
- Fill and drain: segment 0's raws and reduce-scatter take period 0. Segment k−1's all-gather
  (and, coincide rotation, segment k−2's moved tail) is placed by `_drain_slots` in the ring
  slots the pattern leaves free, slot by slot, ready job with most hops left first. Its last
  hop starts at slot `_drain_last_slot` = L(k+1) − 2 (coincide, k ≥ 2: L(k+1) − 1) for every
  size tried (asserted by the tests, not proved); the earlier synchronous epilogue ended at
  L(k+1) + H − 1. What remains is about one period: raws travel one period ahead of F, so the
  stragglers' receive ports idle in period 0 and their send ports in period k. Slot time:
  `optcc_multi_slot_time`.
"""
from __future__ import annotations

from fractions import Fraction

from optcc.algorithms import check_segments
from optcc.algorithms.optcc_single import tick_clock
from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.schedule import Flow, Schedule


def _check(cluster: Cluster, segments) -> list[tuple[int, Fraction]]:
    if cluster.g != 1:
        raise OptccError("g", "multi-straggler OptCC covers one GPU per server (g = 1)")
    check_segments(segments)
    st = cluster.stragglers
    if len(st) < 2:
        raise OptccError("stragglers", f"multi-straggler OptCC needs m ≥ 2 stragglers, got {len(st)}")
    if len(st) >= cluster.p:
        raise OptccError("stragglers", "at least one GPU must be healthy")
    return sorted(st.items(), key=lambda kv: (-kv[1], kv[0]))


COINCIDE_MIN_H = 3


def _coincide(H: int, m: int) -> bool:
    """m = 2 rotation with one idle window shared by both stragglers (derived, see docstring)."""
    return m == 2 and H >= COINCIDE_MIN_H


def _windows(H: int, m: int) -> list[list[int]]:
    """w[i][a]: the window (0..W−1) in which straggler i serves ring link a (derived).

    Default: a + i. m = 2 "coincide" rotation: straggler 1 serves link H−1 in window 0 (not H),
    so both stragglers idle in window H."""
    w = [[a + i for a in range(H)] for i in range(m)]
    if _coincide(H, m):
        w[1][H - 1] = 0
    return w


def _pair_windows(H: int, m: int) -> list[int]:
    """Window in which stragglers i and i+1 are both idle (chain fill), i = 0..m−2."""
    if _coincide(H, m):
        return [H]
    return [(H + 1 + i) % (H + m - 1) for i in range(m - 1)]


def _rs_slot(H: int, m: int, sigma: int, a: int, j: int) -> int:
    L = 2 * (H + m - 1)
    return L * sigma + 2 * a + j + (2 * m - 2) * (a + j >= H)


def _moved_tail(H: int, m: int) -> dict[int, int]:
    """Jobs whose all-gather tail `_ag_slot` moves a period later (job -> first moved hop); for
    segment k−2 the drain places these hops instead, so they do not outlast it."""
    return {1: H - 2, 2: H - 3} if _coincide(H, m) else {}


def _ag_slot(H: int, m: int, sigma: int, a: int, j: int) -> int:
    """All-gather hop j of job (σ, a). The coincide rotation moves two hops off link H−1's
    window 0 into its freed window H one period later (job 1's hop H−2, job 2's hop H−3; job 2's
    last hop follows one period later): found by a CP-SAT search that kept every other offset,
    checked by the port test for every H the tests try (derived, not proved in general)."""
    L = 2 * (H + m - 1)
    t = L * (sigma + 1) + 2 * a + 2 * m + H - 2 + j + (2 * m - 2) * (a + j >= H)
    if _coincide(H, m):
        if (a == 1 and j == H - 2) or (a == 2 and j == H - 3):
            t += L - 2
        elif a == 2 and j == H - 2:
            t += L
    return t


def _f_slot(H: int, m: int, w: list[list[int]], sigma: int, a: int, i: int) -> int:
    """F of job (σ, a) to straggler i: its window of period σ+1, or σ+2 if that window comes
    before the job's own (coincide rotation, link H−1)."""
    L = 2 * (H + m - 1)
    return L * (sigma + 1) + 2 * w[i][a] + L * (w[i][a] < a)


def _raw_slot(H: int, m: int, w: list[list[int]], sigma: int, a: int, i: int) -> int:
    """Raw of job (σ, a) from straggler i: when it serves link a−1 in period σ."""
    return 2 * (H + m - 1) * sigma + 2 * w[i][(a - 1) % H]


def _fill_coefs(H: int, k: int, ells: list[Fraction]) -> tuple[Fraction, Fraction]:
    """(c0, c1): sizes of the straggler-rooted fill pieces per period, in shards δ (m = 2 only).

    Derived (docs/optcc_multi.md): c0 = (2μ − ℓ1)/ℓ1 fills straggler 0's window remainder;
    straggler 1's piece is relayed through straggler 0 in window H, hence the ℓ1 in
    c1 = min(2μ − ℓ2, ℓ2)/ℓ1; μ = max(1, ℓ1/2) = λ/δ.
    """
    if len(ells) != 2 or H < 2 or k < 2 or _coincide(H, 2):
        return Fraction(0), Fraction(0)
    l0, l1 = ells
    mu = max(Fraction(1), l0 / 2)
    return (2 * mu - l0) / l0, min(2 * mu - l1, l1) / l0


def _slot(H: int, k: int, ells: list[Fraction]) -> tuple[Fraction, Fraction]:
    c0, c1 = _fill_coefs(H, k, ells)
    plan = _chain_fill_plan(H, k, ells)
    extra = plan[2] * sum(plan[0]) if plan else 0
    d = 1 / (k * H + (k - 1) * (c0 + c1) + extra)
    return d, max(d, ells[0] * d / 2)


def _nofill_end(H: int, k: int, ells: list[Fraction]) -> Fraction:
    """Slot time in units of δ without fill (derived; see `optcc_multi_slot_time`)."""
    m = len(ells)
    mu = max(Fraction(1), ells[0] / 2)
    w = _windows(H, m)
    ends = [max(_f_slot(H, m, w, k - 1, a, i) for a in range(H)) * mu + ell for i, ell in enumerate(ells)]
    if H >= 2:
        ends.append(_drain_last_slot(H, m, k) * mu + 1)
    return max(ends)


def _drain_last_slot(H: int, m: int, k: int) -> int:
    """Start slot of the drain's last hop: L(k+1) − 2, or L(k+1) − 1 with the coincide rotation
    and k ≥ 2 (its moved segment k−2 tail joins the drain). What `_drain_slots` gives for every
    m ≤ 4, H ≤ 40, k ≤ 8 tried; the tests assert it for H = 2..11, 17, 30, k ∈ {1, 2, 5}; not proved."""
    L = 2 * (H + m - 1)
    return L * (k + 1) - (1 if _coincide(H, m) and k >= 2 else 2)


def _chain_fill_plan(H: int, k: int, ells: list[Fraction]):
    """Fill for m ≥ 3 and the m = 2 coincide rotation (derived, docs/optcc_multi.md "Fill"):
    (sizes x_r in δ, events of piece π = 0, number of pieces n) or None.

    Piece P_r(π) is rooted at straggler r. Healthy a sends its input to S_r in the remainder of
    S_r's window for link a in period π (after F) and gets the result in that window of a later
    period (after the raw), both at speed ℓ_r. Stragglers i and i+1 are idle together in window
    `_pair_windows`[i]; there the pair exchanges, in each direction, one message per
    root at speed ℓ_i: inputs accumulate along the path S_0 → … → S_r ← … ← S_{m−1}, results
    travel back out. Sizes x_r = s·(2μ − ℓ_r)/ℓ_r with s ≤ 1 so that ℓ_1·Σx_r ≤ 2μ (the pair
    window). Only pieces whose last flow ends by the no-fill slot time are made, so the closed
    form keeps its ends and only δ changes. Events: (r, src, dst, op, window, offset, duration),
    src/dst ("s", i) or ("h", a), times in δ within window starts 2μ·window.
    """
    m = len(ells)
    if not (m >= 3 or _coincide(H, m)) or H < 1:
        return None
    mu = max(Fraction(1), ells[0] / 2)
    raw = [(2 * mu - e) / e for e in ells]
    tot = sum(raw)
    if tot <= 0:
        return None
    scale = min(Fraction(1), (2 * mu / ells[0]) / tot)
    xs = [x * scale for x in raw]
    W = H + m - 1
    win = _windows(H, m)
    pw = _pair_windows(H, m)

    def occ(i: int, amin: int) -> int:
        return amin + ((pw[i] - amin) % W)

    def off(i: int, r: int) -> Fraction:
        return ells[i] * sum(xs[:r], Fraction(0))

    ev = []
    for r in range(m):
        if xs[r] == 0:
            continue
        for a in range(H):
            ev.append((r, ("h", a), ("s", r), "add", win[r][a], ells[r], ells[r] * xs[r]))
        ready = max(win[r])
        A = -1
        for i in range(r):                               # S_0 → … → S_r
            A = occ(i, A + 1)
            ev.append((r, ("s", i), ("s", i + 1), "add", A, off(i, r), ells[i] * xs[r]))
        ready = max(ready, A)
        A = -1
        for i in range(m - 2, r - 1, -1):                # S_{m−1} → … → S_r
            A = occ(i, A + 1)
            ev.append((r, ("s", i + 1), ("s", i), "add", A, off(i, r), ells[i] * xs[r]))
        ready = max(ready, A)
        f = -(-(ready + 1 - min(win[r])) // W)
        for a in range(H):
            ev.append((r, ("s", r), ("h", (a + 1) % H), "copy", f * W + win[r][a], ells[r], ells[r] * xs[r]))
        A = ready
        for i in range(r, m - 1):                        # results S_r → … → S_{m−1}
            A = occ(i, A + 1)
            ev.append((r, ("s", i), ("s", i + 1), "copy", A, off(i, r), ells[i] * xs[r]))
        A = ready
        for i in range(r - 1, -1, -1):                   # results S_r → … → S_0
            A = occ(i, A + 1)
            ev.append((r, ("s", i + 1), ("s", i), "copy", A, off(i, r), ells[i] * xs[r]))
    last = max(2 * mu * w + o + du for *_, w, o, du in ev)
    end = _nofill_end(H, k, ells)
    n = 0
    while n < k and 2 * mu * W * n + last <= end:
        n += 1
    return (xs, ev, n) if n else None


def optcc_multi_slot_time(cluster: Cluster, segments: int) -> Fraction:
    """Closed-form slot time (n/B) of `optcc_multi_allreduce` (derived from the offsets above).

    The first flow starts at 0. The last flows are segment k−1's F to the stragglers
    (`_f_slot`, taking ℓ_i·δ; with the H = 2 relay fill, straggler 1's F moves to its window's
    end and straggler 0's relay of the last fill result starts at slot Lk + 2H plus ℓ2·δ, taking
    ℓ1·c1·δ) and the drain's last hop (`_drain_last_slot`, taking δ; an identity with
    `_drain_slots`, see `_drain_last_slot`; not proved). Fill pieces are made only
    where they end by then, so they change δ only.
    """
    stragglers = _check(cluster, segments)
    m, k = len(stragglers), segments
    H = cluster.p - m
    ells = [e for _, e in stragglers]
    d, lam = _slot(H, k, ells)
    c0, c1 = _fill_coefs(H, k, ells)
    L = 2 * (H + m - 1)
    ends = [_nofill_end(H, k, ells) * d]
    if c1 > 0:
        last_base = L * k + 2 * (H - 1)
        ends.append((last_base + 2) * lam + 2 * lam)
        ends.append((L * k + 2 * H) * lam + ells[1] * d + ells[0] * c1 * d)
    return max(ends)


def optcc_multi_allreduce(cluster: Cluster, segments: int = 1) -> Schedule:
    """The schedule of the module docstring: k segments, H shards each, exclusive ports."""
    stragglers = _check(cluster, segments)
    k, _p = segments, cluster.p
    m = len(stragglers)
    healthy = cluster.healthy
    H = len(healthy)
    d, lam = _slot(H, k, [e for _, e in stragglers])
    W = H + m - 1
    L = 2 * W
    c0, c1 = _fill_coefs(H, k, [e for _, e in stragglers])
    at = tick_clock(lam)
    flows: list[Flow] = []
    app = flows.append
    win = _windows(H, m)
    tail = _moved_tail(H, m)
    for sigma in range(k):
        for a in range(H):
            piece = sigma * H + a
            owner = healthy[a]
            # raws of (σ, a) to the owner, in link a−1's rest block of period σ (derived)
            for i, (s, _) in enumerate(stragglers):
                app(Flow(s, owner, piece, "add", at(_raw_slot(H, m, win, sigma, a, i))))
            for j in range(1, H):                                  # reduce-scatter
                b = (a + j) % H
                app(Flow(healthy[b], healthy[(b + 1) % H], piece, "add", at(_rs_slot(H, m, sigma, a, j))))
            for i, (s, ell) in enumerate(stragglers):              # full sum to the stragglers
                late = (i == 0 and a == 0 and c0 > 0) or (i == 1 and a == H - 1 and c1 > 0)
                app(Flow(owner, s, piece, "copy",
                         at(_f_slot(H, m, win, sigma, a, i)) + (2 * lam - ell * d if late else 0)))
            if sigma == k - 1:
                continue                                           # drain below
            for j in range(H - 1):                                 # all-gather
                if sigma == k - 2 and a in tail and j >= tail[a]:
                    continue                                       # drain below
                b = (a + j) % H
                app(Flow(healthy[b], healthy[(b + 1) % H], piece, "copy", at(_ag_slot(H, m, sigma, a, j))))
    if c0 > 0 or c1 > 0:
        flows += _fill_flows(healthy, stragglers, k, L, d, lam, at, c0 * d, c1 * d, k * H)
    plan = _chain_fill_plan(H, k, [e for _, e in stragglers])
    chain_pieces = []
    if plan:
        xs, ev, n = plan
        roots = [r for r in range(m) if xs[r] > 0]
        node = lambda x: healthy[x[1]] if x[0] == "h" else stragglers[x[1]][0]  # noqa: E731
        for pi in range(n):
            for r, src, dst, op, w, off, _ in ev:
                pid = k * H + pi * len(roots) + roots.index(r)
                app(Flow(node(src), node(dst), pid, op, at(L * pi + 2 * w) + off * d))
            chain_pieces += [xs[r] * d for r in roots]
    # Drain: segment k−1's all-gather in the free ring slots of the last periods (derived,
    # `_drain_slots`), instead of a synchronous epilogue after period k.
    for (sigma, a, j), slot in _drain_slots(H, m, k).items():
        b = (a + j) % H
        app(Flow(healthy[b], healthy[(b + 1) % H], sigma * H + a, "copy", at(slot)))
    meta = {"algorithm": "optcc", "segments": k, "capacity": "exclusive",
            "stragglers": [s for s, _ in stragglers],
            "construction": "multi-straggler periodic ring + straggler leaves (derived), see optcc_multi"}
    fills = ([c0 * d] * (k - 1) if c0 > 0 else []) + ([c1 * d] * (k - 1) if c1 > 0 else [])
    return Schedule(cluster, [d] * (k * H) + fills + chain_pieces, flows, meta=meta)


def _fill_flows(h, stragglers, k, L, d, lam, at, f0, f1, base) -> list[Flow]:
    """ℓ < 2 bubble filling for m = 2 (derived, docs/optcc_multi.md "Fill"): pieces P0(π),
    P1(π) (π = 0..k−2) rooted at straggler 0 / 1. Healthy inputs go in the window remainder
    of period π, results two periods later at most. The straggler–straggler exchanges and the
    one healthy pair each piece cannot reach directly are relayed through the other straggler
    in its idle window (S1 idle in window 0, S0 in window H), where the F flow moves to the
    window's end."""
    H = len(h)
    (s0, l0), (s1, l1) = stragglers
    out: list[Flow] = []
    app = out.append
    P0 = (lambda q: base + q) if f0 > 0 else None
    P1 = (lambda q: base + (k - 1 if f0 > 0 else 0) + q) if f1 > 0 else None
    ok = range(0, k - 1).__contains__
    for pi in range(k + 1):
        if P0:
            for a in range(1, H):                     # S0's windows 1..H−1 (link a)
                t = at(L * pi + 2 * a) + l0 * d
                if ok(pi):
                    app(Flow(h[a], s0, P0(pi), "add", t))
                if ok(pi - 1):
                    app(Flow(s0, h[(a + 1) % H], P0(pi - 1), "copy", t))
            t = at(L * pi)                            # window 0: S1 idle, relays for P0
            if ok(pi):
                app(Flow(h[0], s1, P0(pi), "add", t))
            if ok(pi - 1):
                app(Flow(s1, s0, P0(pi - 1), "add", t))
                app(Flow(s0, s1, P0(pi - 1), "copy", t + l0 * d))
            if ok(pi - 2):
                app(Flow(s1, h[1 % H], P0(pi - 2), "copy", t + l0 * d))
        if P1:
            for a in range(H - 1):                    # S1's windows 1..H−1 (link a)
                t = at(L * pi + 2 * (a + 1)) + l1 * d
                if ok(pi):
                    app(Flow(h[a], s1, P1(pi), "add", t))
                if ok(pi - 2):
                    app(Flow(s1, h[a + 1], P1(pi - 2), "copy", t))
            t = at(L * pi + 2 * H)                    # window H: S0 idle, relays for P1
            if ok(pi):
                app(Flow(h[H - 1], s0, P1(pi), "add", t))
            if ok(pi - 1):
                app(Flow(s0, s1, P1(pi - 1), "add", t))
                app(Flow(s1, s0, P1(pi - 1), "copy", t + l1 * d))
            if ok(pi - 2):
                app(Flow(s0, h[0], P1(pi - 2), "copy", t + l1 * d))
    return out


def _drain_slots(H: int, m: int, k: int) -> dict[tuple[int, int, int], int]:
    """Slot of each drained all-gather hop, keyed (σ, a, j): hop j of job (σ, a) on link a+j,
    σ = k−1 (and, coincide rotation, segment k−2's moved tail) (derived).

    The periodic pattern leaves the ring links free where segment k−1's all-gather hops and
    segment k's reduce-scatter hops would be, and in every rest block after period k. Busy slots
    of link b (node b's send port, node b+1's receive port): the reduce-scatter hops of segments
    k−2, k−1, the all-gather hops of segments k−3, k−2 and the rest blocks of periods ≤ k (every
    straggler flow of a healthy node, fill included, lies in its link's rest block). Job a is
    ready when its reduce-scatter and the stragglers' raws have landed. The hops are placed slot
    by slot, each free link taking the ready job with the most hops left (ties: smallest a).
    O(H²) per call; `optcc_multi_slot_time` uses its closed form `_drain_last_slot` instead.
    """
    if H < 2:
        return {}
    W = H + m - 1
    L = 2 * W
    busy: list[set[int]] = [set() for _ in range(H)]
    w = _windows(H, m)
    lo = L * max(0, k - 2)
    for sigma in range(max(0, k - 2), k):                       # reduce-scatter hops
        for a in range(H):
            for j in range(1, H):
                busy[(a + j) % H].add(_rs_slot(H, m, sigma, a, j))
    tail = _moved_tail(H, m)
    for sigma in range(max(0, k - 4), k - 1):                   # all-gather hops
        for a in range(H):
            for j in range(H - 1):
                if not (sigma == k - 2 and a in tail and j >= tail[a]):
                    busy[(a + j) % H].add(_ag_slot(H, m, sigma, a, j))
    for f in range(max(0, k - 3), k + 2):                       # rest blocks
        for b in range(H):
            for i in range(m):
                busy[b].update(range(L * f + 2 * w[i][b], L * f + 2 * w[i][b] + 2))
    jobs = []                                                   # [σ, a, next hop, ready]
    for a in range(H):
        rs_end = _rs_slot(H, m, k - 1, a, H - 1) + 1
        raw_land = max(_raw_slot(H, m, w, k - 1, a, i) for i in range(m)) + 2
        jobs.append([k - 1, a, 0, max(rs_end, raw_land)])
    if k >= 2:
        for a, j0 in tail.items():
            jobs.append([k - 2, a, j0, _ag_slot(H, m, k - 2, a, j0 - 1) + 1])
    out: dict[tuple[int, int, int], int] = {}
    left = sum(H - 1 - jb[2] for jb in jobs)
    t = max(lo, min(jb[3] for jb in jobs))
    while left:
        for b in range(H):
            if t in busy[b]:
                continue
            best = None
            for jb in jobs:
                if jb[2] < H - 1 and (jb[1] + jb[2]) % H == b and jb[3] <= t:
                    if best is None or jb[2] < best[2]:
                        best = jb
            if best is not None:
                out[(best[0], best[1], best[2])] = t
                best[2] += 1
                best[3] = t + 1
                left -= 1
        t += 1
    return out
