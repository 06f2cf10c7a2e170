"""Property "numerics": what floating point (or a fixed-width integer) does to a proved schedule.

The sum property is exact over the integers; a schedule with cancelling coefficients
(C·x then (1−C)·x, long ±1 chains) is proved yet wrong in float32 or overflows int32. For one
dtype we execute every piece as summation trees, in the runner's operation order
(verifier.determinism), and compute for every tree node v its exact expression E_v = Σ c_i x_i
and a componentwise error bound e_v ≥ 0 with  |computed(v) − E_v(x)| ≤ Σ_i e_v,i |x_i|
(standard model, u = eps/2 the unit roundoff, one rounding per operation; no underflow):

  leaf x_i          E = x_i,  e = 0
  a + b             E = E_a + E_b,  e = (e_a + e_b)(1 + u) + u|E|
  a + c·b (c ≠ ±1)  t = c·b rounded (c itself may round too: 2u + u²),
                    e = (e_a + |c|e_b + (2u+u²)|c|(|E_b| + e_b))(1 + u) + u|E|
  c·a (local op)    e = |c|e_a(1 + 2u + u²) + (2u+u²)|c||E_a|   (c = ±1: exact)

(derived: each line is |fl(y) − y| ≤ u|y| applied to the operation's operands, with |y|
bounded by the exact value plus the operands' errors). Bounds are carried in float64 and
inflated by (1 + 2⁻⁵⁰) after every step, which covers float64's own rounding, so the result is
an upper bound. Reported, in units of eps·Σ|x_i|:
  bound_eps   max over final values of max_i e_i / eps (the rigorous worst case);
  ring_bound_eps  the same for the ring: a chain of p − 1 additions, ((1+u)^(p−1) − 1)/eps;
  summation_tree  every intermediate is a 0/1 combination of distinct inputs formed by plain
                  additions (no cancellation possible); then also the tree depth;
  max_intermediate_coef  the largest Σ_i |c_i| of any value ever held or formed (products
                  c·b included). For integer dtypes the run is exact unless an intermediate
                  overflows; the ring's intermediates are partial sums (Σ|c_i| ≤ p), so a
                  schedule with max_intermediate_coef > p can overflow where the result does not.
ok (the property holds): bound_eps ≤ ring_bound_eps for float dtypes; max_intermediate_coef ≤ p
for integer dtypes. `optcc run` refuses a schedule that fails it unless told otherwise.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from verifier.determinism import ADD, AXPY, LEAF, TreeTable, execute_trees, runner_events
from verifier.events import piece_signature

if TYPE_CHECKING:
    from optcc.schedule import Schedule
    from optcc.timing import IntegerTimes

# unit roundoff u = eps/2 of each float dtype (IEEE binary32/binary16, bfloat16: 8-bit significand)
UNIT_ROUNDOFF = {"float32": 2.0**-24, "bfloat16": 2.0**-8, "float16": 2.0**-11, "float64": 2.0**-53}
INT_DTYPES = {"int32", "int64"}
DTYPES = tuple(UNIT_ROUNDOFF) + tuple(sorted(INT_DTYPES))
_UP = 1.0 + 2.0**-50          # per-step inflation covering float64 rounding of the bound itself


@dataclass
class NumericsReport:
    dtype: str
    ok: bool
    summation_tree: bool
    depth: int | None
    bound_eps: float | None
    ring_bound_eps: float | None
    max_intermediate_coef: int
    p: int
    message: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def ring_bound_eps(p: int, dtype: str) -> float:
    """The ring's worst case in units of eps·Σ|x|: one chain of p − 1 additions (derived above)."""
    u = UNIT_ROUNDOFF[dtype]       # expm1/log1p: 1 + u rounds to 1 in float64 for float64's own u
    return math.expm1((p - 1) * math.log1p(u)) / (2 * u) * _UP ** (2 * p)


