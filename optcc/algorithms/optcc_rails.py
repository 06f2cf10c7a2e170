"""OptCC for g GPUs per server and any set of slow GPUs: several straggler servers, servers whose
GPUs have different ℓ (a partial failure, lost NICs without PXN), any mix.

Construction (derived; docs/failures.md "Construction"):
- Rails. Local index l of every server forms rail l: the q = p/g GPUs {s·g + l}. Rail l runs
  the g = 1 OptCC of its own q-node cluster (slowdowns ℓ_{s·g+l}, s = 0..q−1): optcc_single
  for ≤ 1 slow node, optcc_multi for several, the segmented swap of optcc_servers for q = 2,
  optcc.algorithms.all_slow's time scaling when every node of the rail is slow. Rails use disjoint NIC ports.
- Shares. Rail l carries the fraction w_l = (1/T_l)/Σ_m(1/T_m) of the data, T_l its slot time
  on the whole data, so every rail's NIC part ends at T_NIC = 1/Σ_l(1/T_l). This is how the
  server balances its NIC traffic over its NICs: the NVLink reduce-scatter hands each GPU the
  server's partial sums of its rail's share, so a NIC at ℓ carries data in proportion to what
  its rail can move. For one slow server with every ℓ ≤ 2 the exclusive single-straggler
  optimum 1/T_ex(q, ℓ) = (q−2)/(2(q−1)) + 1/(ℓ(q−1)) is affine in 1/ℓ
  (bounds.closed_form.exclusive_single_straggler_optimum), so Σ_l 1/T_ex(q, ℓ_l) =
  g/T_ex(q, ℓ_eff) with ℓ_eff = g/Σ_l(1/ℓ_l): the rails reach the pooled server (all g NICs
  at the harmonic mean ℓ_eff, what lp_models.fluid solves) up to the rails' O(1/k) fill. A GPU
  at ℓ > 2 is cut-bound in its rail (T_l = ℓ), which pooling would avoid: then the rails stay
  above the pooled LP (docs/failures.md gives the numbers).
- NVLink. Per server, each (rail l, piece π) needs a reduce-scatter (the g−1 other GPUs "add"
  their value into GPU l) before the rail first touches π there, and an all-gather (GPU l
  "copy" to the g−1 others) after its last write. Flows are list-scheduled on NVLink ports
  (one flow per port direction): reduce-scatters from time 0 in first-touch order, the NICs
  start at the smallest lead D that meets every first touch, all-gathers in release order.
  While a server has both kinds active every NVLink flow runs at rate 1/(2(g−1)): each GPU's
  reduce-scatter stream (g−1 flows in) and all-gather stream (g−1 flows out) then never
  overload a port whatever their timing, at the price of each stream running at half a port;
  before the first all-gather and after the last reduce-scatter the flows run at 1/(g−1). A fast GPU's rail carries more, so its
  streams need 2(g−1)·w_l/s_nv each (2(g−1)/(g·s_nv) at equal shares, the LP's NVLink row):
  `nvlink_limited` reports when that exceeds the NIC part, i.e. NVLink, not the NICs, limits
  the pooling.
Slot time: computed exactly from the rail schedules and the NVLink plan without building the
g·q-GPU schedule (`slot_time`); `build` returns the schedule, whose timing equals it (tested).
"""
from __future__ import annotations

from fractions import Fraction

from optcc.algorithms import check_segments
from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.schedule import Flow, LocalOp, Schedule
from optcc.timing import durations

NAME = "optcc_rails"


def accepts(cluster: Cluster) -> tuple[bool, str]:
    """Every cluster with g > 1 (any slow set, any ℓ)."""
    if cluster.g < 2:
        return False, "optcc_rails is for g > 1 GPUs per server"
    return True, "g > 1: one OptCC rail per local GPU index, shares balanced over the server's NICs"


def rail_cluster(cluster: Cluster, l: int) -> Cluster:
    """The q-node, g = 1 cluster of rail l (the slowdowns of GPUs s·g + l)."""
    g = cluster.g
    slow = {s: cluster.slowdown[s * g + l] for s in range(cluster.servers) if cluster.slowdown[s * g + l] != 1}
    return Cluster.build(cluster.servers, 1, slow or None)


