"""The fluid-LP optimum as a concrete pipelined Schedule (g = 1; g > 1 by the server lift).

Construction (derived, docs/lp_models.md "From the LP to a schedule"): the LP's root shares
x_r are made exact (small-denominator fractions, re-normalized to sum to 1). The data is cut
into k segments and every segment into one piece per root r (size x_r/k). Time runs in slots of
length τ: in slot t every non-root sends its contribution of segment t's pieces to their roots
("add"), and every root sends the finished sum of segment t−1's piece to everyone ("copy").
All flows of a slot run for the whole slot, concurrently, each at the rate that makes it last
exactly τ: rate = size·max(ℓ_src, ℓ_dst)/τ. A port's usage sums to (its per-segment load)/τ,
so τ = the largest per-segment port load (shared: bytes·ℓ_port; exclusive: bytes·max ℓ of the
pair) keeps every port within capacity in the schedule's capacity model. The broadcasts start
δ = τ/(2k) after their slot boundary, so that a reduce message and a broadcast message between
the same two ranks never start together (the verifier's "runnable" property allows both,
docs/verifier.md; the offset stays part of this construction and of its slot time below);
at any instant a port still carries one segment's reduce flows and one segment's broadcasts.
Slot time (k+1)·τ + δ = (1 + 1/k + 1/(2k²)) × the exact-share load T ≈ LP optimum: 1.6% above
it at k = 64.

g > 1 (`lp_server_schedule`, derived, docs/lp_models.md "g > 1"): the server-level LP
(lp_models.fluid, g NICs per server) is the g = 1 LP on the q-node cluster of the servers'
ℓ (optcc.algorithms.servers.shape.node_cluster) with every load divided by g, so its root shares are the q-node
LP's. The q-node schedule above runs as g instances, one per local index, each on 1/g of the
data over its own NICs (port loads unchanged), bracketed by NVLink reduce-scatter and all-gather
batches placed as optcc_servers places them (first touch / last write, the smallest lead).
Slot time ≤ (q-node slot time)/g + 2(g−1)/(g·s_nv) (derived: the lead is at most the RS work,
and the AG batches, released by the last write, hold NVLink at most the AG work after it).
"""
from __future__ import annotations

from fractions import Fraction

from optcc.algorithms import check_segments
from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.schedule import Flow, Schedule
from lp_models.fluid import DEFAULT_LP_SOLVER, FluidLPResult, solve_fluid_lp

CAPACITIES = ("shared", "exclusive")

MAX_DENOMINATOR = 10**4


def exact_root_shares(cluster: Cluster, lp: FluidLPResult) -> list[Fraction]:
    """Per-rank root shares as Fractions summing to exactly 1 (from the LP's floats)."""
    if not lp.optimal:
        raise OptccError("lp", f"the LP did not solve to optimality ({lp.status})")
    classes = lp.classes
    anchor = max(classes, key=lambda c: c.count * lp.root_share[c.name])
    share: dict[str, Fraction] = {}
    for c in classes:
        if c is anchor:
            continue
        x = lp.root_share[c.name]
        share[c.name] = Fraction(0) if x < 1e-9 else Fraction(x).limit_denominator(MAX_DENOMINATOR)
    # Fraction(1): with a single class (no stragglers) the sum is empty and rest / count would
    # be a float; every share, and so every size and start time, must be an exact Fraction.
    rest = Fraction(1) - sum((share[c.name] * c.count for c in classes if c is not anchor), Fraction(0))
    if rest <= 0:
        raise OptccError("lp", "rounding the LP's root shares left nothing for the largest class")
    share[anchor.name] = rest / anchor.count
    out = [Fraction(0)] * cluster.p
    for c in classes:
        for r in c.members:
            out[r] = share[c.name]
    return out


def port_weight(cluster: Cluster, rank: int, other: int, capacity: str) -> Fraction:
    """Time one byte between `rank` and `other` costs on rank's port (see lp_models.fluid)."""
    ell = cluster.slowdown
    return ell[rank] if capacity == "shared" else max(ell[rank], ell[other])


