"""The class-reduced fluid LP (lp_models.fluid) solved exactly, in Fractions, by enumerating its
vertices: one variable per node class and T, so a handful of variables at any p.

Why: GLOP works in floating point and at p ≥ 8000 with ℓ = 2 it returns ABNORMAL on this
2-variable LP (coefficients n_d·ℓ of order 10⁴ against shares of order 10⁻⁴). The feasible set
{x ≥ 0, T ≥ 0 (≥ the NVLink row), Σ n_c x_c = 1, load rows ≤ ports·T} is pointed (every
variable is bounded below), T is bounded below, so the minimum is at a vertex: m + 1 unknowns,
the equality plus m tight inequalities. Every choice of m inequalities is solved by exact
Gaussian elimination and the feasible one with the least T kept. C(2m+2, m) systems: 15 for the
usual two classes, a few thousand at MAX_CLASSES.
"""
from __future__ import annotations

import itertools
from fractions import Fraction

from optcc.errors import OptccError

MAX_CLASSES = 6     # derived: C(2m+2, m) = 3003 exact systems at m = 6 (milliseconds); beyond it GLOP answers alone


def exact_load_matrix(classes, capacity: str) -> list[list[Fraction]]:
    """lp_models.fluid.load_matrix in Fractions (same formula: fan-out/in on the diagonal)."""
    m = len(classes)
    ell = [Fraction(c.ell) for c in classes]
    cnt = [c.count for c in classes]
    w = [[ell[i] if capacity == "shared" else max(ell[i], ell[j]) for j in range(m)] for i in range(m)]
    a = [[(cnt[j] - (i == j)) * w[i][j] for j in range(m)] for i in range(m)]
    for i in range(m):
        a[i][i] += sum(a[i][j] for j in range(m))
    return a


def _solve(rows, rhs):
    """The unique solution of the square system, or None when it is singular (Fractions)."""
    n = len(rows)
    M = [list(r) + [b] for r, b in zip(rows, rhs)]
    for col in range(n):
        piv = next((r for r in range(col, n) if M[r][col] != 0), None)
        if piv is None:
            return None
        M[col], M[piv] = M[piv], M[col]
        inv = 1 / M[col][col]
        M[col] = [v * inv for v in M[col]]
        for r in range(n):
            if r != col and M[r][col] != 0:
                f = M[r][col]
                M[r] = [a - f * b for a, b in zip(M[r], M[col])]
    return [M[r][n] for r in range(n)]


def best_vertex(le: list[tuple[list[Fraction], Fraction]], eq: list[tuple[list[Fraction], Fraction]], n: int,
                better) -> list[Fraction] | None:
    """The vertex of {x ∈ Qⁿ: eq rows = , le rows ≤} that `better(v, best)` prefers, by solving
    every choice of n − len(eq) tight `le` rows with the equalities (exact Gaussian elimination);
    None when there is none. The optimum of a linear objective over a pointed polyhedron is such a
    vertex (module docstring)."""
    best = None
    for chosen in itertools.combinations(range(len(le)), n - len(eq)):
        v = _solve([r for r, _ in eq] + [le[i][0] for i in chosen], [h for _, h in eq] + [le[i][1] for i in chosen])
        if v is None or any(sum((g * x for g, x in zip(row, v)), Fraction(0)) > h for row, h in le):
            continue
        if best is None or better(v, best):
            best = v
    return best


def solve_exact(classes, capacity: str, nvlink_row: Fraction | None = None):
    """(T, x per class, names of the tight rows) of the fluid LP on `classes`, exactly."""
    m = len(classes)
    if m > MAX_CLASSES:
        raise OptccError("classes", f"the exact solve enumerates vertices of at most {MAX_CLASSES} classes, "
                                    f"got {m}")
    a = exact_load_matrix(classes, capacity)
    # inequalities g·(x, T) ≤ h, with a name per row
    ineq = []
    for i, c in enumerate(classes):
        ineq.append((a[i] + [-Fraction(c.ports)], Fraction(0), f"nic[{c.name}]"))
    for j in range(m):
        ineq.append(([Fraction(-(j == i)) for i in range(m)] + [Fraction(0)], Fraction(0), f"x[{classes[j].name}] ≥ 0"))
    ineq.append(([Fraction(0)] * m + [Fraction(-1)], Fraction(0), "T ≥ 0"))
    if nvlink_row is not None:
        ineq.append(([Fraction(0)] * m + [Fraction(-1)], -Fraction(nvlink_row), "nvlink[every server]"))
    eq = ([Fraction(c.count) for c in classes] + [Fraction(0)], Fraction(1))
    best = best_vertex([(row, h) for row, h, _ in ineq], [eq], m + 1, lambda v, b: v[-1] < b[-1])
    if best is None:                  # cannot happen: the set is non-empty and pointed (module doc)
        raise OptccError("lp", "the exact fluid LP found no vertex")
    tight = [name for row, h, name in ineq if sum(g * x for g, x in zip(row, best)) == h]
    return best[-1], best[:-1], tight
