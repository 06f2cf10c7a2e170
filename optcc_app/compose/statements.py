"""The digests of every statement `optcc prove-all --algo A` proves, by part, so that a test can
pin them: a changed statement (a goal dropped, a bound relaxed, a ratio weakened) changes a
digest and fails the suite until a reviewer re-pins it on purpose.

Parts: "obligations" (verifier.parametric.prove: the construction's obligations, exactly as
discharged), "near_optimal" (the ratio statements and their false control), "lower_bound_lp"
(the LP certificates' claims, lp_models.duals). The Z3 parts hash the s-expressions, the LP part
sympy's srepr of each claim: both depend on the solver libraries' printing, so a new z3 or
sympy version may need a re-pin too (the pins name the versions they were taken with).
"""
from __future__ import annotations

import hashlib


def _lp_digest() -> str:
    import sympy as sp

    from lp_models.duals import CERTIFICATES, claims
    h = hashlib.sha256()
    for make in CERTIFICATES:
        for c in claims(make()):
            parts = [c.name, c.op, sp.srepr(c.expr), *(sp.srepr(x) for x in c.hypotheses)]
            h.update("\0".join(parts).encode() + b"\1")
    return h.hexdigest()


PARTS = ("obligations", "near_optimal", "lower_bound_lp")


def statements_sha256(algo: str, parts=PARTS) -> dict[str, str]:
    """{part: sha256} of what `prove-all --algo algo` proves (module docstring); `parts` limits
    which are computed (near_optimal exists for optcc and servers only)."""
    from verifier.parametric.prove import obligations, obligations_digest
    out = {}
    if "obligations" in parts:
        out["obligations"] = obligations_digest(obligations(algo)[1])
    if "near_optimal" in parts and algo in ("optcc", "servers"):
        from verifier.parametric import near_optimal, near_optimal_servers
        mod = near_optimal if algo == "optcc" else near_optimal_servers
        out["near_optimal"] = obligations_digest(mod.obligations() + [mod.control()])
    if "lower_bound_lp" in parts:
        out["lower_bound_lp"] = _lp_digest()
    return out
