"""Which bound a cluster gets and its derivation: `classify` maps a cluster to its case and
symbolic formula (bounds.symbolic); `derivation` lists the steps a reader would put in an
appendix, each with the formula in sympy pretty form and LaTeX. (The numbers `optcc bound`
prints, with seconds, are optcc_app.compose.bound_report.) How a cluster maps to a case:
- g = 1: no straggler → T0; one → Theorem 1 (paper); several → multi-straggler (derived).
- g > 1: every slowed GPU is a NIC at B/ℓ_k; the server-aggregate bound (derived) holds for any
  set. When the stragglers are exactly all g GPUs of one server at one ℓ it is Theorem 3
  (paper) and is reported as such; a partly slowed server is NOT Theorem 3's setting (its
  healthy NICs can carry its traffic), so Theorem 3 is never applied to it.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import sympy as sp

from bounds import closed_form as CF
from bounds import symbolic as S
from optcc.cluster import Cluster


@dataclass
class Case:
    key: str            # "t0" | "theorem1" | "multi" | "theorem3" | "servers" | "one-server"
    title: str          # with its label
    bound: S.Bound | None
    t0: sp.Expr
    values: dict        # symbol -> number, to evaluate the symbolic formula at this cluster


def classify(cluster: Cluster) -> Case:
    st = cluster.stragglers
    if cluster.g == 1:
        if not st:
            return Case("t0", "T0 (paper): no straggler; Theorem 1 at ℓ = 1", S.THEOREM_1, S.T0_G1,
                        {S.p: cluster.p, S.ell: 1})
        if len(st) == 1:
            return Case("theorem1", "Theorem 1 (paper): one straggler, one GPU per server",
                        S.THEOREM_1, S.T0_G1, {S.p: cluster.p, S.ell: next(iter(st.values()))})
        ordered = sorted(st.values(), reverse=True)
        syms = S.ells(len(ordered))
        return Case("multi", f"multi-straggler bound (derived): m = {len(ordered)} stragglers, "
                    "ℓ1 ≥ … ≥ ℓm", S.multi_straggler(syms), S.T0_G1,
                    {S.p: cluster.p, **dict(zip(syms, ordered))})
    if cluster.servers < 2:
        return Case("one-server", "one server: all traffic is NVLink, no NIC bound (0)", None, S.T0,
                    {S.p: cluster.p, S.g: cluster.g})
    if not st:
        return Case("t0", "T0 (paper): no straggler; Theorem 3 at ℓ = 1", S.THEOREM_3, S.T0,
                    {S.p: cluster.p, S.g: cluster.g, S.ell: 1})
    if CF.is_straggler_server(cluster):
        return Case("theorem3", "Theorem 3 (paper): one straggler server, all g GPUs at ℓ",
                    S.THEOREM_3, S.T0, {S.p: cluster.p, S.g: cluster.g, S.ell: next(iter(st.values()))})
    b = sp.IndexedBase("b", positive=True)
    j = sp.Symbol("j", positive=True, integer=True)
    general = S.Bound(
        "server-aggregate",
        S.Term("cut", 1 / sp.Function("min")(b[j]), " ".join(S.servers_cut.__doc__.split()),
               "derived: bounds/symbolic.py servers_cut"),
        S.Term("volume", 2 * (S.q - 1) / sp.Sum(b[j], (j, 1, S.q)), " ".join(S.servers_volume.__doc__.split()),
               "derived: bounds/symbolic.py servers_volume"),
        "derived (bounds/symbolic.py)", "q ≥ 2 servers, NVLink-rich, any ℓ_k ≥ 1; b_j = Σ_k 1/ℓ_k")
    return Case("servers", "server-aggregate bound (derived): stragglers are not one whole server "
                "at one ℓ", general, S.T0, {S.p: cluster.p, S.g: cluster.g})


def _step(title: str, text: str, expr=None) -> dict:
    out = {"step": title, "text": text}
    if expr is not None:
        out["latex"] = sp.latex(expr)
        out["pretty"] = sp.pretty(expr, use_unicode=True)
    return out


def derivation(cluster: Cluster) -> list[dict]:
    """The derivation, step by step, for this cluster's case (appendix style)."""
    case = classify(cluster)
    steps = [_step("Model", "Units of n/B (n message bytes, B healthy NIC bandwidth). Every GPU "
                   "has a full-duplex NIC at B, a straggler at B/ℓ; GPUs of one server share "
                   "NVLink, treated as free (NVLink-rich). Data are infinitely divisible and "
                   "messages carry element-wise values. Case: " + case.title + ".")]
    if case.bound is None:
        steps.append(_step("Bound", "With a single server no byte must cross a NIC, so the NIC "
                           "lower bound is 0 (and T0 = 2(p−g)/(g·p) = 0)."))
        return steps
    vals = case.values
    for t in case.bound.terms():
        steps.append(_step(f"{t.kind.capitalize()} term ({t.label})", t.argument, t.expr))
    steps.append(_step("Bound", "Both arguments hold for every correct AllReduce, so T is at "
                       "least the larger term.", sp.Eq(sp.Symbol("T_lb"), case.bound.expr)))
    steps.append(_step("Fault-free optimum (paper)", "T0 is the ℓ = 1 value of the volume term "
                       "(the cut term is smaller when p ≥ 2g); for g = 1 it is NCCL ring's time "
                       "and the nccl-tests bus-bandwidth factor.", sp.Eq(sp.Symbol("T_0"), case.t0)))
    if case.key in ("theorem1", "theorem3", "t0"):
        star = S.crossing_point(case.bound)
        steps.append(_step("Crossing point (solved by sympy)", "cut = volume at ℓ*; for ℓ < ℓ* "
                           "the volume term binds, for ℓ > ℓ* the cut term.", sp.Eq(sp.Symbol("ell_star"), star)))
        for t in case.bound.terms():
            x = sp.Symbol("x")  # x = 1/p
            ser = sp.series(sp.simplify((t.expr / case.t0).subs(S.p, 1 / x)), x, 0, 2).subs(x, 1 / S.p)
            steps.append(_step(f"{t.kind.capitalize()} term / T0 in 1/p (paper's expansion)",
                               "Series of the term over T0 in 1/p.", ser))
        from bounds import proofs
        claims = proofs.headline_claims() if case.t0 == S.T0_G1 else proofs.server_headline_claims()
        results = proofs.prove_all(claims)
        const = "1/(p−1)" if case.t0 == S.T0_G1 else "g/(p−g) = 1/(q−1)"
        steps.append(_step("Overhead for ℓ ∈ [1, 2] (proved)", f"T_lb/T0 − 1 ≤ {const} for all real "
                           "p (p ≥ 2g) and ℓ ∈ [1, 2]: each term reduced to a polynomial "
                           "inequality and checked by Z3 (nonlinear real arithmetic): "
                           + "; ".join(r.describe() for r in results)))
        steps.append(_step("Overhead for ℓ > 2", "The cut term binds and T_lb/T0 − 1 → ℓ/2 − 1 "
                           "as p → ∞: the overhead does not vanish."))
    if case.key == "servers":
        g = cluster.g
        caps = [sum((1 / x for x in cluster.slowdown[k * g:(k + 1) * g]), Fraction(0))
                for k in range(cluster.servers)]
        text = ", ".join(f"b_{k + 1} = {c}" for k, c in enumerate(caps) if c != g)
        steps.append(_step("Server capacities", f"q = {cluster.servers} servers of g = {g}; healthy "
                           f"servers have b = {g}; " + text + "."))
    terms = CF.cluster_terms(cluster)
    evaluated = "" if not vals else ", ".join(f"{k} = {v}" for k, v in vals.items())
    steps.append(_step("Evaluation", f"At {evaluated or cluster.describe()}: cut = {terms.cut}, "
                       f"volume = {terms.volume}, bound = {terms.bound} n/B "
                       f"({terms.binding} binds); T0 = {CF.fault_free_optimum(cluster.p, cluster.g)} n/B."))
    return steps
