"""Per-instance property `bound`: a schedule's flows induce a feasible point of the fluid LP.

Why (docs/bounds.md "Why every AllReduce satisfies the LP", derived): nodes are GPUs (g = 1)
or servers (g > 1, NIC flows between servers only; NVLink is free). For a correct AllReduce
every piece is sent out of every node at least once and into every node at least once (cut),
and crosses between nodes at least 2(n−1) times (directed gossip count, n nodes). Summing
over pieces with their sizes, node c sends s_c ≥ 1 and receives r_c ≥ 1 (units of n), and
Σ s_c ≥ 2(n−1). Let m_c = max(s_c, r_c) and, for n ≥ 3, x_c = (m_c − 1)/Σ_d (m_d − 1)
(n = 2: x_c = 1/2). In lp_models.fluid's shared LP with one class per node the load of node c
is ℓ_c·(1 + (n−2)·x_c) ≤ ℓ_c·m_c (because Σ_d (m_d − 1) ≥ n − 2), and a port that moves
m_c at B/ℓ_c per NIC (pooled over a server's P NICs: ℓ_c = the harmonic mean) is busy
ℓ_c·m_c/P ≤ T. So (x, T = the schedule's finish time) is feasible and T ≥ the LP optimum,
which lp_models.duals proves equal to Theorem 1 / Theorem 3 for every size (one straggler, or
one straggler server); with several stragglers it equals the derived bound at instances (GLOP).

`check_lp_bound(schedule)` checks each step on the instance, exactly in Fractions: the per-piece
counts, the induced x (x ≥ 0, Σ x = 1), every LP row with T = optcc.timing.slot_time, and
T ≥ the LP optimum. The server-level NVLink row (a condition of pooling, not a bound on every
algorithm) is left out.
"""
from __future__ import annotations

from fractions import Fraction

from bounds.closed_form import lower_bound
from optcc.cluster import Cluster
from optcc.schedule import Schedule


def exact_load_matrix(ells: list[Fraction], capacity: str = "shared") -> list[list[Fraction]]:
    """lp_models.fluid.load_matrix with one class per node (n_d = 1), exactly:
    A[c][d] = w_cd (c ≠ d), A[c][c] = Σ_{e ≠ c} w_ce; w_cd = ℓ_c (shared) or max(ℓ_c, ℓ_d)."""
    n = len(ells)

    def w(c, d):
        return ells[c] if capacity == "shared" else max(ells[c], ells[d])
    a = [[w(c, d) if c != d else Fraction(0) for d in range(n)] for c in range(n)]
    for c in range(n):
        a[c][c] = sum((w(c, e) for e in range(n) if e != c), Fraction(0))
    return a


