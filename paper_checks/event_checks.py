"""Per-point verdicts decided by event times, never FAILed by an upper bound.

At a grid point (p, g, ℓ, latency preset, bandwidth B) each side has an interval:
- NCCLNoFailure: its exact event time (optcc.event_timer.ring_event_time, every p).
- OptCC: where its schedules are small enough (≤ FLOW_CAP flows at every k the search visits),
  the exact event time (optcc.timing's model, optcc.event_timer) at the k a search over k
  by event time picks; elsewhere [lower bound + o + Li + L, the closed form of optcc.model_time at
  its auto k] (the closed form is an upper bound, tested ≥ the event time).
A point PASSes when OptCC's upper end is within the tolerance of NCCLNoFailure's event time,
FAILs when its event time (a complete search) is over it or when the lower bound alone is over it
(`decided_by` = REFUTED_BY_BOUND: no schedule of any port rule can pass there, so the claim is
false at that point), and is *undecided* otherwise (only an upper bound over the tolerance is
known): reported with that bound, counted apart.

The search over k (derived rule, not a proof of the optimum): start at the closed form's auto k,
step by ×√2 down and up while the event time improves (within 1 ≤ k ≤ K_MAX), then REFINE_ROUNDS
ternary rounds on the integers of the ×√2 bracket around the best; the event time of OptCC is
taken at the best k it saw (a search: T(k) is flat near its minimum, so a k a few percent off
costs a second-order amount).
"""
from __future__ import annotations

import dataclasses
import math
from collections import OrderedDict
from fractions import Fraction

from bounds.closed_form import lower_bound
from optcc.algorithms.registry import choose
from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.latency import units as latency_units
from optcc.segments import K_MAX, auto_segments
from paper_checks import settings as S
from optcc.event_timer import Prepared, ring_event_time

FLOW_CAP = 70_000           # event-time OptCC only where its schedule has at most this many flows (cost rule)
DEEP_FLOW_CAP = 3_000_000   # the verdict column's undecided points, searched again up to this (cost rule)
NO_CLOSED_FORM_CAP = DEEP_FLOW_CAP   # points whose construction has no closed form (e.g. slow NVLink, q ≥ 3)
DEEP_EVALUATIONS = 3        # the verdict column's deep pass: at most this many event timings (cost rule:
                            # ≈ 2–3 s each at its sizes); a point without a closed form walks to the end
ROOT2 = math.sqrt(2)
REFINE_ROUNDS = 1           # ternary rounds in the ×√2 bracket around the best grid k (cost rule)
PASS, FAIL, UNDECIDED = "PASS", "FAIL", "undecided"
REFUTED_BY_BOUND = "refuted by the bound"   # decided_by of a FAIL whose lower bound alone is over the tolerance
P_EVENT_MAX = 64            # no event search beyond (the schedules at the closed form's k exceed FLOW_CAP)
BANDWIDTHS = (S.NIC_BANDWIDTH, 2 * S.NIC_BANDWIDTH)      # 50 and 100 GB/s per GPU (issue 24)
FIT_FLOW_CAP = 100_000_000  # the O(1/p) fits' full run (`optcc paper-checks --full-fit`): every p searched by event
                            # time up to this (p = 1024, k = 44: 92 M flows, about 10 GB and 50 s a timing)
FIXED_K = (32, 64)          # the verdict column also at these fixed k (what a PASS needs: the searched k vs these)
LATENCY_FACTORS = (Fraction(3, 4), Fraction(5, 4))   # a verdict is *fragile* if it flips with o, Li, L scaled by these
DISCIPLINE = "exclusive"    # the port discipline of every verdict (optcc.timing): what the streaming runner does
OTHER_DISCIPLINES = ("step", "shared")                # each point also under these, at its k
SEARCHED_DISCIPLINES = ("step",)   # … and where over the tolerance there, searched again over k under it (the
                                   # array timer times it; shared is a fluid simulation of small schedules only)
DISCIPLINE_EVALUATIONS = 8  # that search: at most this many event timings (cost rule)
SHARED_FLOW_CAP = 3_000     # the shared discipline's fluid simulation (optcc.event_shared) up to this (cost rule)


def gbps(bandwidth) -> str:
    return f"{float(bandwidth) / 1e9:g}"


