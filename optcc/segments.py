"""`--segments auto`: the k that minimises the model time for message size n on this cluster.

A cheap search over the closed forms of optcc.model_time (not a derived optimum): candidates are
a geometric grid k = ⌈1.25^i⌉ up to the largest k below the latency knee (at most K_MAX), then
an integer ternary search between the two grid points around the best one. Only k where the model is valid (below the knee, where the closed form is tested against
the event model) compete; if none is, k = 1. Tested against brute force over every k ≤ 1024
(tests/optcc_app/test_segments.py): within 1% everywhere on its grid.
The algorithm's record (optcc.algorithms.registry) may fix the answer instead: `auto_segments`
(the ring: 1, k only adds steps), or 1 for a record without pipeline segments. A segmented
record whose latency counts are "none derived" has nothing to minimise: OptccError "segments".

For a real run (`host_post_s`, the host's cost of posting one message) auto also keeps the k the
host can post in time. Derived: a healthy rank of an OptCC-like schedule posts about 4·k·H
messages (a send and a receive per piece in the reduce-scatter and in the all-gather, H = p − m
healthy GPUs) in a run of about 2·n/B, one every n/(2·B·k·H); a host that needs c_post per post
keeps up only while k·H ≤ n/(2·c_post·B) (at p = 1024, k = 25, 8 GiB, B = 50 GB/s: one post
every 3.4 µs). HOST_POST_S is c_post measured here.
"""
from __future__ import annotations

import math
from fractions import Fraction

from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.latency import units as latency_units
from optcc.model_time import ModelTime, knee_fraction, model_time

K_MAX = 1024
# measured: the host's CPU time per post of the streaming runner with the transport removed, the
# largest over a healthy rank and the straggler at p = 256, 1024 and 4096 (k = 25, ℓ = 2) and over
# an executor's runs, rounded up: `python benchmarks/first_message.py --iters 5` on this project's
# 2-core CPU machine (docs/gpu_runner.md, "Host cost per post"): the first run, which records the
# order later runs replay, 3.6-3.8 µs; later runs 2.2-2.4 µs (load average 1-2). The runner posts
# and observes on one thread, so on a host with a free core its wall time per post is this CPU
# time; the straggler pays the same per post (no thread per peer) and posts half as many messages
# as a healthy rank.
# It was 15 µs (wall, healthy rank, p = 16) with a waiter thread per peer. A GPU host has its own figure.
HOST_POST_S = Fraction(4, 10**6)


def host_segments(cluster: Cluster, n_bytes: int, host_post_s: Fraction | float) -> int:
    """The largest k with k·H ≤ n/(2·c_post·B) (module docstring; at least 1)."""
    healthy = max(1, cluster.p - len(cluster.stragglers))
    return max(1, math.floor(Fraction(n_bytes) / (2 * Fraction(host_post_s) * cluster.bandwidth * healthy)))


def parse_segments(text: str | int) -> int | str:
    """'auto' or a positive integer (OptccError on field 'segments' otherwise)."""
    if isinstance(text, str) and text.strip().lower() == "auto":
        return "auto"
    try:
        k = int(text)
    except (TypeError, ValueError):
        raise OptccError("segments", f"expected a positive integer or 'auto', got {text!r}") from None
    if k < 1:
        raise OptccError("segments", f"expected a positive integer or 'auto', got {text!r}")
    return k


def knee_segments(cluster: Cluster, n_bytes: int, algo: str = "optcc") -> int:
    """Largest k with Li + L ≤ KNEE/(k·p) (halved with o > 0); K_MAX when Li + L = 0."""
    o, li, lat = latency_units(cluster, n_bytes)
    lam = (li + lat) * (2 if o > 0 else 1)
    if lam == 0:
        return K_MAX
    return max(1, min(K_MAX, math.floor(knee_fraction(algo, cluster) / (lam * cluster.p))))


def _grid(limit: int) -> list[int]:
    out: set[int] = set()
    x = 1.0
    while x <= limit:
        out.add(math.ceil(x))
        x *= 1.25
    out.add(limit)
    return sorted(out)


def _fixed_segments(algo: str, cluster: Cluster) -> int | None:
    """The record's k when it has no choice to make (its auto_segments, or 1 without segments)."""
    from optcc.algorithms.registry import served
    record = served(algo, cluster)
    if record.auto_segments is not None:
        return record.auto_segments
    return None if record.segmented else 1


def auto_segments(algo: str, cluster: Cluster, n_bytes: int, k_max: int = K_MAX) -> tuple[int, ModelTime]:
    """(k, its ModelTime): the best valid k ≤ k_max by the search in the module docstring."""
    fixed = _fixed_segments(algo, cluster)
    if fixed is not None:
        return fixed, model_time(algo, cluster, fixed, n_bytes)
    cache: dict[int, ModelTime | None] = {}

    def at(k: int) -> ModelTime | None:
        if k not in cache:
            try:
                t = model_time(algo, cluster, k, n_bytes)
            except OptccError:        # a construction without a closed form at this k
                t = None
            cache[k] = t if t is not None and t.valid else None
        return cache[k]

    limit = min(k_max, knee_segments(cluster, n_bytes, algo))
    grid = _grid(limit)
    scored = [(t.time, k) for k in grid if (t := at(k)) is not None]
    if not scored:
        return 1, model_time(algo, cluster, 1, n_bytes)
    _, best = min(scored)
    i = grid.index(best)
    lo, hi = grid[max(i - 1, 0)], min(limit, grid[min(i + 1, len(grid) - 1)])

    def value(k: int) -> Fraction | None:
        t = at(k)
        return t.time if t is not None else None

    while hi - lo > 4:                      # integer ternary search in the bracket
        m1, m2 = lo + (hi - lo) // 3, hi - (hi - lo) // 3
        v1, v2 = value(m1), value(m2)
        if v2 is None or (v1 is not None and v1 <= v2):
            hi = m2
        else:
            lo = m1
    for k in range(lo, hi + 1):
        at(k)
    times = [(t.time, k) for k, t in cache.items() if t is not None]
    time_, k = min(times)
    best_time = cache[k]
    assert best_time is not None        # k is from `times`, which holds only timed k
    return k, best_time


