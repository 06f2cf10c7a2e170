"""The fluid LP solved exactly (lp_models.fluid_exact): equal to GLOP wherever GLOP solves it,
and used where GLOP gives up (ABNORMAL at p ≥ 8000, ℓ = 2), where it equals Theorem 1 exactly."""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
from fractions import Fraction

import pytest

from bounds.closed_form import exclusive_single_straggler_optimum, lower_bound, lower_bound_single_straggler
from lp_models.fluid import solve_fluid_lp
from optcc.cluster import Cluster

CLUSTERS = ([Cluster.build(p, 1, {0: ell}) for p in (3, 5, 16, 100) for ell in (Fraction(8, 7), Fraction(3, 2), 2, 5)]
            + [Cluster.build(12, 1, {0: 2, 3: 3}), Cluster.build(30, 1, {0: 2, 1: 2, 2: Fraction(5, 4)}),
               Cluster.build(16, 4, {r: 2 for r in range(4)}), Cluster.build(32, 8, {0: 2}),
               Cluster.build(24, 4, {0: 2, 4: 3, 5: 3, 6: 3, 7: 3}), Cluster.build(9)])


@pytest.mark.parametrize("capacity", ["shared", "exclusive"])
def test_exact_equals_glop_wherever_glop_solves(capacity):
    for c in CLUSTERS:
        glop = solve_fluid_lp(c, capacity)
        exact = solve_fluid_lp(c, capacity, solver="exact")
        assert glop.optimal and exact.optimal and exact.solver == "exact"
        assert abs(exact.objective - glop.objective) <= 1e-9 * glop.objective, (c.describe(), capacity)
        assert set(exact.binding) <= set(glop.rows)


def test_shared_lp_equals_the_closed_form_bound_exactly():
    """Equal where the LP is the bound (g = 1, a whole straggler server: Theorems 1 and 3, docs/bounds.md);
    never below it (a server mixing slowdowns pools its NICs over NVLink, a row the bound omits)."""
    from optcc.algorithms.servers.shape import straggler_server
    from optcc.errors import OptccError
    for c in CLUSTERS:
        t = solve_fluid_lp(c, "shared", solver="exact").exact_objective
        try:
            whole = c.g == 1 or straggler_server(c) is not None
        except OptccError:
            whole = False
        assert t == lower_bound(c) if whole and len({r // c.g for r in c.stragglers}) <= 1 else t >= lower_bound(c), c.describe()


@pytest.mark.parametrize("p", [8000, 9000, 20000])
def test_glop_gives_up_at_large_p_and_the_exact_solve_answers(p):
    c = Cluster.build(p, 1, {0: 2})
    res = solve_fluid_lp(c, "shared")
    assert res.optimal and res.solver == "exact (glop returned ABNORMAL)"
    assert res.exact_objective == lower_bound_single_straggler(p, 2) == 2
    ex = solve_fluid_lp(c, "exclusive", solver="exact")
    assert ex.exact_objective == exclusive_single_straggler_optimum(p, 2)


def test_compare_at_p_8000_reports_the_exact_lp():
    root = pathlib.Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH", "")]))}
    r = subprocess.run([sys.executable, "-m", "optcc", "compare", "--p", "8000", "--straggler", "0:2", "--json"],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["lp_optimum"] == 2.0 and out["lp"]["shared"]["solver"].startswith("exact")
