"""Direct AllReduce on a g = 1 cluster: every node owns a shard x_j of the data, sized by a small
exact LP over the slowdowns, and talks to every other node directly (derived).

Derivation (derived; docs/failures.md "Direct rails"):
- Node j owns shard j, a fraction x_j of the data (Σ x_j = 1, x_j ≥ 0). Reduce-scatter: every
  i ≠ j adds its copy of shard j into j; all-gather: j copies the reduced shard to every i ≠ j.
- Exclusive-port model (optcc.timing): a NIC flow of `size` at rate r lasts size·m_ij/r with
  m_ij = max(ℓ_i, ℓ_j) and takes r of both ports. So node i's send load (RS of the other
  shards' copies to their owners, AG of its own shard to everybody) equals its receive load:
  T_i(x) = Σ_{j≠i} (x_i + x_j)·m_ij, and a fluid schedule takes T(x) = max_i T_i(x).
- `shards` minimises T(x): min t s.t. x_i·Σ_{j≠i} m_ij + Σ_{j≠i} x_j·m_ij ≤ t, Σ x = 1, x ≥ 0,
  solved exactly by a two-phase simplex over Fractions with Bland's rule (finite, deterministic).
  Uniform ℓ gives x_j = 1/q and T = ℓ·2(q−1)/q (the ring's time). [1, 4/3, 2, 1] gives
  x = (1/3, 4/15, 1/15, 1/3) and T = 34/15 = 2.2667, [1, 2, 2, 1] T = 8/3, [2, 3/2, 1, 1]
  T = 2.381: each equals the 4-node exclusive LP (tests/optcc/test_direct.py checks against GLOP).
  With one straggler at large q it is worse than optcc_single (2 against T_ex), so it is only
  ever a candidate beside the other constructions.
- Schedule: k chunks, pieces (chunk c, shard j) of size x_j/k (none where x_j = 0). Round 0 is
  the RS of chunk 0, round r = 1..k−1 the RS of chunk r plus the AG of chunk r−1, round k the AG
  of chunk k−1. All flows of a round start at its start; a flow of full-rate duration d runs at
  rate d/L, L the round's largest port load (summed full-rate durations over one node's send
  or receive port), so every flow lasts exactly L and no port carries more than 1. A middle
  round has L = T(x)/k, rounds 0 and k at most that, so the slot time is ≤ (1 + 1/k)·T(x)
  (`slot_time` computes it exactly without building).
An "add" landing only ever meets other adds into the same (owner, piece) at the round end, and
the all-gather reads the owner's value at the next round's start, after they all landed.
"""
from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from functools import lru_cache

from optcc.algorithms.stated import states_slot_time
from optcc.algorithms.limits import check_segments
from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.schedule import Flow, Schedule

NAME = "direct"


def _check(cluster: Cluster) -> None:
    if cluster.g != 1:
        raise OptccError("g", "the direct AllReduce covers one GPU per server (g = 1)")


def _m(ell: Sequence[Fraction], i: int, j: int) -> Fraction:
    return max(ell[i], ell[j])


def loads(ell: Sequence[Fraction], x: Sequence[Fraction]) -> list[Fraction]:
    """T_i(x) = Σ_{j≠i} (x_i + x_j)·max(ℓ_i, ℓ_j) for every node i (send = receive load)."""
    q = len(ell)
    return [sum(((x[i] + x[j]) * _m(ell, i, j) for j in range(q) if j != i), Fraction(0)) for i in range(q)]


def _simplex(A: Sequence[Sequence[Fraction]], b: Sequence[Fraction], c: Sequence[Fraction]) -> list[Fraction]:
    """min c·z s.t. A z = b, z ≥ 0 (b ≥ 0), exact two-phase simplex with Bland's rule.
    Returns the optimal z (the problem here is always feasible and bounded)."""
    m, n = len(A), len(c)
    # tableau rows: [A | I_art | b]; basis starts at the artificials
    T = [list(A[r]) + [Fraction(int(r == s)) for s in range(m)] + [b[r]] for r in range(m)]
    basis = [n + r for r in range(m)]

    def pivot(r: int, col: int) -> None:
        pr = T[r]
        inv = 1 / pr[col]
        T[r] = pr = [v * inv for v in pr]
        for rr in range(m):
            if rr != r and T[rr][col] != 0:
                f = T[rr][col]
                T[rr] = [a - f * v for a, v in zip(T[rr], pr)]
        basis[r] = col

    def run(cost: list[Fraction], allowed: int) -> None:
        while True:
            # reduced costs c_j − c_B·column_j, Bland: the smallest improving index enters
            enter: int | None = None
            for col in range(allowed):
                if col in basis:
                    continue
                red = cost[col] - sum(cost[basis[r]] * T[r][col] for r in range(m))
                if red < 0:
                    enter = col
                    break
            if enter is None:
                return
            best: tuple[Fraction, int] | None = None
            for r in range(m):
                if T[r][enter] > 0:
                    ratio = T[r][-1] / T[r][enter]
                    if best is None or ratio < best[0] or (ratio == best[0] and basis[r] < basis[best[1]]):
                        best = (ratio, r)
            assert best is not None        # bounded: the caller's problems always have a row
            pivot(best[1], enter)

    zero = Fraction(0)
    run([zero] * n + [Fraction(1)] * m, n + m)          # phase 1: drive the artificials out
    for r in range(m):                                   # degenerate artificials left in the basis
        if basis[r] >= n:
            col = next((j for j in range(n) if T[r][j] != 0), None)
            if col is not None:
                pivot(r, col)
    run(list(c) + [zero] * m, n)                         # phase 2 over the real columns only
    z = [zero] * n
    for r in range(m):
        if basis[r] < n:
            z[basis[r]] = T[r][-1]
    return z