def cluster(p: int, g: int, ells, model: str, bandwidth=S.NIC_BANDWIDTH) -> Cluster:
    """ℓ (one straggler, or the straggler server's g GPUs) or a tuple (ℓ1, ℓ2, …) on ranks 0, 1, …
    (g = 1) or on servers 0, 1, … (g > 1), at NIC bandwidth `bandwidth` (NVLink stays
    settings.NVLINK_BANDWIDTH)."""
    if isinstance(ells, tuple) and g > 1:
        strag = {i * g + j: Fraction(e) for i, e in enumerate(ells) for j in range(g)}
    elif isinstance(ells, tuple):
        strag = {i: Fraction(e) for i, e in enumerate(ells)}
    else:
        strag = {i: Fraction(ells) for i in range(g)}
    return Cluster.build(p, g, strag, bandwidth=bandwidth, nvlink_bandwidth=S.NVLINK_BANDWIDTH,
                         latency_model=model)


_NCCL: dict = {}


def nccl_event(p: int, g: int, model: str, n: int, bandwidth=S.NIC_BANDWIDTH, factor: Fraction = Fraction(1),
               discipline: str = DISCIPLINE) -> Fraction:
    """NCCLNoFailure's exact event time (n/B) under the preset, its o, Li and L times `factor`,
    under the port `discipline` (ring_event_time: "shared" is "exclusive" for the ring)."""
    key = (p, g, model, n, bandwidth, factor, discipline)
    if key not in _NCCL:
        c = scaled(Cluster.build(p, g, bandwidth=bandwidth, nvlink_bandwidth=S.NVLINK_BANDWIDTH, latency_model=model),
                   factor)
        _NCCL[key] = ring_event_time(c, *latency_units(c, n), discipline=discipline)
    return _NCCL[key]


def scaled(c: Cluster, factor: Fraction) -> Cluster:
    """The cluster with its o, Li and L times `factor` (the same preset name where factor = 1)."""
    if factor == 1:
        return c
    return dataclasses.replace(c, overhead=c.overhead * factor, issue_delay=c.issue_delay * factor,
                               latency=c.latency * factor, latency_model="custom")


def bound_time(c: Cluster, n: int) -> Fraction:
    """Lower bound on any schedule's event time: the bandwidth bound + one o + Li + L (derived)."""
    o, li, lat = latency_units(c, n)
    return lower_bound(c) + o + li + lat


class _Schedules:
    """Prepared OptCC schedules by (cluster shape, k), shared across presets where the build is the
    same (the constructions read the latency only through Li + L > 0: optcc_multi's hop spread)."""

    def __init__(self, size: int = 16):
        self.cache: OrderedDict = OrderedDict()
        self.size = size
        self.flows: dict = {}
        self.smallest_piece: dict = {}     # key -> the smallest piece (fraction of n) of a schedule built

    def key(self, c: Cluster, k: int):
        nvlink = c.nvlink_speedup if c.g > 1 else None       # g = 1 schedules do not depend on B
        return (c.p, c.g, c.slowdown, nvlink, c.issue_delay + c.latency > 0, k)

    def estimate(self, c: Cluster, k: int, cap: int | None = None) -> int:
        """Flow count at k, extrapolated linearly from k = 1 and 2 (the constructions are ~linear in k).
        With `cap`: where k = 1 alone has more than `cap` flows, that count (k = 2 is not built: the
        counts do not fall with k, so every k is over `cap`)."""
        base = self.key(c, 0)[:-1]

        def count(kk: int) -> int:
            record = choose(c)
            return len(record.arrays(c, kk)) if record.arrays is not None else len(record.build(c, kk).flows)
        if base not in self.flows:
            self.flows[base] = (count(1), None)
        f1, d = self.flows[base]
        if cap is not None and f1 > cap:
            return f1
        if d is None:
            d = count(2) - f1
            self.flows[base] = (f1, d)
        return f1 + d * (k - 1)

    def get(self, c: Cluster, k: int, cap: int = FLOW_CAP) -> Prepared | None:
        key = self.key(c, k)
        if key in self.cache:
            self.cache.move_to_end(key)
            return self.cache[key]
        if self.estimate(c, k, cap) > cap:
            return None
        record = choose(c)
        try:
            fa = record.arrays(c, k) if record.arrays is not None else None
            if fa is None:
                sched = record.build(c, k)
        except OptccError:
            return None
        flows = len(fa if fa is not None else sched.flows)
        self.smallest_piece[key] = min(fa.pieces if fa is not None else sched.pieces)
        if flows > cap:
            return None
        # the registry's array form where the construction has one: the same flows, timed equal
        # (tests/optcc/test_flow_arrays.py, tests/optcc/test_event_arrays.py), without building Flow objects;
        # a grid beyond int64 is timed from the built schedule (Prepared falls back to optcc.timing)
        try:
            prep = Prepared.from_arrays(c, fa) if fa is not None else Prepared(sched)
        except OverflowError:
            prep = Prepared(record.build(c, k))
        if flows > FLOW_CAP:               # a deep search's schedule: timed once, not kept
            return prep
        self.cache[key] = prep
        if len(self.cache) > self.size:
            self.cache.popitem(last=False)
        return prep


