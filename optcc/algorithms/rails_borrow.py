"""Borrowing sub-rails for servers with a GPU at ℓ > 2: the exact NIC share LP and the NIC part
of a round layout that reaches it (derived; docs/failures.md "Borrowing sub-rails"). NVLink is
not planned here, so this is a study of the NIC part, not a registered construction.

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
"""
from __future__ import annotations

from fractions import Fraction

from optcc.algorithms import check_segments
from optcc.algorithms.direct import _simplex
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


def _node_rows(ell, nodes):
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


def share_lp(cluster: Cluster, borrow: bool = True, layout: str = "sum"):
    """Exact optimum of the share LP: (sub-rails, y per sub-rail, t).
    layout "sum": NIC v carries Σ_X T_{X,v}(y) ≤ t (what the round layout achieves);
    "rates": sub-rail X takes z_X ≥ max_a T_{X,a}(y) of each of its NICs, Σ_{X ∋ v} z_X ≤ t."""
    if layout not in ("sum", "rates"):
        raise OptccError("layout", f"unknown layout {layout!r} (known: sum, rates)")
    ell = [Fraction(v) for v in cluster.slowdown]
    subs = subrails(cluster, borrow)
    q, nx = cluster.servers, len(subs)
    ny = nx * q
    nz = nx if layout == "rates" else 0
    nic_rows = {}                                    # NIC v -> list of (column, coefficient)
    rows_zy = []                                     # rates: T_{X,a}(y) − z_X ≤ 0
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
        for col, c in terms:
            row[col] += c
        row[t_col + 1 + i] = Fraction(1)
        A.append(row)
        b.append(Fraction(0))
    A.append([Fraction(1)] * ny + [Fraction(0)] * (n - ny))
    b.append(Fraction(1))
    c = [Fraction(0)] * n
    c[t_col] = Fraction(1)
    z = _simplex(A, b, c)
    ys = [z[x * q:(x + 1) * q] for x in range(nx)]
    return subs, ys, z[t_col]


def nic_loads(cluster: Cluster, subs, ys) -> dict[int, Fraction]:
    """Σ_{X ∋ v} T_{X,v}(y) for every NIC v a sub-rail uses (send load = receive load)."""
    ell = [Fraction(v) for v in cluster.slowdown]
    out: dict[int, Fraction] = {}
    for nodes, y in zip(subs, ys):
        for a, coefs in enumerate(_node_rows(ell, nodes)):
            out[nodes[a]] = out.get(nodes[a], Fraction(0)) + sum((c * v for c, v in zip(coefs, y)), Fraction(0))
    return out


def _round_loads(cluster: Cluster, subs, ys, k: int):
    """Largest summed port load of round 0 (RS only), a middle round and round k (AG only)."""
    ell = cluster.slowdown
    send, recv = {}, {}                              # reduce-scatter loads per NIC
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
