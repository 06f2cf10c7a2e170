"""OR-Tools models of the optimal AllReduce on a degraded cluster (issue #5).

- fluid:        fluid LP (shared and exclusive capacity), equivalence classes, server level.
- to_schedule:  the LP optimum as a concrete pipelined Schedule.
- slot_timing:  CP-SAT: optimal timing of a given flow set (e.g. OptCC's).
- slot_search:  CP-SAT: optimal tree schedule from scratch for tiny clusters.
(The comparison table `optcc compare` prints composes these with the verifier: optcc_app.compose.comparison.)
"""
from lp_models.fluid import solve_fluid_lp, FluidLPResult  # noqa: F401
from lp_models.result import SolveResult  # noqa: F401