def analyze_numerics(schedule: Schedule, dtype: str = "float32", grid: IntegerTimes | None = None) -> NumericsReport:
    """The numerics of `schedule` for `dtype` (module docstring). Linear in the events × p."""
    from optcc.errors import OptccError
    if dtype not in DTYPES:
        raise OptccError("dtype", f"unknown dtype {dtype!r} (known: {', '.join(DTYPES)})")
    if grid is None:
        from optcc.timing import IntegerTimes
        grid = IntegerTimes(schedule)
    p = schedule.cluster.p
    table = TreeTable()
    finals: set[int] = set()
    seen: set[tuple[tuple[int, ...], ...]] = set()
    for ev in runner_events(schedule, grid):
        sig = piece_signature(schedule, ev)
        if sig not in seen:
            seen.add(sig)
            finals.update(execute_trees(sig, table).values())
    is_int = dtype in INT_DTYPES
    u = 0.0 if is_int else UNIT_ROUNDOFF[dtype]
    u2 = 2 * u + u * u
    exprs: list[dict[int, int]] = []
    errs: list[dict[int, float]] = []
    depth: list[int] = []
    tree = True
    max_coef = 1
    for node in table.nodes:
        kind = node[0]
        if kind == LEAF:
            exprs.append({node[1]: 1})
            errs.append({})
            depth.append(0)
            continue
        if kind in (ADD, AXPY):
            a, b = (node[1], node[2]) if kind == ADD else (node[1], node[3])
            c = 1 if kind == ADD else node[2]
            ea, eb = exprs[a], exprs[b]
            E = dict(ea)
            for i, v in eb.items():
                w = E.get(i, 0) + c * v
                if w:
                    E[i] = w
                else:
                    E.pop(i, None)
            max_coef = max(max_coef, abs(c) * sum(map(abs, eb.values())), sum(map(abs, E.values())))
            ra, rb = errs[a], errs[b]
            exact_t = abs(c) == 1
            e = {}
            for i in set(ra) | set(rb) | set(E) | set(eb):
                t_err = abs(c) * rb.get(i, 0.0)
                if not exact_t:
                    t_err += u2 * abs(c) * (abs(eb.get(i, 0)) + rb.get(i, 0.0))
                val = ((ra.get(i, 0.0) + t_err) * (1 + u) + u * abs(E.get(i, 0))) * _UP * _UP
                if val:
                    e[i] = val
            tree = tree and kind == ADD and all(v == 1 for v in E.values())
            depth.append(max(depth[a], depth[b]) + 1)
        else:                                             # SCALE
            c, a = node[1], node[2]
            E = {i: c * v for i, v in exprs[a].items()}
            max_coef = max(max_coef, sum(map(abs, E.values())))
            if abs(c) == 1:
                e = dict(errs[a])
            else:
                e = {i: (abs(c) * errs[a].get(i, 0.0) * (1 + u2) + u2 * abs(c) * abs(v)) * _UP * _UP
                     for i, v in exprs[a].items()}
            tree = tree and c == 1
            depth.append(depth[a])
        exprs.append(E)
        errs.append(e)
    worst = max((max(errs[f].values(), default=0.0) for f in finals), default=0.0)
    tree_depth = max((depth[f] for f in finals), default=0) if tree else None
    if is_int:
        ok = max_coef <= p
        bound = ring = None
        msg = (f"{dtype}: exact; intermediates stay partial sums (largest Σ|c| = {max_coef} ≤ p = {p})" if ok else
               f"{dtype}: an intermediate value has Σ|c| = {_short(max_coef)} > p = {p}: it can overflow "
               f"where the result does not")
    else:
        bound = worst / (2 * u)
        ring = ring_bound_eps(p, dtype)
        ok = bound <= ring * (1 + 1e-9)
        what = (f"a summation tree of depth {tree_depth} (no cancellation)" if tree else
                f"not a summation tree (largest intermediate Σ|c| = {_short(max_coef)})")
        msg = (f"{dtype}: {what}; worst-case error ≤ {bound:.4g}·eps·Σ|x|, the ring's is "
               f"{ring:.4g}·eps·Σ|x|" + ("" if ok else " — WORSE than the ring"))
    return NumericsReport(dtype, ok, tree, tree_depth, bound, ring, max_coef, p, msg)


def summation_tree_numerics(p: int, dtype: str, why: str) -> NumericsReport:
    """Property numerics without an instance, for a schedule every value of which is a partial sum
    of distinct inputs and every result the full sum (`why` names where that is proved: for the
    ring and OptCC generators, prove-all's sum invariant, whose values are 0/1 arcs,
    verifier.parametric.values). Summation-tree lemma (derived): a result is then a binary tree of
    plain additions over the p inputs, each a leaf once, so every input is at depth ≤ p − 1 and,
    by the recursion in the module docstring (e_i ← (1 + u)·e_i + u along its path), its error is
    ≤ ((1 + u)^(p−1) − 1)|x_i|: the ring's bound. Integers: every intermediate is a partial sum
    (Σ|c| ≤ p). The reported bound is that upper bound, not the instance's exact worst case."""
    from optcc.errors import OptccError
    if dtype not in DTYPES:
        raise OptccError("dtype", f"unknown dtype {dtype!r} (known: {', '.join(DTYPES)})")
    if dtype in INT_DTYPES:
        return NumericsReport(dtype, True, True, None, None, None, p, p,
                              f"{dtype}: exact; every intermediate is a partial sum of distinct inputs "
                              f"(Σ|c| ≤ p = {p}), {why}")
    ring = ring_bound_eps(p, dtype)
    return NumericsReport(dtype, True, True, None, ring, ring, p, p,
                          f"{dtype}: summation trees of depth ≤ p − 1 = {p - 1} ({why}); worst-case error ≤ "
                          f"{ring:.4g}·eps·Σ|x|, the ring's bound (summation-tree lemma, verifier.numerics)")


def _short(n: int) -> str:
    text = str(n)
    return text if len(text) <= 20 else f"≈10^{len(text) - 1}"