SCHEDULES = _Schedules()


class _Reached(Exception):
    """search_k's early stop: a k within the target was found, or the evaluation budget is spent
    (unwinds _walk)."""


def search_k(c: Cluster, n: int, k_start: int, k_max: int = K_MAX, cap: int = FLOW_CAP,
             target: Fraction | None = None, max_evals: int | None = None,
             discipline: str = DISCIPLINE) -> dict:
    """Event time of OptCC at the k the search picks (module docstring), under the port
    `discipline`. `complete` is False when
    some k it needed was over `cap` flows (then `time` is the best event time seen, or None), and
    when the best k is a cap k_max below K_MAX (the optimum may lie beyond it).
    With `target`, the search stops at the first k whose event time is ≤ target (enough for a
    PASS; `complete` is then False: that k need not be the best). With `max_evals`, it stops after
    that many event timings (`complete` False if the walk was not over: the best k seen is reported)."""
    o, li, lat = latency_units(c, n)
    seen: dict = {}
    preps: dict = {}                         # the best k's Prepared (for its times at other latencies)
    complete = True

    def at(k: int):
        nonlocal complete
        k = max(1, min(k_max, k))
        if k not in seen and max_evals is not None and len(seen) >= max_evals:
            complete = False
            raise _Reached
        if k not in seen:
            prep = SCHEDULES.get(c, k, cap)
            if prep is None:
                complete = False
            try:
                seen[k] = None if prep is None else prep.event_time(o, li, lat, discipline)
            except OverflowError:            # arrays whose grid × this latency is beyond int64
                prep = Prepared(choose(c).build(c, k))
                seen[k] = prep.event_time(o, li, lat, discipline)
            if seen[k] is not None and all((seen[k], k) < (v, j) for j, v in seen.items() if j != k and v is not None):
                preps.clear()
                preps[k] = prep              # the best (time, k) so far: the one k_best picks
            if target is not None and seen[k] is not None and seen[k] <= target:
                complete = False
                raise _Reached
        return seen[k]

    def score(k):
        v = at(k)
        return (1, 0) if v is None else (0, v)

    try:
        _walk(score, k_start, k_max)
    except _Reached:
        pass
    known = {k: v for k, v in seen.items() if v is not None}
    if not known:
        return {"time": None, "k": None, "complete": False, "evaluated": len(seen), "prep": None}
    k_best = min(known, key=lambda k: (known[k], k))
    if k_best == k_max < K_MAX:     # best at a cost cap below K_MAX: a larger k may be faster
        complete = False
    return {"time": known[k_best], "k": k_best, "complete": complete, "evaluated": len(seen),
            "prep": preps.get(k_best)}


def _walk(score, k_start: int, k_max: int) -> None:
    """The search's visiting order (module docstring): ×√2 steps down and up from k_start while the
    score improves, then REFINE_ROUNDS ternary rounds in the bracket around the best."""
    best = max(1, min(k_max, k_start))
    score(best)
    for step in (1 / ROOT2, ROOT2):           # ×√2 steps (at least ±1) while the event time improves
        while True:
            nxt = int(round(best * step))
            nxt = max(1, min(k_max, min(nxt, best - 1) if step < 1 else max(nxt, best + 1)))
            if nxt == best or score(nxt) >= score(best):
                break
            best = nxt
    lo, hi = max(1, int(best / ROOT2)), min(k_max, int(math.ceil(best * ROOT2)))
    for _ in range(REFINE_ROUNDS):            # ternary rounds inside the bracket
        if hi - lo <= 2:
            break
        m1, m2 = lo + (hi - lo) // 3, hi - (hi - lo) // 3
        if score(m1) <= score(m2):
            hi = m2
        else:
            lo = m1


