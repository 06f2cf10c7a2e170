"""Lower bounds on AllReduce time under asymmetric bandwidth (units of n/B).

- `bounds.closed_form`: exact Fraction evaluation (fast, no sympy import); the stable API.
- `bounds.symbolic`: the sympy expressions, each bound = max{cut term, volume term}, with the
  argument for each term (paper: Theorems 1 and 3; derived: multi-straggler, server-aggregate).
- `bounds.proofs`: sympy reduction to polynomials + Z3 proofs of the O(1/p) headline.
- `bounds.sweep`: lambdify/numpy evaluation over sweeps.
- `bounds.report`: the case of a cluster and its derivation steps (`optcc bound --derive`).
- `bounds.cut_set`: the per-NIC cut-set bound (derived), which Theorem 1/3's cut term equals on
  NVLink-rich clusters.
- `bounds.pairwise`, `bounds.forestcoll`: the cut bounds of two other network models (pairwise
  links, as Zhou & Sun's; ForestColl's switch graphs) and their mappings from a per-NIC cluster,
  set beside Theorem 1 in docs/bounds.md.
"""
from bounds.closed_form import (
    fault_free_optimum,
    lower_bound,
    lower_bound_multi_straggler,
    lower_bound_single_straggler,
    lower_bound_straggler_server,
)

__all__ = [
    "fault_free_optimum",
    "lower_bound",
    "lower_bound_multi_straggler",
    "lower_bound_single_straggler",
    "lower_bound_straggler_server",
]