def _nodes(cluster: Cluster):
    """(node of each rank, node slowdowns ℓ_c, ports per node)."""
    if cluster.g == 1:
        return list(range(cluster.p)), [Fraction(x) for x in cluster.slowdown], 1
    from lp_models.fluid import pooled_ell
    g = cluster.g
    return ([r // g for r in range(cluster.p)],
            [pooled_ell(cluster.slowdown[j * g:(j + 1) * g]) for j in range(cluster.servers)], g)


def check_lp_bound(schedule: Schedule, time: Fraction | None = None) -> dict:
    """{"holds", "message", "counterexample" (when it fails), facts}: see the module docstring."""
    from optcc.timing import slot_time

    c = schedule.cluster
    node, ells, ports = _nodes(c)
    n = len(ells)
    t = slot_time(schedule) if time is None else Fraction(time)
    out = {"holds": False, "level": "gpu" if c.g == 1 else "server", "nodes": n, "finish": str(t)}
    if n < 2:
        out.update(holds=True, message="one node: no NIC traffic is needed, the LP optimum is 0")
        return out
    k = len(schedule.pieces)
    outs = [[0] * n for _ in range(k)]
    ins = [[0] * n for _ in range(k)]
    sent = [Fraction(0)] * n
    recv = [Fraction(0)] * n
    crossing = [0] * k
    for f in schedule.flows:
        a, b = node[f.src], node[f.dst]
        if a == b:
            continue                             # inside a node (NVLink, free in the model)
        size = schedule.pieces[f.piece]
        outs[f.piece][a] += 1
        ins[f.piece][b] += 1
        crossing[f.piece] += 1
        sent[a] += size
        recv[b] += size
    for z in range(k):
        for v in range(n):
            if not outs[z][v] or not ins[z][v]:
                what = "leaves" if not outs[z][v] else "enters"
                out.update(message=f"cut: no flow of piece {z} {what} node {v}, so it cannot be a correct "
                                   "AllReduce (the sum property fails too)",
                           counterexample={"piece": z, "node": v, "constraint": f"cut ({what})"})
                return out
        if crossing[z] < 2 * (n - 1):
            out.update(message=f"volume: piece {z} crosses between nodes {crossing[z]} times, fewer than "
                               f"2(n−1) = {2 * (n - 1)}", counterexample={"piece": z, "constraint": "volume",
                                                                          "crossings": crossing[z]})
            return out
    m = [max(s, r) for s, r in zip(sent, recv)]
    excess = sum(mc - 1 for mc in m)
    x = [Fraction(1, 2)] * 2 if n == 2 else [(mc - 1) / excess for mc in m]
    a = exact_load_matrix(ells)
    rows = []
    for ci in range(n):
        load = sum((a[ci][d] * x[d] for d in range(n)), Fraction(0))
        rows.append(load)
        if load > ports * t:
            out.update(message=f"row of node {ci}: LP load {load} > ports·T = {ports * t}: the port moves "
                               f"{m[ci]} at slowdown {ells[ci]} in time {t} (a capacity bug)",
                       counterexample={"node": ci, "constraint": "capacity", "load": str(load), "T": str(t)})
            return out
    assert all(v >= 0 for v in x) and sum(x) == 1
    optimum = lower_bound(c)                    # the LP optimum (lp_models.duals, tests/lp_models/test_lp_fluid.py)
    certified = (c.g == 1 and len(c.stragglers) <= 1) or _one_straggler_server(c)
    if t < optimum:
        out.update(message=f"T = {t} is below the LP optimum {optimum}: a bug in the bound or the timing",
                   counterexample={"constraint": "optimum", "T": str(t), "optimum": str(optimum)})
        return out
    dual = _dual_bound(c, t)
    if dual is not None and not dual["holds"]:
        out.update(message=dual["message"], counterexample={"constraint": "dual", **dual})
        return out
    exclusive = _exclusive_point(schedule, sent, recv, t)
    if exclusive is not None and not exclusive["holds"]:
        out.update(message=exclusive["message"], counterexample=exclusive)
        return out
    if exclusive is not None:
        out["exclusive"] = exclusive
    if dual is not None:
        out["dual"] = dual
    by = (" (optimum = bound checked at instances)" if dual is None else
          f"; for this cluster an exact LP dual gives T ≥ μ = {dual['mu']} n/B, checked in exact arithmetic "
          f"(π per node: " + ", ".join(f"{c['nodes']} {c['pi_per_node']}" for c in dual["classes"]) + ")")
    out.update(holds=True, x=[str(v) for v in x], sent=[str(v) for v in sent], received=[str(v) for v in recv],
               max_row_load=str(max(rows)), ports=ports, lp_optimum=str(optimum),
               optimum_certified_for_all_p=certified,
               message=f"the flows induce a feasible point of the shared fluid LP at T = {t}, so T ≥ the LP "
                       f"optimum {optimum} n/B" + ("" if certified and dual is None else by)
                       + ("" if exclusive is None else f"; and of the exclusive LP, so T ≥ T_ex = {exclusive['lp_optimum']}"))
    return out


def _dual_bound(cluster: Cluster, t: Fraction) -> dict | None:
    """The exact LP dual for the cluster (lp_models.dual_certificate), checked per node, and T ≥ μ;
    None where the cluster has more node slowdowns than the exact search takes."""
    from lp_models.dual_certificate import lp_dual
    from optcc.errors import OptccError
    try:
        cert = lp_dual(cluster)
    except OptccError:
        return None
    out = {"holds": True, **cert.to_json()}
    bad = cert.problems()
    if bad:
        out.update(holds=False, message=f"the LP dual does not check: {'; '.join(bad)}")
    elif t < cert.mu:
        out.update(holds=False, message=f"T = {t} is below the LP dual's bound μ = {cert.mu}: a bug in the timing")
    return out


def _exclusive_point(schedule: Schedule, sent, recv, t) -> dict | None:
    """Exclusive-port schedules, g = 1, at most one straggler: the point of the exclusive fluid
    LP (derived): u = (a + b)/2 with a, b what the straggler S sends and receives,
    x_S = min(1, (u − 1)/(p − 2)), healthy x_h = (1 − x_S)/(p − 1). S's row is ℓ·(1 + (p−2)x_S)
    ≤ ℓ·u ≤ T; every healthy row is (2(p−1) − (2−ℓ)u)/(p−1) for u ≤ p − 1, at most the healthy
    ports' average busy time (c + ℓ(a+b)/2)/(p−1) ≤ T, where c ≥ 2(p−1) − a − b is the
    healthy-to-healthy volume; for u > p − 1 (x_S = 1) it is ℓ ≤ T. None when the model is shared or the cluster is not of this kind."""
    from bounds.closed_form import exclusive_single_straggler_optimum
    from optcc.timing import capacity_model

    c = schedule.cluster
    if c.g != 1 or len(c.stragglers) > 1 or capacity_model(schedule) != "exclusive":
        return None
    s, ell = next(iter(c.stragglers.items()), (0, Fraction(1)))
    p, h = c.p, c.p - 1
    if p == 2:
        x = [Fraction(1, 2)] * 2
    else:
        u = (sent[s] + recv[s]) / 2
        xs = min(Fraction(1), (u - 1) / (h - 1))
        x = [xs if r == s else (1 - xs) / h for r in range(p)]
    a = exact_load_matrix([Fraction(v) for v in c.slowdown], "exclusive")
    opt = exclusive_single_straggler_optimum(p, ell)
    for r in range(p):
        load = sum((a[r][d] * x[d] for d in range(p)), Fraction(0))
        if load > t:
            return {"holds": False, "constraint": "exclusive capacity", "node": r, "load": str(load), "T": str(t),
                    "message": f"exclusive LP row of rank {r}: load {load} > T = {t}"}
    if t < opt:
        return {"holds": False, "constraint": "exclusive optimum", "T": str(t), "optimum": str(opt),
                "message": f"T = {t} is below the exclusive-port optimum {opt}: a bug in the bound or the timing"}
    return {"holds": True, "x": [str(v) for v in x], "lp_optimum": str(opt)}


def _one_straggler_server(c: Cluster) -> bool:
    from bounds.closed_form import is_straggler_server
    return c.g > 1 and c.servers >= 2 and (not c.stragglers or is_straggler_server(c))
