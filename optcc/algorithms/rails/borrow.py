"""Borrowing sub-rails for servers with a GPU at ℓ > 2: the exact NIC share LP, a round layout of
the NICs that reaches it, and optcc_rails' NVLink plan around it (derived; docs/failures.md
"Borrowing sub-rails"). optcc_rails builds it where it is strictly faster than the rails.

Derivation (derived):
- A sub-rail is one GPU per server (q nodes) running the direct AllReduce (optcc.algorithms.
  direct) on its own data. Rail l is {s·g + l}; for every GPU (s, l) slower than GPU (s, m) of
  the same server, the borrowing sub-rail "rail l with server s's node moved to GPU m" carries
  rail l's traffic at server s on NIC m instead (`subrails`).
- Sub-rail X owns y_{X,a} of the data at its node a (Σ_{X,a} y = 1, y ≥ 0). As in direct, node a
  sends and receives T_{X,a}(y) = Σ_{b≠a} (y_a + y_b)·max(ℓ_a, ℓ_b) (exclusive ports). A NIC v
  carries Σ_{X ∋ v} T_{X,v}; the share LP minimises t = max_v of that (`share_lp`, exact simplex
  of direct over Fractions).
- Round layout (`nic_slot_time`, `nic_schedule`): every sub-rail cuts its shards into k chunks;
  round r runs every sub-rail's reduce-scatter of chunk r and all-gather of chunk r − 1, all flows
  starting at the round start at rate d/L (d the full-rate duration, L the round's largest summed
  port load over all sub-rails), as direct does for one sub-rail. No port exceeds 1, a middle
  round lasts t/k, so the NIC part takes ≤ (1 + 1/k)·t exactly (first + (k−1)·t/k + last).
- A per-sub-rail rate factor ρ_X (each sub-rail alone on a fixed fraction of its NICs) does not
  reach t: a sub-rail's rate is set by its slowest node, so rail l's healthy NICs idle in the
  share it reserves, and the ρ-LP (`share_lp(..., layout="rates")`) equals the rails alone at
  every ℓ measured (docs/failures.md).
- NVLink (`_Plan`): optcc_rails' reduce-scatter / all-gather streams with the "equal" rates,
  the endpoint of a piece at server s being its sub-rail's GPU there.
"""
from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from functools import lru_cache

from optcc.algorithms.stated import states_slot_time
from optcc.algorithms.limits import check_segments
from optcc.algorithms.direct.build import _simplex
from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.schedule import Flow, Schedule


def subrails(cluster: Cluster, borrow: bool = True) -> list[tuple[int, ...]]:
    """The sub-rails (GPU ids, node s on server s): the g rails, then (borrow) for every GPU
    (s, l) slower than GPU (s, m), rail l with node s replaced by s·g + m."""
    g, q, ell = cluster.g, cluster.servers, cluster.slowdown
    if g < 2 or q < 2:
        raise OptccError("g", "borrowing sub-rails need g > 1 GPUs per server and at least two servers")
    out = [tuple(s * g + l for s in range(q)) for l in range(g)]
    if borrow:
        for s in range(q):
            for l in range(g):
                for m in range(g):
                    if ell[s * g + m] < ell[s * g + l]:
                        out.append(tuple(t * g + (m if t == s else l) for t in range(q)))
    return out


def _node_rows(ell: Sequence[Fraction], nodes: Sequence[int]) -> list[list[Fraction]]:
    """Coefficients of T_{X,a}(y) over the sub-rail's own y, one row per node a."""
    q = len(nodes)
    rows = []
    for a in range(q):
        row = [Fraction(0)] * q
        for b in range(q):
            if b != a:
                m = max(ell[nodes[a]], ell[nodes[b]])
                row[a] += m
                row[b] += m
        rows.append(row)
    return rows


