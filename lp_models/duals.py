"""Closed-form primal and dual solutions of the fluid LPs, proved by Z3 for every size.

The LP is lp_models.fluid's class-reduced model (derived; docs/lp_models.md "Fluid LP"): one
straggler class (1 node, slowdown ℓ) and one healthy class (N nodes, ℓ = 1), every node with
P ports; x_d = root share per member of class d, rows (one per class, send and receive rows
identical) Σ_d A[c,d]·x_d ≤ P·T, and Σ_d n_d·x_d = 1, x ≥ 0, minimise T. Three instances:

- shared, GPU level (g = 1): N = p−1, P = 1; optimum = Theorem 1 (paper).
- shared, server level: nodes are the q = p/g servers, N = q−1, P = g, plus the NVLink row
  T ≥ ν (ν = 2(g−1)/(g·s_nv), lp_models.fluid); optimum = Theorem 3 (paper) when NVLink-rich
  (ν ≤ Theorem 3), max(Theorem 3, ν) in general.
- exclusive, GPU level: w_cd = max(ℓ_c, ℓ_d); optimum = T_ex = max(ℓ, 2ℓ(p−1)/(ℓ(p−2)+2))
  (derived, bounds.closed_form.exclusive_single_straggler_optimum).

The dual (derived, Lagrangian of the LP above): π_c ≥ 0 per class row (its send and receive
rows together, split in any proportion), π_ν ≥ 0, μ free; Σ_c P·π_c + π_ν ≤ 1 and
Σ_c π_c·A[c,d] ≥ μ·n_d for every class d; objective μ + ν·π_ν. Weak duality: every feasible
dual's objective is ≤ T of every feasible primal point. A certificate gives, for each term of
the formula, a dual feasible on a region with that term as objective, and for each regime a
primal point with T = the formula there; Z3 (bounds.proofs: sympy reduces each rational claim
to polynomials, nlsat decides) proves every claim for all real N ≥ 1 (so every p ≥ 2), g ≥ 1,
ℓ ≥ 1. Together: the LP optimum equals the formula for every size, not only where GLOP ran.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import sympy as sp

from bounds import proofs
from bounds import symbolic as S

N = sp.Symbol("N", positive=True)          # healthy nodes: p − 1 GPUs, or q − 1 servers
G = sp.Symbol("g", positive=True)          # ports per node (GPUs per server)
NU = sp.Symbol("nu", nonnegative=True)     # NVLink row constant 2(g−1)/(g·s_nv)
ELL = S.ell
ZERO = sp.Integer(0)


def load_matrix(counts, ells, capacity: str) -> sp.Matrix:
    """lp_models.fluid.load_matrix in sympy: A[c,d] = (n_d − δ_cd)·w_cd + δ_cd·Σ_e (n_e − δ_ce)·w_ce,
    w_cd = ℓ_c (shared) or max(ℓ_c, ℓ_d) (exclusive)."""
    m = len(counts)

    def w(c, d):
        return ells[c] if capacity == "shared" else sp.Max(ells[c], ells[d])
    a = sp.zeros(m, m)
    for c in range(m):
        for d in range(m):
            a[c, d] = (counts[d] - (1 if c == d else 0)) * w(c, d)
        a[c, c] += sum((counts[e] - (1 if c == e else 0)) * w(c, e) for e in range(m))
    return a


@dataclass
class Dual:
    """A dual solution: π per class row, π_ν, μ; `objective` is the term it certifies."""

    term: str
    pi: tuple
    mu: sp.Expr
    region: list           # hypotheses (beyond the LP's range) where it is feasible
    pi_nu: sp.Expr = ZERO


@dataclass
class Primal:
    """A primal point x per class member and T, feasible on `region`."""

    regime: str
    x: tuple
    t: sp.Expr
    region: list


@dataclass
class LPCertificate:
    name: str
    label: str
    formula: str
    counts: tuple
    ells: tuple
    ports: sp.Expr
    capacity: str
    terms: dict            # term name -> expression (the formula is their max, and ν if any)
    duals: list
    primals: list
    hypotheses: list
    nu: sp.Expr | None = None
    notes: list = field(default_factory=list)
    for_all: str = "every p ≥ 2 (real N = p − 1 ≥ 1), real ℓ ≥ 1"

    @property
    def matrix(self) -> sp.Matrix:
        return load_matrix(self.counts, self.ells, self.capacity)


def _ge(a, b):
    return sp.Ge(a, b, evaluate=False)


def _le(a, b):
    return sp.Le(a, b, evaluate=False)


def theorem1_certificate() -> LPCertificate:
    """Shared ports, g = 1: N = p − 1 healthy GPUs; optimum Theorem 1 = max(ℓ, 2ℓN/(ℓN+1))."""
    n = N
    vol = 2 * ELL * n / (ELL * n + 1)
    star = 2 - 1 / n                                    # crossing point ℓ* (bounds.symbolic)
    return LPCertificate(
        "shared fluid LP, g = 1 (Theorem 1)", "paper: Theorem 1; certificate derived",
        "max(ℓ, 2ℓ(p−1)/(ℓ(p−1)+1))", (1, n), (ELL, 1), sp.Integer(1), "shared",
        {"cut": ELL, "volume": vol},
        [Dual("cut", (1, 0), ELL, []),
         Dual("volume", (1 / (ELL * n + 1), ELL * n / (ELL * n + 1)), vol, [])],
        [Primal("cut (ℓ ≥ ℓ* = 2 − 1/(p−1))", (ZERO, 1 / n), ELL, [_ge(ELL, star)]),
         Primal("volume (ℓ ≤ ℓ*)", ((2 * n - 1 - ELL * n) / ((n - 1) * (ELL * n + 1)),
                                    (1 - (2 * n - 1 - ELL * n) / ((n - 1) * (ELL * n + 1))) / n),
                vol, [_le(ELL, star), sp.Gt(n, 1)])],
        [_ge(n, 1), _ge(ELL, 1)])


def theorem3_certificate() -> LPCertificate:
    """Shared ports, server level: N = q − 1 healthy servers of g NICs, one straggler server
    (all g NICs at B/ℓ), NVLink row T ≥ ν; optimum max(Theorem 3, ν)."""
    n, g = N, G
    cut, vol = ELL / g, 2 * ELL * n / (g * (ELL * n + 1))
    star = 2 - 1 / n
    return LPCertificate(
        "shared fluid LP, server level (Theorem 3)", "paper: Theorem 3; certificate derived",
        "max(ℓ/g, 2ℓ(p−g)/(g(ℓ(p−g)+g)), ν)", (1, n), (ELL, 1), g,
        "shared", {"cut": cut, "volume": vol, "nvlink": NU},
        [Dual("cut", (1 / g, 0), cut, []),
         Dual("volume", (1 / (g * (ELL * n + 1)), ELL * n / (g * (ELL * n + 1))), vol, []),
         Dual("nvlink", (0, 0), ZERO, [], pi_nu=sp.Integer(1))],
        [Primal("cut (ℓ ≥ ℓ*), NVLink-rich", (ZERO, 1 / n), cut, [_ge(ELL, star), _le(NU, cut)]),
         Primal("volume (ℓ ≤ ℓ*), NVLink-rich",
                ((2 * n - 1 - ELL * n) / ((n - 1) * (ELL * n + 1)),
                 (1 - (2 * n - 1 - ELL * n) / ((n - 1) * (ELL * n + 1))) / n),
                vol, [_le(ELL, star), sp.Gt(n, 1), _le(NU, vol)]),
         Primal("NVLink-bound (ν ≥ Theorem 3)", (ZERO, 1 / n), NU,
                [_ge(ELL, star), _ge(NU, cut)]),
         Primal("NVLink-bound (ν ≥ Theorem 3), ℓ ≤ ℓ*",
                ((2 * n - 1 - ELL * n) / ((n - 1) * (ELL * n + 1)),
                 (1 - (2 * n - 1 - ELL * n) / ((n - 1) * (ELL * n + 1))) / n),
                NU, [_le(ELL, star), sp.Gt(n, 1), _ge(NU, vol)])],
        [_ge(n, 1), _ge(ELL, 1), _ge(g, 1), _ge(NU, 0)], nu=NU,
        for_all="every g ≥ 1 and q = p/g ≥ 2 servers (real N = q − 1 ≥ 1), real ℓ ≥ 1, ν ≥ 0")


def exclusive_certificate() -> LPCertificate:
    """Exclusive ports (one flow per NIC direction at the slower end's speed), g = 1:
    optimum T_ex = max(ℓ, 2ℓ(p−1)/(ℓ(p−2)+2)), N = p − 1."""
    n = N
    vol = 2 * ELL * n / (ELL * (n - 1) + 2)
    xs = (2 - ELL) / (ELL * (n - 1) + 2)
    return LPCertificate(
        "exclusive fluid LP, g = 1 (T_ex)", "derived: bounds.closed_form.exclusive_single_straggler_optimum",
        "max(ℓ, 2ℓ(p−1)/(ℓ(p−2)+2))", (1, n), (ELL, 1), sp.Integer(1), "exclusive",
        {"cut": ELL, "volume": vol},
        [Dual("cut", (1, 0), ELL, []),
         Dual("volume", ((2 - ELL) / (ELL * (n - 1) + 2), ELL * n / (ELL * (n - 1) + 2)), vol,
              [_le(ELL, 2)])],
        [Primal("cut (ℓ ≥ 2)", (ZERO, 1 / n), ELL, [_ge(ELL, 2)]),
         Primal("volume (ℓ ≤ 2)", (xs, (1 - xs) / n), vol, [_le(ELL, 2)])],
        [_ge(n, 1), _ge(ELL, 1)],
        notes=["the volume dual needs ℓ ≤ 2 (π_S = (2−ℓ)/(ℓ(p−2)+2)); for ℓ > 2 the volume term is ≤ ℓ (proved)"])


CERTIFICATES = (theorem1_certificate, theorem3_certificate, exclusive_certificate)


def _max_ell_free(expr):
    """Max(ℓ, 1) = ℓ under ℓ ≥ 1: the exclusive load matrix's weights, made rational."""
    return expr.replace(lambda e: isinstance(e, sp.Max), lambda e: ELL if set(e.args) == {ELL, 1} else e)


def _claim(name, expr, op, hypotheses) -> proofs.Claim:
    return proofs.Claim(name, sp.sympify(expr), op, hypotheses)


def claims(cert: LPCertificate) -> list[proofs.Claim]:
    """Every claim the certificate rests on, each `expr op 0` under hypotheses."""
    a = cert.matrix.applyfunc(_max_ell_free)
    m = len(cert.counts)
    H = cert.hypotheses
    out = []
    for pr in cert.primals:
        hyp = H + pr.region
        tag = f"{cert.name}: primal [{pr.regime}]"
        out += [_claim(f"{tag} x_{d} ≥ 0", pr.x[d], ">=", hyp) for d in range(m)]
        total = sum(cert.counts[d] * pr.x[d] for d in range(m)) - 1
        out += [_claim(f"{tag} Σ n_d x_d = 1 (≤)", total, "<=", hyp),
                _claim(f"{tag} Σ n_d x_d = 1 (≥)", total, ">=", hyp)]
        out += [_claim(f"{tag} row {c}: load ≤ ports·T", sum(a[c, d] * pr.x[d] for d in range(m))
                             - cert.ports * pr.t, "<=", hyp) for c in range(m)]
        if cert.nu is not None:
            out.append(_claim(f"{tag} NVLink row T ≥ ν", pr.t - cert.nu, ">=", hyp))
        for name, term in cert.terms.items():          # T is the max of the terms here
            out.append(_claim(f"{tag} T ≥ {name} term", pr.t - term, ">=", hyp))
    for du in cert.duals:
        hyp = H + du.region
        tag = f"{cert.name}: dual [{du.term}]"
        out += [_claim(f"{tag} π_{c} ≥ 0", du.pi[c], ">=", hyp) for c in range(m)]
        out.append(_claim(f"{tag} Σ ports·π + π_ν ≤ 1", cert.ports * sum(du.pi) + du.pi_nu - 1, "<=", hyp))
        out += [_claim(f"{tag} column {d}: Σ_c π_c A[c,{d}] ≥ μ·n_{d}",
                             sum(du.pi[c] * a[c, d] for c in range(m)) - du.mu * cert.counts[d], ">=", hyp)
                for d in range(m)]
        obj = du.mu + (du.pi_nu * cert.nu if cert.nu is not None else 0) - cert.terms[du.term]
        out += [_claim(f"{tag} objective = {du.term} term (≤)", obj, "<=", hyp),
                _claim(f"{tag} objective = {du.term} term (≥)", obj, ">=", hyp)]
        if du.region:                                  # outside its region that term never binds
            for h in du.region:
                neg = sp.Lt(h.lhs, h.rhs) if isinstance(h, sp.GreaterThan) else sp.Gt(h.lhs, h.rhs)
                out.append(_claim(f"{tag} outside its region ({neg}) the {du.term} term ≤ cut term",
                                        cert.terms[du.term] - cert.terms["cut"], "<=", H + [neg]))
    return out


def _coverage_claims(cert: LPCertificate) -> list[proofs.Claim]:
    """The primal regimes cover the whole range (so the upper bound holds everywhere)."""
    out = []
    if cert.name.startswith("shared fluid LP, g = 1") or cert.name.startswith("shared fluid LP, server"):
        # ℓ < ℓ* forces N > 1 (at N = 1, ℓ* = 1): the volume regime's N > 1 costs nothing
        out.append(_claim(f"{cert.name}: ℓ < ℓ* implies N > 1 (the regimes cover N ≥ 1)",
                                N - 1, ">", cert.hypotheses + [sp.Lt(ELL, 2 - 1 / N)]))
    return out


def all_claims(cert: LPCertificate) -> list[proofs.Claim]:
    """Every claim `prove_certificate` decides: the certificate's and its coverage."""
    return claims(cert) + _coverage_claims(cert)


def vacuous_regions(cert: LPCertificate, timeout_ms: int = 20000) -> list[str]:
    """Regions (range + a primal's or dual's region) that Z3 does not show satisfiable: a claim
    proved there would prove nothing."""
    out = []
    for what, region in ([(f"primal [{p.regime}]", p.region) for p in cert.primals]
                         + [(f"dual [{d.term}]", d.region) for d in cert.duals]):
        if not proofs.satisfiable(cert.hypotheses + region, timeout_ms):
            out.append(what)
    return out


def prove_certificate(cert: LPCertificate, timeout_ms: int = 20000) -> dict:
    """JSON-ready: every claim's result, and the statement proved when all hold (and no
    region is vacuous)."""
    t0 = time.perf_counter()
    results = [proofs.prove(c, timeout_ms) for c in all_claims(cert)]
    failed = [r for r in results if not r.proved]
    vacuous = vacuous_regions(cert, timeout_ms)
    return {"lp": cert.name, "label": cert.label, "statement": f"LP optimum = {cert.formula}",
            "for_all": cert.for_all,
            "proved": not failed and not vacuous, "claims": len(results), "vacuous_regions": vacuous,
            "failures": [{"claim": r.claim.name, "z3": r.z3_answer,
                          "counterexample": {k: str(v) for k, v in (r.counterexample or {}).items()}}
                         for r in failed],
            "duals": [{"term": d.term, "pi": [str(sp.cancel(x)) for x in d.pi], "pi_nu": str(d.pi_nu),
                       "mu": str(sp.cancel(d.mu)), "region": [str(h) for h in d.region]} for d in cert.duals],
            "primals": [{"regime": pr.regime, "x": [str(sp.factor(x)) for x in pr.x], "T": str(pr.t),
                         "region": [str(h) for h in pr.region]} for pr in cert.primals],
            "notes": cert.notes, "seconds": round(time.perf_counter() - t0, 3)}


def prove_lp_bounds(timeout_ms: int = 20000) -> dict:
    """All three certificates: {"proved", "certificates": [...], "seconds"}."""
    t0 = time.perf_counter()
    certs = [prove_certificate(make(), timeout_ms) for make in CERTIFICATES]
    return {"proved": all(c["proved"] for c in certs), "certificates": certs,
            "claims": sum(c["claims"] for c in certs), "seconds": round(time.perf_counter() - t0, 3)}


def evaluate(cert: LPCertificate, p: int, ell, g: int = 1, nu=0) -> dict:
    """The certificate's closed forms at one instance (exact where the inputs are exact)."""
    n = p - 1 if cert.ports == 1 else p // g - 1
    subs = {N: n, ELL: sp.nsimplify(ell), G: g, NU: sp.nsimplify(nu)}

    def val(e):
        return sp.nsimplify(sp.sympify(e).subs(subs))

    def holds(region):
        return all(bool(h.subs(subs)) for h in region)
    duals = {d.term: {"pi": [val(x) for x in d.pi], "pi_nu": val(d.pi_nu), "mu": val(d.mu)}
             for d in cert.duals if holds(d.region)}
    primal = next((pr for pr in cert.primals if holds(pr.region)), None)
    optimum = max(val(t) for t in cert.terms.values())
    best = max(duals, key=lambda t: duals[t]["mu"] + duals[t]["pi_nu"] * subs[NU])
    return {"optimum": optimum, "duals": duals, "optimal_dual": best,
            "primal": None if primal is None else {"regime": primal.regime, "x": [val(x) for x in primal.x],
                                                   "T": val(primal.t)}}


def _cluster_certificates(cluster):
    """(certificate, p, ℓ, g, ν) pairs that apply to this cluster, or a reason when none does."""
    from bounds.closed_form import is_straggler_server, pooling_nvlink_time
    st = cluster.stragglers
    if cluster.g == 1 and len(st) <= 1:
        ell = next(iter(st.values()), 1)
        return [(theorem1_certificate(), cluster.p, ell, 1, 0),
                (exclusive_certificate(), cluster.p, ell, 1, 0)], None
    if cluster.g > 1 and cluster.servers >= 2 and (not st or is_straggler_server(cluster)):
        ell = next(iter(st.values()), 1)
        return [(theorem3_certificate(), cluster.p, ell, cluster.g, pooling_nvlink_time(cluster))], None
    return [], ("no closed-form certificate for this case (several stragglers, or not one whole server at "
                "one ℓ): the LP optimum equals the bound at instances only (tests/lp_models/test_lp_fluid.py, GLOP)")


def derivation_steps(cluster, timeout_ms: int = 20000) -> list[dict]:
    """`optcc bound --derive` steps: the fluid LP's closed-form primal and dual for this case,
    proved for every size by Z3, and their values here."""
    certs, why = _cluster_certificates(cluster)
    if not certs:
        return [{"step": "Fluid LP certificate", "text": why}]
    out = []
    for cert, p, ell, g, nu in certs:
        res = prove_certificate(cert, timeout_ms)
        ev = evaluate(cert, p, ell, g=g, nu=nu)
        best = ev["duals"][ev["optimal_dual"]]
        dual_txt = "; ".join(f"{d['term']}: π = ({', '.join(d['pi'])}), π_ν = {d['pi_nu']}, μ = {d['mu']}"
                             + (f" where {', '.join(d['region'])}" if d["region"] else "") for d in res["duals"])
        primal_txt = "; ".join(f"{q['regime']}: x = ({', '.join(q['x'])}), T = {q['T']}" for q in res["primals"])
        text = (f"{cert.label}; classes: 1 straggler node and N healthy nodes, "
                f"{'g' if cert.ports != 1 else 'one'} port(s) each. Duals (weak duality: each objective is a "
                f"lower bound on the LP optimum): {dual_txt}. Primal points: {primal_txt}. "
                f"Z3: {res['statement']} for {res['for_all']}: "
                f"{'PROVED' if res['proved'] else 'NOT PROVED'} ({res['claims']} claims, {res['seconds']} s). "
                f"Here: optimum {ev['optimum']} n/B; optimal dual '{ev['optimal_dual']}' "
                f"π = ({', '.join(str(v) for v in best['pi'])}), primal x = "
                f"({', '.join(str(v) for v in ev['primal']['x'])}).")
        out.append({"step": f"Fluid LP certificate: {cert.name}", "text": text, "proved": res["proved"],
                    "latex": sp.latex(sp.Eq(sp.Symbol("T_LP"), sp.Max(*cert.terms.values()))),
                    "pretty": sp.pretty(sp.Eq(sp.Symbol("T_LP"), sp.Max(*cert.terms.values())), use_unicode=True)})
    return out