def shard_lp(ell: Sequence[Fraction]) -> list[Fraction]:
    """The exact optimal shard sizes x for slowdowns `ell` (module docstring's LP); solved once per
    slowdown tuple (the rails' plan asks it for every k)."""
    return list(_shard_lp(tuple(Fraction(v) for v in ell)))


@lru_cache(maxsize=256)
def _shard_lp(ell: tuple[Fraction, ...]) -> tuple[Fraction, ...]:
    q = len(ell)
    if q == 1:
        return (Fraction(1),)
    # variables x_0..x_{q−1}, t, slacks s_0..s_{q−1}: row i is A_i·x − t + s_i = 0; Σ x = 1.
    # Rows are multiplied by −1 so that b ≥ 0 holds (b = 0 there anyway).
    n = 2 * q + 1
    A, b = [], []
    for i in range(q):
        row = [Fraction(0)] * n
        for j in range(q):
            if j != i:
                row[i] += _m(ell, i, j)
                row[j] += _m(ell, i, j)
        row[q] = Fraction(-1)
        row[q + 1 + i] = Fraction(1)
        A.append(row)
        b.append(Fraction(0))
    A.append([Fraction(1)] * q + [Fraction(0)] * (q + 1))
    b.append(Fraction(1))
    c = [Fraction(0)] * q + [Fraction(1)] + [Fraction(0)] * q
    return tuple(_simplex(A, b, c)[:q])


def shards(cluster: Cluster) -> list[Fraction]:
    """Exact optimal shard sizes x_j (Σ = 1) of `cluster` (g = 1)."""
    _check(cluster)
    return shard_lp(cluster.slowdown)


def fluid_time(cluster: Cluster) -> Fraction:
    """T(x) at the optimal x: the direct AllReduce's time without the pipeline fill."""
    return max(loads(cluster.slowdown, shards(cluster)))


def _round_loads(ell: Sequence[Fraction], x: Sequence[Fraction], k: int) -> tuple[Fraction, Fraction, Fraction]:
    """Largest port load L of round 0 (RS only), a middle round (RS + AG) and round k (AG only)."""
    q = len(ell)
    rs_send = [sum((x[j] * _m(ell, i, j) for j in range(q) if j != i), Fraction(0)) for i in range(q)]
    rs_recv = [x[i] * sum((_m(ell, i, j) for j in range(q) if j != i), Fraction(0)) for i in range(q)]
    # AG: node i sends its shard (rs_recv[i]) and receives the others' (rs_send[i])
    first = max(max(rs_send), max(rs_recv)) / k
    middle = max(a + b for a, b in zip(rs_send, rs_recv)) / k
    return first, middle, first


def _check_lag(lag: object) -> int:
    if isinstance(lag, bool) or not isinstance(lag, int) or lag < 1:
        raise OptccError("lag", f"expected a positive integer, got {lag!r}")
    return lag


def slot_time(cluster: Cluster, k: int, lag: int = 1) -> Fraction:
    """Exact slot time of `build(cluster, k, lag)` (n/B), without building it: min(k, lag)
    rounds of reduce-scatter only and as many of all-gather only, k − lag rounds of both."""
    k = check_segments(k)
    lag = _check_lag(lag)
    _check(cluster)
    first, middle, last = _round_loads(cluster.slowdown, shards(cluster), k)
    return min(k, lag) * (first + last) + max(0, k - lag) * middle


@states_slot_time("slot_time")
def build(cluster: Cluster, k: int, lag: int = 1) -> Schedule:
    """The direct AllReduce of the module docstring with k chunks (exclusive port model); round
    r carries the all-gather of chunk r − lag (lag > 1 gives every all-gather lag − 1 rounds
    of slack after its chunk's reduce-scatter landed: few_servers)."""
    k = check_segments(k)
    lag = _check_lag(lag)
    _check(cluster)
    ell, q = cluster.slowdown, cluster.p
    x = shards(cluster)
    owners = [j for j in range(q) if x[j] != 0]
    index = {(c, j): c * len(owners) + n for c in range(k) for n, j in enumerate(owners)}
    pieces = [x[j] / k for c in range(k) for j in owners]
    first, middle, last = _round_loads(ell, x, k)
    flows: list[Flow] = []
    start = Fraction(0)
    rates: dict[tuple[int, int, int], Fraction] = {}     # (round kind, j, i) -> x_j/k·max(ℓ_i, ℓ_j)/L: one per value

    def rate(kind: int, L: Fraction, j: int, i: int) -> Fraction:
        key = (kind, j, i)
        if key not in rates:
            rates[key] = x[j] / k * _m(ell, i, j) / L
        return rates[key]
    for r in range(k + lag):
        rs, ag = r < k, r >= lag
        if not (rs or ag):                     # k < lag: no round between the two halves
            continue
        kind = 1 if rs and ag else (0 if rs else 2)
        L = (first, middle, last)[kind]
        if rs:                              # reduce-scatter of chunk r: i adds into owner j
            for j in owners:
                for i in range(q):
                    if i != j:
                        flows.append(Flow(i, j, index[(r, j)], "add", start, "nic", rate(kind, L, j, i)))
        if ag:                                 # all-gather of chunk r − lag: owner j copies out
            for j in owners:
                for i in range(q):
                    if i != j:
                        flows.append(Flow(j, i, index[(r - lag, j)], "copy", start, "nic", rate(kind, L, j, i)))
        start += L
    meta = {"algorithm": NAME, "segments": k, "capacity": "exclusive", **({"lag": lag} if lag != 1 else {}),
            "shards": [str(v) for v in x],
            "construction": "direct reduce-scatter / all-gather with LP shard sizes, see direct (derived)"}
    return Schedule(cluster, pieces, flows, meta=meta)