# With o = Li = L = 0 every extra segment looks free, so auto would pick K_MAX for a 1-byte
# message. Auto then chooses under this preset instead (NCCL's per-step latency, the cost a real
# run on NCCL pays; optcc.latency) and says so.
AUTO_DEFAULT_LATENCY_MODEL = "nccl"


def has_latency(cluster: Cluster) -> bool:
    return any(x > 0 for x in (cluster.overhead, cluster.issue_delay, cluster.latency))


def _check_accepts(algo: str, cluster: Cluster) -> None:
    """The refusal optcc.algorithms.build_schedule gives a record that does not accept the cluster
    (a dispatcher's own choice says why not): before auto times a construction that cannot build."""
    from optcc.algorithms.registry import algorithm
    record = algorithm(algo)
    if record.choose is None:
        ok, why = record.accepts(cluster)
        if not ok:
            raise OptccError("algo", f"{algo} does not accept this cluster: {why}")


NO_LATENCY_HINT = "give --latency-model to choose another"


def auto_timed_cluster(cluster: Cluster) -> Cluster:
    """The cluster auto's model times: itself, or where it states no latency, with the
    AUTO_DEFAULT_LATENCY_MODEL preset's o, Li, L."""
    if has_latency(cluster):
        return cluster
    from optcc.latency import PRESETS
    preset = PRESETS[AUTO_DEFAULT_LATENCY_MODEL]
    return cluster.with_latency(preset.overhead, preset.issue_delay, preset.latency, preset.name)


def choose_segments(value: str | int, algo: str, cluster: Cluster, n_bytes: int, build: bool = True,
                    no_latency_hint: str = NO_LATENCY_HINT,
                    say_default_latency: bool = True, host_post_s: Fraction | float | None = None) -> tuple[int, list[str]]:
    """(k, notes): the integer given, or auto's choice with a note for each decision a user should
    see: a cluster without latency is timed under AUTO_DEFAULT_LATENCY_MODEL (noted unless not
    `say_default_latency`, ending with `no_latency_hint`, how to give another), and with `build`
    the k is kept among those optcc.algorithms.check_work lets us build here (never capped
    silently). A record that does not accept the cluster is refused (field "algo", as the build
    would); where the model has no time for it here (its latency counts are "none derived", or its
    closed form refuses the cluster) there is nothing to minimise: k = 1, with a note, as where
    every k is over the knee. With `host_post_s` (a real run) k stays within host_segments, noted."""
    value = parse_segments(value)
    if isinstance(value, int):          # not "auto"
        return value, []
    _check_accepts(algo, cluster)
    fixed = _fixed_segments(algo, cluster)
    if fixed is not None:            # nothing to choose: no model time needed
        return fixed, []
    notes: list[str] = []
    timed = auto_timed_cluster(cluster)
    if timed is not cluster and say_default_latency:
        from optcc.latency import PRESETS
        preset = PRESETS[AUTO_DEFAULT_LATENCY_MODEL]
        notes.append(f"the cluster has no latency (o = Li = L = 0), so --segments auto chose k under the "
                     f"'{preset.name}' latency model ({preset.source}); {no_latency_hint}")
    try:
        k, _ = auto_segments(algo, timed, n_bytes, K_MAX)
    except OptccError as e:
        return 1, [f"--segments auto: nothing to minimise, {e.message}; using k = 1"]
    if build:
        from optcc.algorithms.limits import max_buildable_segments
        k_max = min(K_MAX, max_buildable_segments(cluster))
        if k > k_max:
            capped, _ = auto_segments(algo, timed, n_bytes, k_max)
            notes.append(f"--segments auto: k = {k} would be best, but a flow list of p = {cluster.p} is built "
                         f"only up to k = {k_max} here (optcc.algorithms.MAX_WORK); using k = {capped}")
            k = capped
    if host_post_s is not None:
        k_host = host_segments(cluster, n_bytes, host_post_s)
        if k > k_host:
            capped, _ = auto_segments(algo, timed, n_bytes, k_host)
            notes.append(f"--segments auto: k = {k} is best in the model, but this host needs about "
                         f"{float(host_post_s) * 1e6:.3g} µs to post a message (optcc.segments.HOST_POST_S) and "
                         f"k·H ≤ n/(2·c_post·B) holds only up to k = {k_host} for n = {n_bytes} bytes; using k = {capped}")
            k = capped
    return k, notes


def resolve_segments(value: str | int, algo: str, cluster: Cluster, n_bytes: int, build: bool = True) -> int:
    """The k to build with (choose_segments without its notes)."""
    return choose_segments(value, algo, cluster, n_bytes, build)[0]


def best_time(algo: str, cluster: Cluster, n_bytes: int) -> tuple[Fraction, int]:
    """(model time in n/B, k) at auto's k: what the paper checks and the sweep report."""
    k, t = auto_segments(algo, cluster, n_bytes)
    return t.time, k
