"""Lower bounds on AllReduce time under asymmetric bandwidth.

`bounds.closed_form` evaluates the closed forms numerically (exact Fractions); the symbolic
derivations (sympy) live beside it and must agree with it.
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