def segment_loads(cluster: Cluster, shares: list[Fraction], k: int, capacity: str) -> list[Fraction]:
    """Per-slot port load of every rank (send = receive by symmetry), exact."""
    p = cluster.p
    loads = []
    for i in range(p):
        load = Fraction(0)
        for r in range(p):
            if r != i and shares[r]:
                load += shares[r] / k * port_weight(cluster, i, r, capacity)          # reduce send
        if shares[i]:
            load += shares[i] / k * sum(port_weight(cluster, i, j, capacity) for j in range(p) if j != i)
        loads.append(load)
    return loads


def lp_schedule(cluster: Cluster, segments: int = 64, capacity: str = "shared",
                solver: str = DEFAULT_LP_SOLVER, lp: FluidLPResult | None = None) -> Schedule:
    """Pipelined star schedule realizing the fluid-LP optimum; meta records the LP optimum."""
    if cluster.g != 1:
        raise OptccError("g", "the LP schedule covers one GPU per server (g = 1)")
    check_segments(segments)
    lp = lp or solve_fluid_lp(cluster, capacity, solver)
    if lp.capacity != capacity:
        raise OptccError("lp", f"the LP was solved for {lp.capacity!r} capacity, not {capacity!r}")
    k, p = segments, cluster.p
    shares = exact_root_shares(cluster, lp)
    tau = max(segment_loads(cluster, shares, k, capacity))
    delta = tau / (2 * k)
    roots = [r for r in range(p) if shares[r]]
    pieces, flows = [], []
    ell = cluster.slowdown
    for t in range(k):
        for r in roots:
            piece = len(pieces)
            size = shares[r] / k
            pieces.append(size)
            for i in range(p):
                if i == r:
                    continue
                rate = size * max(ell[i], ell[r]) / tau
                if rate > 1:
                    raise AssertionError(f"rate {rate} > 1 (a bug in the load computation)")
                flows.append(Flow(i, r, piece, "add", t * tau, rate=rate))
                flows.append(Flow(r, i, piece, "copy", (t + 1) * tau + delta, rate=rate))
    meta = {"algorithm": "lp_fluid", "capacity": capacity, "segments": k,
            "lp_optimum": lp.objective, "lp_solver": lp.solver,
            "slot_length": str(tau), "exact_share_optimum": str(tau * k)}
    return Schedule(cluster, pieces, flows, meta=meta).validate()   # exact Fractions, sizes sum to 1


def lp_server_plan(cluster: Cluster, segments: int = 64, capacity: str = "shared",
                   solver: str = DEFAULT_LP_SOLVER) -> tuple[dict, Schedule]:
    """(optcc_servers._plan of the q-node LP schedule, that instance): what lp_server_schedule and
    its array form (arrays_servers.lifted_event_arrays) lift."""
    from optcc.algorithms.servers.build import _plan
    from optcc.algorithms.servers.shape import node_cluster
    if cluster.g == 1:
        raise OptccError("g", "lp_server_schedule is for g > 1; use lp_schedule for g = 1")
    if cluster.servers < 2:
        raise OptccError("p", f"p = g = {cluster.g} is one server: no NIC traffic to schedule (the LP schedule "
                              "for g > 1 needs at least 2 servers)")
    if capacity not in CAPACITIES:
        raise OptccError("capacity", f"expected one of {CAPACITIES}, got {capacity!r}")
    k = check_segments(segments)
    inst = lp_schedule(node_cluster(cluster), k, capacity, solver)
    return _plan(cluster, k, inst), inst


def lp_server_schedule(cluster: Cluster, segments: int = 64, capacity: str = "shared",
                       solver: str = DEFAULT_LP_SOLVER) -> Schedule:
    """The q-node LP schedule lifted to g GPUs per server (module docstring); meta records the
    server-level LP optimum (lp_models.fluid on `cluster`) beside the instance's."""
    from optcc.algorithms.servers.build import lift_instance
    plan, inst = lp_server_plan(cluster, segments, capacity, solver)
    server_lp = solve_fluid_lp(cluster, capacity, solver)
    meta = {"algorithm": "lp_fluid", "capacity": capacity, "segments": inst.meta["segments"], "g": cluster.g,
            "lp_optimum": server_lp.objective, "lp_solver": server_lp.solver,
            "instance_lp_optimum": inst.meta["lp_optimum"],
            "instance_slot_length": inst.meta["slot_length"],
            "construction": "NVLink RS + g lifted q-node LP schedules + NVLink AG (lp_models.to_schedule, derived)"}
    return lift_instance(cluster, plan, meta).validate()
