"""Mutants of the glue between the proved family formulas and a running schedule: the generator's
enumeration (piece map, slot counts, phase origins and units, loop bounds, piece sizes, node
ranks), the timing model (durations from Cluster), and the verifier-side terms the obligations
and the certificate's instance check are stated over. tests/test_generator_certificate.py."""
from __future__ import annotations

import inspect
import types

import z3

from optcc import cluster as CL
from optcc import timing as TM
from optcc.algorithms.families import optcc as FO
from verifier.parametric import optcc as PO
from verifier.parametric import ring as PR

_E = "for t in range(H - 1):\n        for i in range(H):\n            emit(epi"
_P = "for t in range(H - 1):\n        for i in range(H):\n            emit(pro"

# name -> [(old, new)] edits of optcc/algorithms/families/optcc.py (each `old` must occur once)
GENERATOR_MUTANTS = {
    "p2p piece index collides with a shard": [("else P.k * H + key[0]", "else key[0] * H")],
    "shard piece index σ(H−1) + o": [("key[0] * H + key[1] if", "key[0] * (H - 1) + key[1] if")],
    "pipeline one slot shorter": [("else 2 * H * k + 2", "else 2 * H * k + 1")],
    "k = 1 pipeline a fraction short": [("2 * H + ell if (ell < 2", "2 * H + 1 if (ell < 2")],
    "pipeline origin one δ early": [("O = (H - 1) * d", "O = (H - 2) * d")],
    "epilogue slot δ/2": [("(d, lam, d)", "(d, lam, d / 2)")],
    "pipeline slot δ for ℓ ≥ 2": [("lam = d if ell < 2 else ell * d / 2", "lam = d")],
    "shard size 1/(kH + 1)": [("Fraction(1, k * H) if ell >= 2", "Fraction(1, k * H + 1) if ell >= 2")],
    "P2P piece size 2δ/ℓ": [("[(2 / ell - 1) * d]", "[(2 / ell) * d]")],
    "node rank h + [h > s]": [("node + (node >= s)", "node + (node > s)")],
    "prologue misses its last step": [(_P, _P.replace("range(H - 1)", "range(H - 2)"))],
    "epilogue misses its last step": [(_E, _E.replace("range(H - 1)", "range(H - 2)"))],
    "reduce-scatter loop skips hop 1": [("for j in range(1, H):", "for j in range(2, H):")],
    "all-gather loop misses its last hop": [("for j in range(H - 1):\n                emit(ag",
                                             "for j in range(H - 2):\n                emit(ag")],
    "last segment dropped": [("for sigma in range(k):", "for sigma in range(k - 1):")],
    "pipeline starts counted in prologue slots": [("+ key[1] * unit[T.phase]", "+ key[1] * unit[0]")],
    "every flow adds": [("piece_index(P, T.piece), fam.op, start", "piece_index(P, T.piece), \"add\", start")],
    "flows reversed": [("Flow(node_rank(T.src, H, s), node_rank(T.dst, H, s)",
                        "Flow(node_rank(T.dst, H, s), node_rank(T.src, H, s)")],
}


def generator_mutant(edits):
    """optcc_flows of a copy of families/optcc.py with `edits` applied (for monkeypatching)."""
    src = inspect.getsource(FO)
    for old, new in edits:
        assert src.count(old) == 1, old
        src = src.replace(old, new)
    mod = types.ModuleType("optcc_families_mutant")
    exec(compile(src, "<mutant families/optcc.py>", "exec"), mod.__dict__)
    return mod.optcc_flows


def _doubled(f):
    return lambda self, *a, **k: 2 * f(self, *a, **k)


def _sender_only(f):
    return lambda self, src, dst, size, rate=1: size * self.slowdown[src] / rate


def _slower_end_min(f):
    return lambda self, src, dst, size, rate=1: size * min(self.slowdown[src], self.slowdown[dst]) / rate


def _durations_doubled(f):
    return lambda schedule: [2 * d for d in f(schedule)]


# name -> (object, attribute, original -> mutant)
TIMING_MUTANTS = {
    "Cluster.nic_time doubled": (CL.Cluster, "nic_time", _doubled),
    "Cluster.nic_time at the sender's rate": (CL.Cluster, "nic_time", _sender_only),
    "Cluster.nic_time at the faster end": (CL.Cluster, "nic_time", _slower_end_min),
    "timing.durations doubled": (TM, "durations", _durations_doubled),
}


def _rank_gt(f):
    return lambda A, n, H, s: A.ite(n == H, s, A.ite(n > s, n + 1, n))


def _p2p_piece_minus_one(f):
    return lambda P, key: f(P, key) if len(key) == 2 else f(P, key) - 1


def _pipeline_early(f):
    def g(P):
        (o0, o1, o2), u = f(P)
        return (o0, o1 - u[0], o2 - u[0]), u
    return g


def _epilogue_unit_lam(f):
    def g(P):
        o, (u0, u1, u2) = f(P)
        return o, (u0, u1, u1)
    return g


def _span(name, pos, hi):
    def mut(f):
        def g(P):
            sp = dict(f(P))
            rng = list(sp[name])
            rng[pos] = (rng[pos][0], hi(P))
            sp[name] = rng
            return sp
        return g
    return mut


def _p2p_size_plus_d(f):
    def g(P):
        d, x = f(P)
        return d, x + d
    return g


# name -> (construction, module, attribute, original -> mutant)
VERIFIER_MUTANTS = {
    "optcc rank_of h + [h > s]": ("optcc", PO, "rank_of", _rank_gt),
    "optcc piece_of P2P kH + σ − 1": ("optcc", PO, "piece_of", _p2p_piece_minus_one),
    "optcc phases: pipeline one δ early": ("optcc", PO, "phases", _pipeline_early),
    "optcc phases: epilogue slot λ": ("optcc", PO, "phases", _epilogue_unit_lam),
    "optcc spans: rs hop j ≤ H − 2": ("optcc", PO, "spans", _span("optcc.rs_hop", 2, lambda P: P.p - 3)),
    "optcc spans: segments σ ≤ k − 2": ("optcc", PO, "spans", _span("optcc.upload", 0, lambda P: P.k - 2)),
    "optcc sizes: P2P piece (2/ℓ)δ": ("optcc", PO, "sizes", _p2p_size_plus_d),
    "ring piece_of σ(p − 1) + c": ("ring", PR, "piece_of", lambda f: lambda P, key: key[0] * (P.p - 1) + key[1]),
    "ring unit ℓ/(k(p + 1))": ("ring", PR, "unit", lambda f: lambda P: f(P) * P.p / (P.p + 1)),
    "ring spans: t ≤ p − 3": ("ring", PR, "spans", _span("ring.reduce_scatter", 1, lambda P: P.p - 3)),
    "ring shard size 1/(kp + 1)": ("ring", PR, "shard_size", lambda f: lambda P: 1 / (z3.ToReal(P.k * P.p) + 1)),
}