def point(p: int, g: int, ells, model: str, n: int, tol: float, bandwidth=S.NIC_BANDWIDTH,
          k_max: int = K_MAX, event: bool = True, deep_cap: int | None = None, cap: int = FLOW_CAP) -> dict:
    """`_point`, with the size of what its verdict's k moves: `segment_bytes` = n/k and `piece_bytes`
    (the smallest piece, where the schedule at that k was built)."""
    out = _point(p, g, ells, model, n, tol, bandwidth, k_max, event, deep_cap, cap)
    out["segment_bytes"] = n // out["k"] if out["k"] else None
    out["piece_bytes"] = piece_bytes(cluster(p, g, ells, model, bandwidth), out["k"], n)
    return out


def _point(p: int, g: int, ells, model: str, n: int, tol: float, bandwidth=S.NIC_BANDWIDTH,
           k_max: int = K_MAX, event: bool = True, deep_cap: int | None = None, cap: int = FLOW_CAP) -> dict:
    """One grid point: the intervals, the verdict (PASS / FAIL / undecided; FAIL by event time or
    refuted by the bound).
    `deep_cap`: a point left undecided is searched again with schedules of up to that many flows and
    DEEP_EVALUATIONS event timings (not stopping at the first k within the tolerance: the best k found
    within that budget is reported), PASS if within the tolerance, FAIL only if that search is complete;
    a point without a closed form gets no timing budget (its walk runs to its end, so it can FAIL);
    not where k is capped below K_MAX (the rails row's cost rule: its search could not FAIL). A
    point without a closed form gets that pass with NO_CLOSED_FORM_CAP whatever `deep_cap`.
    `cap`: the search's own flow cap (FLOW_CAP; the O(1/p) fits' full run raises it)."""
    c = cluster(p, g, ells, model, bandwidth)
    ring = nccl_event(p, g, model, n, bandwidth)
    try:
        k_cf, mt = auto_segments("optcc", c, n, k_max)
    except OptccError:                       # no closed form for this cluster (e.g. slow NVLink, q ≥ 3)
        k_cf, mt = 1, None
    upper = mt.time if mt is not None and mt.valid else None
    low = bound_time(c, n)
    out = {"nccl_event": float(ring), "k_closed_form": k_cf,
           "closed_form_overhead": None if mt is None else float(mt.time / ring - 1),
           "closed_form_valid": mt is not None and mt.valid,
           "bound_overhead": float(low / ring - 1)}
    if out["bound_overhead"] > tol:          # no schedule can pass: FAIL, refuted by the bound, not searched
        out.update(verdict=FAIL, overhead=out["bound_overhead"], k=k_cf, decided_by=REFUTED_BY_BOUND,
                   event_k=None, event_complete=False, event_evaluated=0, event_overhead=None)
        return _at_latencies(out, c, n, tol, bandwidth, {})
    event = event or mt is None              # no closed form: the event search is the only value there is
    ev = search_k(c, n, k_cf, k_max, cap) if event else {"time": None, "k": None, "complete": False, "evaluated": 0,
                                                     "prep": None}
    preps = {ev["k"]: ev.pop("prep")}
    out["event_k"], out["event_complete"], out["event_evaluated"] = ev["k"], ev["complete"], ev["evaluated"]
    out["event_overhead"] = None if ev["time"] is None else float(ev["time"] / ring - 1)
    if ev["time"] is not None and ev["complete"]:
        ov = ev["time"] / ring - 1
        out.update(verdict=PASS if ov <= tol else FAIL, overhead=float(ov), k=ev["k"], decided_by="event time")
        return _at_latencies(out, c, n, tol, bandwidth, preps)
    cands = [(t, k, how) for t, k, how in ((upper, k_cf, "upper bound"), (ev["time"], ev["k"], "event time"))
             if t is not None]
    if not cands:
        out.update(verdict=UNDECIDED, overhead=None, k=k_cf, decided_by="none")
    else:
        t, k, how = min(cands, key=lambda x: x[0])
        ov = float(t / ring - 1)
        out.update(verdict=PASS if ov <= tol else UNDECIDED, overhead=ov, k=k, decided_by=how)
    deep = deep_cap or (NO_CLOSED_FORM_CAP if mt is None else None)
    if out["verdict"] == UNDECIDED and event and deep and k_max >= K_MAX:   # a capped k cannot FAIL
        preps.update(_deep(out, c, n, k_cf, k_max, deep, ring, tol, None if mt is None else DEEP_EVALUATIONS))
    return _at_latencies(out, c, n, tol, bandwidth, preps)


