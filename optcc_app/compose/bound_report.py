"""What `optcc bound` prints: the lower bound of a cluster evaluated exactly
(bounds.closed_form), its binding term, T0, seconds for n bytes, and the case's symbolic formula
(bounds.report.classify)."""
from __future__ import annotations

import sympy as sp

from bounds import closed_form as CF
from bounds.report import classify
from optcc.cluster import Cluster
from optcc.timing import units_to_seconds


def bound_report(cluster: Cluster, n_bytes: int) -> dict:
    """The numbers `optcc bound` prints (times in units of n/B unless named seconds)."""
    terms = CF.cluster_terms(cluster)
    lb = terms.bound
    nv = CF.pooling_nvlink_time(cluster)
    t0 = CF.fault_free_optimum(cluster.p, cluster.g)
    case = classify(cluster)
    return {
        "lower_bound": float(lb),
        "lower_bound_exact": str(lb),
        "t0": float(t0),
        "ratio_to_t0": None if t0 == 0 else float(lb / t0),
        "binding": terms.binding,
        "cut": float(terms.cut),
        "volume": float(terms.volume),
        "seconds": units_to_seconds(cluster, lb, n_bytes),
        "t0_seconds": units_to_seconds(cluster, t0, n_bytes),
        "n_bytes": n_bytes,
        "case": case.title,
        "formula": "0" if case.bound is None else sp.sstr(case.bound.expr),
        "latex": "0" if case.bound is None else sp.latex(case.bound.expr),
        "pooling_nvlink": float(nv),
        "pooling_limited_by_nvlink": cluster.servers > 1 and nv > lb,
    }
