"""Mutants of the glue between the proved family formulas and a running schedule: the one
definition of piece map, sizes, clock and rank map (GLUE_MUTANTS, refuted by prove-all), the
builder's loops (GENERATOR_MUTANTS, refused by the certificate), the timing model (durations
from Cluster) and the verifier's enumeration spans. tests/verifier/test_generator_certificate.py and
tests/gpu_runner/test_glue_gate_gloo.py."""
from __future__ import annotations

import inspect
import types

from optcc import cluster as CL
from optcc import timing as TM
from optcc.algorithms.single import families as FO
from optcc.algorithms.ring import families as FR
from verifier.parametric import optcc as PO
from verifier.parametric import ring as PR

_E = "for t in range(H - 1):\n        for i in range(H):\n            emit(epi"
_P = "for t in range(H - 1):\n        for i in range(H):\n            emit(pro"

# The glue from family terms to a running schedule (piece map, piece sizes, slot counts, phase
# origins and units, node <-> rank, rates) is written once, in single/families.py and
# ring/families.py, and read by the builder, the rank-local enumeration, the certificate and the
# obligations alike: a mutant of it must be refuted by prove-all itself.
# name -> (construction, file, [(old, new)]) edits (each `old` must occur once)
GLUE_MUTANTS = {
    "p2p piece index collides with a shard": ("optcc", "optcc", [("else P.k * H + key[0]", "else key[0] * H")]),
    "shard piece index σ(H−1) + o": ("optcc", "optcc", [("key[0] * H + key[1] if", "key[0] * (H - 1) + key[1] if")]),
    "pipeline one slot shorter": ("optcc", "optcc", [("A.mul(P.k, 2 * H) + 2)", "A.mul(P.k, 2 * H) + 1)")]),
    "k = 1 pipeline a fraction short": ("optcc", "optcc", [("A.real(2 * H) + P.ell", "A.real(2 * H) + 1")]),
    "pipeline origin one δ early": ("optcc", "optcc", [("o1 = A.real(_H(P) - 1) * d", "o1 = A.real(_H(P) - 2) * d")]),
    "epilogue two slots early": ("optcc", "optcc", [("o1 + pipeline_slots(A, P) * lam",
                                                      "o1 + (pipeline_slots(A, P) - 2) * lam")]),
    "epilogue slot δ/2": ("optcc", "optcc", [("(d, lam, d)", "(d, lam, d / 2)")]),
    "pipeline slot δ for every ℓ": ("optcc", "optcc", [("lam = A.ite(_small(P), d, P.ell * d / 2)", "lam = d")]),
    "shard size 1/(kH + 1)": ("optcc", "optcc", [("1 / (k * H))", "1 / (k * H + 1))")]),
    "P2P piece size 2δ/ℓ": ("optcc", "optcc", [("(2 / P.ell - 1) * shard_size(A, P)", "(2 / P.ell) * shard_size(A, P)")]),
    "node rank h + [h > s]": ("optcc", "optcc", [("A.ite(node >= P.s, node + 1, node)", "A.ite(node > P.s, node + 1, node)")]),
    "rank node r − [r < s]": ("optcc", "optcc", [("A.ite(rank > P.s, rank - 1, rank)", "A.ite(rank > P.s, rank, rank - 1)")]),
    "ring piece index σ(p − 1) + c": ("ring", "ring", [("return sigma * P.p + shard", "return sigma * (P.p - 1) + shard")]),
    "ring slot without ℓ": ("ring", "ring", [("return shard_size(A, P) * P.ell", "return shard_size(A, P)")]),
    "ring shard 1/(kp + 1)": ("ring", "ring", [("1 / (A.real(P.k) * A.real(P.p))", "1 / (A.real(P.k) * A.real(P.p) + 1)")]),
}

# The builder's own loops and flow assembly (optcc_flows), which no obligation reads: the
# certificate's instance check enumerates the families itself and must refuse them.
# name -> [(old, new)] edits of optcc/algorithms/single/families.py
GENERATOR_MUTANTS = {
    "prologue misses its last step": [(_P, _P.replace("range(H - 1)", "range(H - 2)"))],
    "epilogue misses its last step": [(_E, _E.replace("range(H - 1)", "range(H - 2)"))],
    "reduce-scatter loop skips hop 1": [("for j in range(1, H):", "for j in range(2, H):")],
    "all-gather loop misses its last hop": [("for j in range(H - 1):\n                emit(ag",
                                             "for j in range(H - 2):\n                emit(ag")],
    "last segment dropped": [("for sigma in range(k):", "for sigma in range(k - 1):")],
    "pipeline starts counted in prologue slots": [("+ key[1] * unit[T.phase]", "+ key[1] * unit[0]")],
    "every flow adds": [("piece_index(INT, P, T.piece), fam.op, start", "piece_index(INT, P, T.piece), \"add\", start")],
    "flows reversed": [("Flow(node_rank(INT, P, T.src), node_rank(INT, P, T.dst)",
                        "Flow(node_rank(INT, P, T.dst), node_rank(INT, P, T.src)")],
}


def _mutant_module(module, edits, name):
    src = inspect.getsource(module)
    for old, new in edits:
        assert src.count(old) == 1, old
        src = src.replace(old, new)
    mod = types.ModuleType(name)
    exec(compile(src, f"<mutant {name}>", "exec"), mod.__dict__)
    return mod


def generator_mutant(edits):
    """optcc_flows of a copy of families/optcc.py with `edits` applied (for monkeypatching)."""
    return _mutant_module(FO, edits, "optcc_families_mutant").optcc_flows


GLUE_FUNCTIONS = {"optcc": ("piece_index", "node_rank", "rank_node", "shard_size", "p2p_size", "piece_size",
                            "pipeline_slots", "phase_clock", "rate"),
                  "ring": ("piece_index", "shard_size", "slot", "rate")}


def apply_glue_mutant(monkeypatch, name):
    """Replace the glue functions of the construction's families module by the mutant's (every
    reader, the verifier included, looks them up there); returns the construction."""
    algo, which, edits = GLUE_MUTANTS[name]
    module = FO if which == "optcc" else FR
    mod = _mutant_module(module, edits, f"{which}_families_mutant")
    for fn in GLUE_FUNCTIONS[which]:
        monkeypatch.setattr(module, fn, getattr(mod, fn))
    return algo


FOLDER = {"optcc": "single", "ring": "ring"}       # families module -> its construction's folder


def source_edits(name):
    """(repository-relative file, [(old, new)]) of a glue mutant, for a mutated copy of the tree."""
    algo, which, edits = GLUE_MUTANTS[name]
    return f"optcc/algorithms/{FOLDER[which]}/families.py", edits


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


# name -> (construction, module, attribute, original -> mutant)
VERIFIER_MUTANTS = {
    "optcc spans: rs hop j ≤ H − 2": ("optcc", PO, "spans", _span("optcc.rs_hop", 2, lambda P: P.p - 3)),
    "optcc spans: segments σ ≤ k − 2": ("optcc", PO, "spans", _span("optcc.upload", 0, lambda P: P.k - 2)),
    "ring spans: t ≤ p − 3": ("ring", PR, "spans", _span("ring.reduce_scatter", 1, lambda P: P.p - 3)),
}