def _at_latencies(out: dict, c: Cluster, n: int, tol: float, bandwidth, preps: dict) -> dict:
    """The point's verdict with o, Li and L times each LATENCY_FACTORS, reusing its search (no new
    one): NCCLNoFailure's event time and the bound at that latency; OptCC at the point's k, by event
    time where its verdict was (the Prepared schedule its search kept), else by the closed form at
    that k (an upper bound). PASS if within the tolerance; FAIL if the bound alone is over it, or
    the point FAILed by event time and is still over at its k; else undecided. `fragile`: some
    factor's verdict is PASS or FAIL and differs from the point's (`flips`; in `out`, returned)."""
    from optcc.model_time import model_time
    at = {}
    for f in LATENCY_FACTORS:
        cf = scaled(c, f)
        ring = nccl_event(c.p, c.g, c.latency_model, n, bandwidth, f)
        bound = float(bound_time(cf, n) / ring - 1)
        ov, how = None, "none"
        k = out["k"]
        if bound > tol:
            verdict, how = FAIL, REFUTED_BY_BOUND
        else:
            prep = preps.get(k)
            if out["decided_by"].startswith("event time") and prep is not None:
                ov, how = float(prep.event_time(*latency_units(cf, n)) / ring - 1), "event time at the point's k"
            else:
                try:
                    mt = model_time("optcc", cf, k, n)
                except OptccError:
                    mt = None
                if mt is not None and mt.valid:
                    ov, how = float(mt.time / ring - 1), "upper bound at the point's k"
            if ov is not None and ov <= tol:
                verdict = PASS
            elif ov is not None and out["verdict"] == FAIL and how.startswith("event time"):
                verdict = FAIL
            else:
                verdict = UNDECIDED
        at[str(f)] = {"verdict": verdict, "overhead": ov, "bound_overhead": bound, "decided_by": how}
    out["at_latency"] = at
    out["fragile"] = flips(out["verdict"], [v["verdict"] for v in at.values()])
    _disciplines(out, c, n, tol, bandwidth, preps)
    return out


def flips(verdict: str, others) -> bool:
    """Fragile: some other verdict is decided (PASS or FAIL) and differs (undecided there is no flip:
    a k not searched again may only be over)."""
    return any(v in (PASS, FAIL) and v != verdict for v in others)


def _disciplines(out: dict, c: Cluster, n: int, tol: float, bandwidth, preps: dict) -> None:
    """The point under each of OTHER_DISCIPLINES (optcc.timing): refuted by the bound as before (a
    lower bound of every port rule); else OptCC's event time at the point's k under that
    discipline where its search kept the schedule (shared: a Schedule of at most SHARED_FLOW_CAP
    flows), against NCCLNoFailure's under the same: PASS within the tolerance; over it, under a
    discipline of SEARCHED_DISCIPLINES, the search over k again under that discipline (from the
    point's k, at most DISCIPLINE_EVALUATIONS timings, stopping at the first k within the
    tolerance): PASS at that k, FAIL where the search was complete, else undecided with the best k
    it saw; under the others undecided (over it at the exclusive search's k; or "not computed").
    In `out["disciplines"]`, with the point's own verdict under DISCIPLINE and each entry's k."""
    res = {DISCIPLINE: {"verdict": out["verdict"], "overhead": out["overhead"], "k": out["k"], "decided_by": out["decided_by"]}}
    prep = preps.get(out["k"])
    for d in OTHER_DISCIPLINES:
        if out["decided_by"] == REFUTED_BY_BOUND:
            res[d] = {"verdict": FAIL, "overhead": out["overhead"], "k": None, "decided_by": REFUTED_BY_BOUND}
            continue
        small = prep is not None and (d != "shared" or (prep.schedule is not None and prep.n <= SHARED_FLOW_CAP))
        if not small or not out["decided_by"].startswith("event time"):
            res[d] = {"verdict": UNDECIDED, "overhead": None, "k": None, "decided_by": "not computed"}
            continue
        ring = nccl_event(c.p, c.g, c.latency_model, n, bandwidth, Fraction(1), d)
        ov = float(prep.event_time(*latency_units(c, n), discipline=d) / ring - 1)
        if ov <= tol:
            res[d] = {"verdict": PASS, "overhead": ov, "k": out["k"], "decided_by": "event time at the point's k"}
        elif d in SEARCHED_DISCIPLINES:
            res[d] = _searched(c, n, out["k"], ring, tol, d)
        else:
            res[d] = {"verdict": UNDECIDED, "overhead": ov, "k": out["k"],
                      "decided_by": "event time at the point's k (over it; k not searched)"}
    out["disciplines"] = res