def rail_schedule(inst: Cluster, k: int) -> Schedule:
    """The g = 1 schedule rail `inst` runs (module docstring)."""
    q = inst.p
    if q == 2:
        from optcc.algorithms.optcc_servers import _two_server_instance
        return _two_server_instance(inst, k)
    from optcc.algorithms import build_schedule     # no healthy node: time-scaled (all_slow)
    return build_schedule("optcc", inst, k)


class _Plan:
    """Rails, shares, lead D and NVLink flows of one cluster (everything but the NIC copies);
    `materialize=False` computes the times only (slot_time)."""

    def __init__(self, cluster: Cluster, k: int, materialize: bool = True):
        g, q = cluster.g, cluster.servers
        self.cluster, self.k = cluster, k
        cache: dict = {}
        self.rails = []
        touches = []
        for l in range(g):
            inst = rail_cluster(cluster, l)
            if inst.slowdown not in cache:
                sched = rail_schedule(inst, k)
                ends = [f.start + d for f, d in zip(sched.flows, durations(sched))]
                cache[inst.slowdown] = ((sched, ends, max(ends)), _touches(sched, ends, q))
            self.rails.append(cache[inst.slowdown][0])
            touches.append(cache[inst.slowdown][1])
        inv = [1 / t for _, _, t in self.rails]
        self.shares = [x / sum(inv) for x in inv]                    # w_l
        self.nic_time = 1 / sum(inv)                                 # T_NIC = w_l·T_l for every l
        self.offsets = []
        off = 0
        for sched, _, _ in self.rails:
            self.offsets.append(off)
            off += len(sched.pieces)
        s_nv = cluster.nvlink_speedup
        # first touch / last write per (server, rail, piece), in global time without the lead
        ft = [dict() for _ in range(q)]
        lw = [dict() for _ in range(q)]
        for l, (ft_l, lw_l) in enumerate(touches):
            w = self.shares[l]
            for s in range(q):
                ft[s].update(((l, pi), t * w) for pi, t in ft_l[s].items())
                lw[s].update(((l, pi), t * w) for pi, t in lw_l[s].items())
        # NVLink: every GPU runs its own reduce-scatter stream (the g−1 others send into it at
        # once) and its own all-gather stream (it sends to the g−1 others at once). While both
        # kinds can be active on a server every flow runs at rate 1/(2(g−1)); reduce-scatter
        # flows that end before the server's first all-gather, and all-gather flows that start
        # after its last reduce-scatter, run at 1/(g−1). A port then carries at most g−1 flows
        # of each kind, so none exceeds capacity whatever the streams' timing (derived).
        half, full = Fraction(1, 2 * (g - 1)), Fraction(1, g - 1)
        # (float, exact) keys: the exact order, with cheap float comparisons first
        order = [sorted(ft[s], key=lambda kk: (float(ft[s][kk]), ft[s][kk], kk)) for s in range(q)]
        # a task's duration at the full rate, (g−1)·w_l·|π|/s_nv; twice that at the half rate
        dur = [[(g - 1) * w * x / s_nv for x in sched.pieces] for w, (sched, _, _) in zip(self.shares, self.rails)]

        D = Fraction(0)                       # lead, from all reduce-scatters at the half rate
        for s in range(q):
            free = [Fraction(0)] * g
            for key in order[s]:
                free[key[0]] += 2 * dur[key[0]][key[1]]
                D = max(D, free[key[0]] - ft[s][key])
        self.lead = D
        self.end = D + self.nic_time
        self.nvlink: list[Flow] = []
        for s in range(q):
            first_ag = D + min(lw[s].values())
            free = [Fraction(0)] * g
            for key in order[s]:              # the same order, no later than at the half rate
                l, pi = key
                st = free[l]
                d = dur[l][pi]
                rate, free[l] = (full, st + d) if st + d <= first_ag else (half, st + 2 * d)
                if materialize:
                    self.nvlink += [Flow(s * g + j, s * g + l, self.offsets[l] + pi, "add", st, "nvlink", rate)
                                    for j in range(g) if j != l]
            last_rs = max(free)
            free = [Fraction(0)] * g
            releases = sorted(((D + lw[s][key], key) for key in lw[s]), key=lambda rk: (float(rk[0]), rk))
            for rel, key in releases:
                l, pi = key
                st = max(rel, free[l])
                d = dur[l][pi]
                rate, free[l] = (full, st + d) if st >= last_rs else (half, st + 2 * d)
                if materialize:
                    self.nvlink += [Flow(s * g + l, s * g + j, self.offsets[l] + pi, "copy", st, "nvlink", rate)
                                    for j in range(g) if j != l]
                self.end = max(self.end, free[l])
        # NVLink-limited: the busiest GPU's stream (its rail's share w_l takes w_l/(s_nv·rate) =
        # 2(g−1)·w_l/s_nv per stream kind) needs longer than the NIC part, so NVLink, not the
        # NICs, sets the time.
        self.nvlink_work = max(self.shares) / (s_nv * half)
        self.nvlink_limited = self.nvlink_work > self.nic_time