def share_lp(cluster: Cluster, borrow: bool = True,
             layout: str = "sum") -> tuple[list[tuple[int, ...]], list[list[Fraction]], Fraction]:
    """Exact optimum of the share LP: (sub-rails, y per sub-rail, t).
    layout "sum": NIC v carries Σ_X T_{X,v}(y) ≤ t (what the round layout achieves);
    "rates": sub-rail X takes z_X ≥ max_a T_{X,a}(y) of each of its NICs, Σ_{X ∋ v} z_X ≤ t."""
    if layout not in ("sum", "rates"):
        raise OptccError("layout", f"unknown layout {layout!r} (known: sum, rates)")
    subs, ys, t = _share_lp(cluster, borrow, layout)
    return list(subs), [list(y) for y in ys], t


@lru_cache(maxsize=16)
def _share_lp(cluster: Cluster, borrow: bool,
              layout: str) -> tuple[tuple[tuple[int, ...], ...], tuple[tuple[Fraction, ...], ...], Fraction]:
    ell = [Fraction(v) for v in cluster.slowdown]
    subs = subrails(cluster, borrow)
    q, nx = cluster.servers, len(subs)
    ny = nx * q
    nz = nx if layout == "rates" else 0
    nic_rows: dict[int, list[tuple[int, Fraction]]] = {}     # NIC v -> list of (column, coefficient)
    rows_zy: list[list[tuple[int, Fraction]]] = []           # rates: T_{X,a}(y) − z_X ≤ 0
    for x, nodes in enumerate(subs):
        for a, coefs in enumerate(_node_rows(ell, nodes)):
            terms = [(x * q + b, c) for b, c in enumerate(coefs) if c != 0]
            if layout == "sum":
                nic_rows.setdefault(nodes[a], []).extend(terms)
            else:
                rows_zy.append(terms + [(ny + x, Fraction(-1))])
                nic_rows.setdefault(nodes[a], []).append((ny + x, Fraction(1)))
    t_col = ny + nz
    ineq = rows_zy + [terms + [(t_col, Fraction(-1))] for _, terms in sorted(nic_rows.items())]
    n = t_col + 1 + len(ineq)
    A, b = [], []
    for i, terms in enumerate(ineq):                 # terms ≤ 0 with a slack: terms + s_i = 0
        row = [Fraction(0)] * n
        for col, coef in terms:
            row[col] += coef
        row[t_col + 1 + i] = Fraction(1)
        A.append(row)
        b.append(Fraction(0))
    A.append([Fraction(1)] * ny + [Fraction(0)] * (n - ny))
    b.append(Fraction(1))
    c = [Fraction(0)] * n
    c[t_col] = Fraction(1)
    z = _simplex(A, b, c)
    ys = tuple(tuple(z[x * q:(x + 1) * q]) for x in range(nx))
    return tuple(subs), ys, z[t_col]


def nic_loads(cluster: Cluster, subs: Sequence[Sequence[int]], ys: Sequence[Sequence[Fraction]]) -> dict[int, Fraction]:
    """Σ_{X ∋ v} T_{X,v}(y) for every NIC v a sub-rail uses (send load = receive load)."""
    ell = [Fraction(v) for v in cluster.slowdown]
    out: dict[int, Fraction] = {}
    for nodes, y in zip(subs, ys):
        for a, coefs in enumerate(_node_rows(ell, nodes)):
            out[nodes[a]] = out.get(nodes[a], Fraction(0)) + sum((c * v for c, v in zip(coefs, y)), Fraction(0))
    return out