def _searched(c: Cluster, n: int, k_start: int, ring: Fraction, tol: float, discipline: str) -> dict:
    """A point's verdict under `discipline` by its own search over k (`_disciplines`)."""
    ev = search_k(c, n, k_start, target=ring * (1 + Fraction(tol).limit_denominator(10**6)),
                  max_evals=DISCIPLINE_EVALUATIONS, discipline=discipline)
    if ev["time"] is None:
        return {"verdict": UNDECIDED, "overhead": None, "k": None, "decided_by": "not computed (over the flow cap)"}
    ov = float(ev["time"] / ring - 1)
    if ov <= tol:
        verdict, how = PASS, "event time (k searched under this discipline)"
    elif ev["complete"]:
        verdict, how = FAIL, "event time (k searched under this discipline)"
    else:
        verdict, how = UNDECIDED, "event time (k searched under this discipline, incomplete: best k seen)"
    return {"verdict": verdict, "overhead": ov, "k": ev["k"], "decided_by": how}


def piece_bytes(c: Cluster, k: int | None, n: int) -> int | None:
    """Bytes of the smallest piece of OptCC's schedule at k, where one was built (else None)."""
    x = None if k is None else SCHEDULES.smallest_piece.get(SCHEDULES.key(c, k))
    return None if x is None else int(x * n)


def fixed_k(p: int, g: int, ells, model: str, n: int, tol: float, k: int, bandwidth=S.NIC_BANDWIDTH) -> dict:
    """The point's verdict with k fixed (no search): refuted by the bound where it is over the
    tolerance; else the event time at k where p ≤ P_EVENT_MAX and the schedule has ≤ FLOW_CAP flows
    (PASS or FAIL: exact for that k), else the closed form at k (an upper bound: PASS or undecided).
    Beyond P_EVENT_MAX no schedule is built, not even for its flow estimate (a cost rule, as the
    search's: there every row's schedule at k ≥ FIXED_K[0] is over FLOW_CAP)."""
    from optcc.model_time import model_time
    c = cluster(p, g, ells, model, bandwidth)
    ring = nccl_event(p, g, model, n, bandwidth)
    out = {"k": k, "segment_bytes": n // k, "piece_bytes": None}
    bound = float(bound_time(c, n) / ring - 1)
    if bound > tol:
        out.update(verdict=FAIL, overhead=bound, decided_by=REFUTED_BY_BOUND)
        return out
    prep = SCHEDULES.get(c, k) if p <= P_EVENT_MAX else None
    if prep is not None:
        try:
            ov = float(prep.event_time(*latency_units(c, n)) / ring - 1)
            out.update(verdict=PASS if ov <= tol else FAIL, overhead=ov, decided_by="event time",
                       piece_bytes=piece_bytes(c, k, n))
            return out
        except OverflowError:
            pass
    try:
        mt = model_time("optcc", c, k, n)
    except OptccError:
        mt = None
    if mt is None or not mt.valid:
        out.update(verdict=UNDECIDED, overhead=None, decided_by="none (no closed form at this k)")
        return out
    ov = float(mt.time / ring - 1)
    out.update(verdict=PASS if ov <= tol else UNDECIDED, overhead=ov, decided_by="upper bound")
    return out


def _deep(out: dict, c: Cluster, n: int, k_start: int, k_max: int, cap: int, ring: Fraction, tol: float,
          max_evals: int | None) -> dict:
    """The deep pass of `point` on an undecided point (in place; `deep_*` keys record it); returns
    {k: its Prepared} for the best k it timed."""
    ev = search_k(c, n, k_start, k_max, cap=cap, max_evals=max_evals)
    preps = {ev["k"]: ev.pop("prep")}
    out.update(deep_cap=cap, deep_k=ev["k"], deep_evaluated=ev["evaluated"], deep_complete=ev["complete"],
               deep_overhead=None if ev["time"] is None else float(ev["time"] / ring - 1))
    if ev["time"] is None:
        return preps
    ov = float(ev["time"] / ring - 1)
    if ov <= tol:
        out.update(verdict=PASS, overhead=ov, k=ev["k"], decided_by="event time (deep search)")
    elif ev["complete"]:
        out.update(verdict=FAIL, overhead=ov, k=ev["k"], decided_by="event time (deep search)")
    elif out["overhead"] is None or ov < out["overhead"]:
        out.update(overhead=ov, k=ev["k"], decided_by="event time (deep search, incomplete)")
    return preps