def slot_time(cluster: Cluster, k: int) -> Fraction:
    """Exact slot time (n/B) of `build(cluster, k)`, without building its g·q-GPU schedule."""
    k = check_segments(k)
    _check(cluster)
    if cluster.servers == 1:
        return Fraction(2 * (cluster.g - 1), cluster.g) / cluster.nvlink_speedup
    return _Plan(cluster, k, materialize=False).end


def _touches(sched: Schedule, ends, q: int):
    """Per node: piece -> first touch (start of its first flow, either end) and piece -> last
    write (end of the last flow into it), in the rail's own time."""
    ft = [dict() for _ in range(q)]
    lw = [dict() for _ in range(q)]
    for f, end in zip(sched.flows, ends):
        for node in (f.src, f.dst):
            cur = ft[node].get(f.piece)
            if cur is None or f.start < cur:
                ft[node][f.piece] = f.start
        cur = lw[f.dst].get(f.piece)
        if cur is None or end > cur:
            lw[f.dst][f.piece] = end
    return ft, lw


def nvlink_limited(cluster: Cluster, k: int) -> bool:
    """True when NVLink work (a share above 1/g loads a fast GPU's NVLink more) ends after the
    NICs: pooling over NVLink, not the NICs, then sets the time."""
    _check(cluster)
    if cluster.servers == 1:
        return True
    return _Plan(cluster, check_segments(k), materialize=False).nvlink_limited


def build(cluster: Cluster, k: int) -> Schedule:
    """The schedule of the module docstring (exclusive port model, explicit starts)."""
    k = check_segments(k)
    _check(cluster)
    g = cluster.g
    meta = {"algorithm": "optcc", "segments": k, "capacity": "exclusive", "g": g,
            "construction": "NVLink RS + one g = 1 OptCC rail per local GPU index, data shares "
                            "balanced over the server's NICs + NVLink AG, see optcc_rails (derived)"}
    if cluster.servers == 1:
        from optcc.algorithms.optcc_servers import _one_server
        return _one_server(cluster, meta)
    plan = _Plan(cluster, k)
    pieces: list[Fraction] = []
    flows: list[Flow] = []
    local_ops: list[LocalOp] = []
    D = plan.lead
    for l, (sched, _, _) in enumerate(plan.rails):
        w, off = plan.shares[l], plan.offsets[l]
        pieces += [w * x for x in sched.pieces]
        for f in sched.flows:
            flows.append(Flow(f.src * g + l, f.dst * g + l, off + f.piece, f.op, D + f.start * w,
                              f.link, f.rate, f.coef))
        for op in sched.local_ops:
            local_ops.append(LocalOp(op.rank * g + l, off + op.piece, D + op.time * w, op.coef))
    flows += plan.nvlink
    meta["shares"] = [str(w) for w in plan.shares]
    meta["lead"] = str(D)
    meta["nvlink_limited"] = plan.nvlink_limited
    return Schedule(cluster, pieces, flows, local_ops, meta=meta)


def _check(cluster: Cluster) -> None:
    ok, why = accepts(cluster)
    if not ok:
        raise OptccError("g", why)