def _round_loads(cluster: Cluster, subs: Sequence[Sequence[int]], ys: Sequence[Sequence[Fraction]],
                 k: int) -> tuple[Fraction, Fraction, Fraction]:
    """Largest summed port load of round 0 (RS only), a middle round and round k (AG only)."""
    ell = cluster.slowdown
    send: dict[int, Fraction] = {}                   # reduce-scatter loads per NIC
    recv: dict[int, Fraction] = {}
    for nodes, y in zip(subs, ys):
        q = len(nodes)
        for a in range(q):
            ms = [max(ell[nodes[a]], ell[nodes[b]]) for b in range(q)]
            v = nodes[a]
            send[v] = send.get(v, Fraction(0)) + sum((y[b] * ms[b] for b in range(q) if b != a), Fraction(0))
            recv[v] = recv.get(v, Fraction(0)) + y[a] * sum((ms[b] for b in range(q) if b != a), Fraction(0))
    # the all-gather swaps the directions: a middle round loads both ports with send + recv
    first = max(max(send.values()), max(recv.values())) / k
    middle = max(send[v] + recv[v] for v in send) / k
    return first, middle, first


def nic_slot_time(cluster: Cluster, k: int) -> Fraction:
    """Exact time of the NIC part of the round layout at the share LP's optimum (no NVLink)."""
    k = check_segments(k)
    subs, ys, _ = share_lp(cluster)
    first, middle, last = _round_loads(cluster, subs, ys, k)
    return first + (k - 1) * middle + last


def nic_schedule(cluster: Cluster, k: int) -> Schedule:
    """The NIC flows of the round layout (no NVLink, so not an AllReduce of the g > 1 cluster):
    for checking the port capacity and the time of the layout."""
    k = check_segments(k)
    ell = cluster.slowdown
    subs, ys, _ = share_lp(cluster)
    first, middle, last = _round_loads(cluster, subs, ys, k)
    owners = [(x, a) for x, y in enumerate(ys) for a in range(len(y)) if y[a] != 0]
    index = {(c, o): c * len(owners) + n for c in range(k) for n, o in enumerate(owners)}
    pieces = [ys[x][a] / k for c in range(k) for x, a in owners]
    flows: list[Flow] = []
    start = Fraction(0)
    for r in range(k + 1):
        L = first if r == 0 else (last if r == k else middle)
        for c, op in ((r, "add"), (r - 1, "copy")):
            if not 0 <= c < k:
                continue
            for x, a in owners:
                nodes, pc = subs[x], index[(c, (x, a))]
                for b in range(len(nodes)):
                    if b != a:
                        i, j = (nodes[b], nodes[a]) if op == "add" else (nodes[a], nodes[b])
                        d = pieces[pc] * max(ell[i], ell[j])
                        flows.append(Flow(i, j, pc, op, start, "nic", d / L))
        start += L
    meta = {"algorithm": "rails_borrow_nic", "segments": k, "capacity": "exclusive",
            "construction": "NIC part of the borrowing sub-rails' round layout, see rails_borrow (derived)"}
    return Schedule(cluster, pieces, flows, meta=meta)


