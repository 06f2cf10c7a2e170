"""Counts A, B and knee of optcc_rails, its registry record's Latency (derived; docs/latency.md "Rails").

optcc_rails = NVLink reduce-scatter lead + g rails (rail l: a g = 1 schedule on q = p/g nodes,
built on the rail's own cluster with the cluster's latencies, its times scaled by its data share
w_l) + NVLink all-gather tail.
Event model (optcc.timing.event_time; NVLink flows pay o, Li, L like NIC flows):
- A rail's flows are its own schedule's flows with every time scaled by w_l, so its event
  time at λ = Li + L is w_l·T_rail(λ/w_l) ≤ w_l·slot_rail + B_rail·λ whenever λ/w_l is below
  the rail's knee KNEE_rail/(k·q): in the rails' units λ ≤ g·w_l·KNEE_rail/(k·p).
- Entry: a rail's first flow on a piece reads the server's reduce-scatter of it, one NVLink
  data edge (Li + L) more; the reduce-scatter flows themselves read original data (Li once,
  port edges pay no latency). Exit: an all-gather flow reads the rail's last write, one more
  data edge. So B = max_l B_rail,l + 2 and the knee fraction is min_l g·w_l·KNEE_rail,l.
B_rail per the schedule the rail actually runs (optcc_rails.rail_schedule, the plan's choice
with or without direct rails):
- q = 2, the segmented swap (optcc_servers._two_server_instance): its flows read original data
  and chain only through ports: B = 1 (Li before the first, L after the last).
- direct (optcc.algorithms.direct.build): k + 1 rounds; a round's all-gather reads the previous
  round's reduce-scatter landings, and a round's flows wait only for earlier rounds on their
  ports, so stretching every round by Li + L keeps every dependency: B = k + 1 for every λ.
- the ring (tiny rails, ring.py): 2(q−1)k synchronous steps, the same argument: B = 2(q−1)k.
- OptCC (single, multi, all_slow on the rail's cluster, optcc.algorithms.flat): that record's
  Latency on the rail's cluster (multi: the hop spread its pattern takes there, 3 under
  pipelined latency Li + L > 0, else 1).
Rails without a knee of their own (swap, direct, ring) get KNEE_rail = 1: the NVLink lead and
tail are tested only up to λ = g·w_l/(k·p). One server (q = 1): 2(g−1) NVLink rounds, the
ring's argument, A = B = 2(g−1), no knee.
A (overheads o): the largest OptCC count of the rails' clusters + 4 for the NVLink lead
and tail, plus P_max (the most pieces of a rail)
when the plan uses the proportional NVLink rates: their lead is bisected down to the smallest
that meets every first touch (optcc_rails._smallest_lead), so a GPU's reduce-scatter stream,
one flow per piece in turn on its port, has no slack and each of its o can reach the rail; the
equal rule's lead counts every reduce-scatter at the half rate while the early ones run at the
full rate, which leaves slack (measured: without P_max the mixed-ℓ clusters exceeded A by up to
35% at o = 1/30 n/B, p = 32, g = 4, k = 16; equal-rate clusters stayed within A).
All tested (not proved) against event_time in tests/optcc/test_model_time_rails.py. Where optcc_rails
builds the borrowing sub-rails instead (optcc.algorithms.rails.borrow: a GPU at ℓ > 2 with a
faster GPU on its server), A and B are not derived: the model is valid only at o = Li = L = 0.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

from optcc.algorithms.record import Latency, counts_of
from optcc.cluster import Cluster

if TYPE_CHECKING:
    from optcc.algorithms.rails.layout import ArrayRail
    from optcc.schedule import Schedule

NO_KNEE = Fraction(10**9)          # model_time's "no knee" (the ring's)


@dataclass(frozen=True)
class RailsCounts:
    slot: Fraction                 # optcc_rails.slot_time (n/B)
    overheads: int                 # A
    latencies: Fraction            # B
    knee: Fraction                 # B holds for Li + L ≤ knee/(k·p)
    rails: tuple[tuple[str, Fraction, Fraction, Fraction], ...]  # per rail: (kind, share w_l, B_rail, KNEE_rail)
    latency_free_only: bool = False  # the borrowing sub-rails: counts not derived, valid at o = Li = L = 0 only


_CACHE: dict[tuple[object, ...], RailsCounts] = {}


def rail_latency(sched: Schedule | ArrayRail, k: int) -> tuple[str, Fraction, Fraction]:
    """(kind, B_rail, KNEE_rail) of one rail schedule (module docstring)."""
    inst = sched.cluster
    q = inst.p
    if q == 2:
        return "swap", Fraction(1), Fraction(1)
    from optcc.algorithms.rails.build import rail_algorithm
    algo = rail_algorithm(sched)
    if algo == "direct":
        return "direct", Fraction(k + 1), Fraction(1)
    if algo == "ring":
        return "ring", Fraction(2 * (q - 1) * k), Fraction(1)
    lat = _flat_latency(inst)
    knee = lat.knee(inst)
    return "optcc", lat.latencies(inst, k), min(Fraction(1), NO_KNEE if knee is None else knee)


def _flat_latency(inst: Cluster) -> Latency:
    """The counts of the g = 1 construction serving a rail's cluster (optcc.algorithms.flat)."""
    from optcc.algorithms import flat
    return counts_of(flat.choose(inst))


def counts(cluster: Cluster, k: int) -> RailsCounts:
    """B, knee and slot of optcc_rails on `cluster` with k segments (cached: slot and B share
    one plan, the costly part)."""
    pipelined = cluster.issue_delay + cluster.latency > 0      # the rails' multi pattern depends on it
    key = (cluster.p, cluster.g, cluster.slowdown, cluster.bandwidth, cluster.nvlink_bandwidth, k,
           pipelined)
    value = _CACHE.get(key)
    if value is None:
        if len(_CACHE) > 20_000:
            _CACHE.clear()
        value = _CACHE[key] = _counts(cluster, k)
    return value


def _counts(cluster: Cluster, k: int) -> RailsCounts:
    from optcc.algorithms.rails import build as optcc_rails
    g = cluster.g
    if cluster.servers == 1:
        return RailsCounts(optcc_rails.slot_time(cluster, k), 2 * (g - 1), Fraction(2 * (g - 1)), NO_KNEE, ())
    plan = optcc_rails._best_plan(cluster, k, materialize=False)
    borrow = optcc_rails._borrow_time(cluster, k)
    if borrow is not None and borrow < plan.end:   # build() runs rails_borrow: no counts for it yet
        return RailsCounts(borrow, 0, Fraction(0), Fraction(0), (), latency_free_only=True)
    rails = []
    for (sched, _, _), w in zip(plan.rails, plan.shares):
        kind, b_rail, knee_rail = rail_latency(sched, k)
        rails.append((kind, w, b_rail, knee_rail))
    b = max(r[2] for r in rails) + 2
    knee = min(g * w * kf for _, w, _, kf in rails)
    a = _overheads(cluster, k)
    if plan.rates != "equal":
        a += max(len(sched.pieces) for sched, _, _ in plan.rails)
    return RailsCounts(plan.end, a, b, knee, tuple(rails))


def _overheads(cluster: Cluster, k: int) -> int:
    """The largest OptCC count of the distinct rail clusters + 4."""
    from optcc.algorithms.rails.build import rail_cluster
    rails = {c.slowdown: c for c in (rail_cluster(cluster, l) for l in range(cluster.g))}.values()
    return max(_flat_latency(r).overheads(r, k) for r in rails) + 4