class _Plan:
    """The round layout's NIC flows plus optcc_rails' NVLink plan with the "equal" rates, where
    the endpoint of piece π at server s is the GPU of π's sub-rail there (not a fixed rail index):
    per server, reduce-scatter tasks (g − 1 "add" flows into the endpoint) in first-touch order
    on the endpoint's stream, the NICs after the smallest lead D meeting every first touch,
    all-gather tasks ("copy" from the endpoint) in release order. Each GPU still runs one stream
    of each kind, so the equal rates' port argument of optcc_rails holds unchanged (derived)."""

    def __init__(self, cluster: Cluster, k: int, materialize: bool = True):
        from optcc.timing import durations
        g, q, s_nv = cluster.g, cluster.servers, cluster.nvlink_speedup
        self.nic = nic_schedule(cluster, k)
        ends = [f.start + d for f, d in zip(self.nic.flows, durations(self.nic))]
        self.nic_time = max(ends)
        ft: list[dict[int, Fraction]] = [dict() for _ in range(q)]
        lw: list[dict[int, Fraction]] = [dict() for _ in range(q)]
        ep: list[dict[int, int]] = [dict() for _ in range(q)]
        for f, end in zip(self.nic.flows, ends):
            for node in (f.src, f.dst):
                s = node // g
                ep[s][f.piece] = node % g
                cur = ft[s].get(f.piece)
                if cur is None or f.start < cur:
                    ft[s][f.piece] = f.start
            s = f.dst // g
            cur = lw[s].get(f.piece)
            if cur is None or end > cur:
                lw[s][f.piece] = end
        half, full = Fraction(1, 2 * (g - 1)), Fraction(1, g - 1)
        sizes = self.nic.pieces
        order = [sorted(ft[s], key=lambda pi: (ft[s][pi], pi)) for s in range(q)]
        D = Fraction(0)                               # lead, every reduce-scatter at the half rate
        for s in range(q):
            free = [Fraction(0)] * g
            for pi in order[s]:
                e = ep[s][pi]
                free[e] += sizes[pi] / (s_nv * half)
                D = max(D, free[e] - ft[s][pi])
        self.lead = D
        self.end = D + self.nic_time
        self.nvlink: list[Flow] = []
        for s in range(q):
            first_ag = D + min(lw[s].values())
            free = [Fraction(0)] * g
            for pi in order[s]:                       # no later than at the half rate
                e, st = ep[s][pi], free[ep[s][pi]]
                d = sizes[pi] / (s_nv * full)
                rate, free[e] = (full, st + d) if st + d <= first_ag else (half, st + sizes[pi] / (s_nv * half))
                if materialize:
                    self.nvlink += [Flow(s * g + j, s * g + e, pi, "add", st, "nvlink", rate)
                                    for j in range(g) if j != e]
            last_rs = max(free)
            free = [Fraction(0)] * g
            for rel, pi in sorted((D + lw[s][pi], pi) for pi in lw[s]):
                e = ep[s][pi]
                st = max(rel, free[e])
                rate = full if st >= last_rs else half
                free[e] = st + sizes[pi] / (s_nv * rate)
                if materialize:
                    self.nvlink += [Flow(s * g + e, s * g + j, pi, "copy", st, "nvlink", rate)
                                    for j in range(g) if j != e]
                self.end = max(self.end, free[e])
        # NVLink-limited as in optcc_rails: a GPU's stream (its endpoint pieces at the half rate)
        # needs longer than the NIC part
        work: dict[tuple[int, int], Fraction] = {}
        for s in range(q):
            for pi, e in ep[s].items():
                work[(s, e)] = work.get((s, e), Fraction(0)) + sizes[pi] / (s_nv * half)
        self.nvlink_limited = max(work.values()) > self.nic_time


def slot_time(cluster: Cluster, k: int) -> Fraction:
    """Exact slot time of `build(cluster, k)` (n/B)."""
    return _Plan(cluster, check_segments(k), materialize=False).end


@states_slot_time("slot_time")
def build(cluster: Cluster, k: int) -> Schedule:
    """NVLink reduce-scatter to each piece's endpoint GPU, the borrowing sub-rails' round
    layout on the NICs after the lead, NVLink all-gather from the endpoint (exclusive ports)."""
    plan = _Plan(cluster, check_segments(k))
    D = plan.lead
    flows = [Flow(f.src, f.dst, f.piece, f.op, D + f.start, f.link, f.rate, f.coef) for f in plan.nic.flows]
    subs, ys, t = share_lp(cluster)
    meta = {"algorithm": "optcc", "segments": k, "capacity": "exclusive", "g": cluster.g,
            "construction": "NVLink RS + borrowing sub-rails (direct AllReduces sharing NICs by the "
                            "share LP, one round layout) + NVLink AG, see rails_borrow (derived)",
            "subrails": [list(x) for x in subs], "lead": str(D), "nic_lp": str(t),
            "nvlink_limited": plan.nvlink_limited}
    return Schedule(cluster, list(plan.nic.pieces), flows + plan.nvlink, meta=meta)
