"""The lower bounds as sympy expressions, each built from a cut term and a volume term.

Every bound is max{cut, volume} in units of n/B. The two ingredients are separate `Term`
objects whose `argument` says why the term is a lower bound, so a reader (or `optcc bound
--derive`) sees which term binds where. Labels: "paper" = the formula is stated in the paper
(Theorem 1 / Theorem 3, see shared/PAPER.md "Lower bounds"); "derived" = derived in this
module (the argument in the term's docstring) and checked in tests/test_bounds*.py.

Model (paper's, NVLink-rich): every GPU has a full-duplex NIC of bandwidth B (a straggler B/ℓ);
GPUs of one server talk over NVLink, treated as free. Data is infinitely divisible and messages
carry element-wise values (partial sums), as in the paper's reading of its volume argument.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import sympy as sp

# ---- symbols ---------------------------------------------------------------------------
p = sp.Symbol("p", positive=True, integer=True)      # GPUs
g = sp.Symbol("g", positive=True, integer=True)      # GPUs per server
q = sp.Symbol("q", positive=True, integer=True)      # servers, q = p/g
m = sp.Symbol("m", positive=True, integer=True)      # number of stragglers
ell = sp.Symbol("ell", positive=True)                # slowdown ℓ ≥ 1 (NIC at B/ℓ)
i = sp.Symbol("i", positive=True, integer=True)      # summation index
ELL = sp.IndexedBase("ell", positive=True)           # ℓ_1 ≥ … ≥ ℓ_m


def ells(count: int) -> tuple[sp.Symbol, ...]:
    """ℓ_1 … ℓ_count as plain positive symbols (for a concrete number of stragglers)."""
    return sp.symbols(f"ell1:{count + 1}", positive=True)


# ---- objects ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Term:
    """One ingredient of a bound: `expr` (units of n/B), its kind ("cut"/"volume"), the argument."""

    kind: str
    expr: sp.Expr
    argument: str
    label: str  # "paper: …" or "derived: …"


@dataclass(frozen=True)
class Bound:
    """T ≥ max{cut, volume}·n/B, with the assumptions under which it holds."""

    name: str
    cut: Term
    volume: Term
    label: str
    assumptions: str
    symbols: tuple = field(default=())

    @property
    def expr(self) -> sp.Expr:
        return sp.Max(self.cut.expr, self.volume.expr)

    def terms(self) -> tuple[Term, Term]:
        return (self.cut, self.volume)


def _term(kind: str, expr, builder, label: str) -> Term:
    return Term(kind, sp.sympify(expr), " ".join(builder.__doc__.split()), label)


# ---- the fault-free optimum ------------------------------------------------------------
def t0_single_gpu_servers() -> sp.Expr:
    """T0 for g = 1 (paper, PAPER.md "Model"): 2(p−1)/p, NCCL ring's time and nccl-tests' busbw factor."""
    return 2 * (p - 1) / p


def t0_servers() -> sp.Expr:
    """T0 with g GPUs per server (paper, Theorem 3's T0): 2(p−g)/(g·p) = 2(q−1)/(q·g)."""
    return 2 * (p - g) / (g * p)


T0_G1 = t0_single_gpu_servers()
T0 = t0_servers()


# ---- Theorem 1: one straggler, g = 1 ---------------------------------------------------
def theorem1_cut() -> Term:
    """Cut term ℓ (argument derived; formula paper, Theorem 1). Every one of the straggler's n
    input elements enters the sum that the other GPUs must end with, so at least n bytes
    (one element-wise value per element) must leave the straggler. Symmetrically the straggler
    must end with the sum, which depends on the others' inputs in all n elements, so at least n
    bytes must enter it. Its NIC moves at most B/ℓ in each direction, hence T ≥ ℓ·n/B."""
    return _term("cut", ell, theorem1_cut, "paper: Theorem 1 (cut term); argument derived")


def theorem1_volume() -> Term:
    """Volume term 2ℓ(p−1)/(ℓ(p−1)+1) (argument derived; formula paper, Theorem 1). For every
    element, all p GPUs must learn the sum of p inputs; with one-way messages this takes at least
    2(p−1) messages (p−1 to gather every input into a first GPU that knows the sum, then one more
    into each of the p−1 others), so the NICs send at least 2(p−1)·n bytes in total. Together
    the NICs send at most (p−1)·B + B/ℓ bytes per second. Dividing gives
    T ≥ 2(p−1)/(p−1+1/ℓ)·n/B."""
    return _term("volume", 2 * ell * (p - 1) / (ell * (p - 1) + 1), theorem1_volume,
                 "paper: Theorem 1 (volume term); argument derived (docs/bounds.md)")


THEOREM_1 = Bound(
    "Theorem 1", theorem1_cut(), theorem1_volume(),
    "paper: Theorem 1 (the g = 1 case of Theorem 3)",
    "p ≥ 2 GPUs, one GPU per server, one straggler whose NIC runs at B/ℓ, ℓ ≥ 1",
    (p, ell),
)

# The paper's Theorem 3, typed verbatim (PAPER.md line "T ≥ max{ 2ℓ(p−g) / (g(ℓ(p−g)+g)) , ℓ/g }").
PAPER_THEOREM_3_VERBATIM = sp.Max(2 * ell * (p - g) / (g * (ell * (p - g) + g)), ell / g)
PAPER_THEOREM_1_VERBATIM = sp.Max(2 * ell * (p - 1) / (ell * (p - 1) + 1), ell)


# ---- Theorem 3: one straggler server, g GPUs per server --------------------------------
def theorem3_cut() -> Term:
    """Cut term ℓ/g (argument derived; formula paper, Theorem 3). Contract every server to one
    node: NVLink inside a server is free, so only NIC traffic between servers costs time. The
    straggler server's n input elements must all leave it and the n-element sum must enter it.
    Its g NICs, each slowed to B/ℓ, move at most g·B/ℓ bytes per second in each direction,
    hence T ≥ ℓ/g·n/B."""
    return _term("cut", ell / g, theorem3_cut, "paper: Theorem 3 (cut term); argument derived")


def theorem3_volume() -> Term:
    """Volume term 2ℓ(p−g)/(g(ℓ(p−g)+g)) (argument derived; formula paper, Theorem 3). With
    each server contracted to one node there are q = p/g nodes, and the gossip argument of
    Theorem 1 needs at least 2(q−1) inter-server messages per element, 2(q−1)·n bytes in all.
    The healthy servers' NICs send at most (q−1)·g·B bytes per second and the straggler
    server's g·B/ℓ. Dividing gives T ≥ 2(q−1)/(g(q−1)+g/ℓ)·n/B, which is the paper's form
    after q = p/g."""
    return _term("volume", 2 * ell * (p - g) / (g * (ell * (p - g) + g)), theorem3_volume,
                 "paper: Theorem 3 (volume term); argument derived")


THEOREM_3 = Bound(
    "Theorem 3", theorem3_cut(), theorem3_volume(),
    "paper: Theorem 3",
    "p GPUs, g per server (g | p, p ≥ 2g), NVLink-rich; one straggler server whose g NICs all run "
    "at B/ℓ, ℓ ≥ 1",
    (p, g, ell),
)


# ---- several stragglers, g = 1 (derived) -----------------------------------------------
def multi_cut() -> Term:
    """Cut term ℓ_1 = max ℓ_i (derived). The cut argument of Theorem 1 applies to each straggler
    i on its own: n bytes must leave it and n bytes must enter it through a NIC of B/ℓ_i, so
    T ≥ ℓ_i·n/B for every i. The strongest is the slowest straggler, ℓ_1 with the paper's
    ordering ℓ_1 ≥ … ≥ ℓ_m."""
    return _term("cut", ELL[1], multi_cut, "derived: bounds/symbolic.py multi_cut")


def multi_volume() -> Term:
    """Volume term 2(p−1)/(p−m+Σ1/ℓ_i) (derived). The gossip count of Theorem 1 does not depend
    on who is slow: the NICs must send at least 2(p−1)·n bytes in total. With m stragglers the
    NICs together send at most (p−m)·B + Σ_i B/ℓ_i bytes per second. Dividing gives the term;
    it is Theorem 1's volume term when m = 1."""
    return _term("volume", 2 * (p - 1) / (p - m + sp.Sum(1 / ELL[i], (i, 1, m))), multi_volume,
                 "derived: bounds/symbolic.py multi_volume")


MULTI_STRAGGLER = Bound(
    "multi-straggler", multi_cut(), multi_volume(),
    "derived (arguments in bounds/symbolic.py and docs/bounds.md)",
    "p ≥ 2 GPUs, one per server, m stragglers with NICs at B/ℓ_i, ℓ_1 ≥ … ≥ ℓ_m ≥ 1",
    (p, m, ELL),
)


def multi_straggler(slowdowns) -> Bound:
    """The multi-straggler bound for concrete ℓ values (symbols or numbers), cut = max ℓ_i."""
    slowdowns = [sp.sympify(x) for x in slowdowns]
    cut = Term("cut", sp.Max(*slowdowns), MULTI_STRAGGLER.cut.argument, MULTI_STRAGGLER.cut.label)
    vol = Term("volume", 2 * (p - 1) / (p - len(slowdowns) + sum(1 / x for x in slowdowns)),
               MULTI_STRAGGLER.volume.argument, MULTI_STRAGGLER.volume.label)
    return Bound("multi-straggler", cut, vol, MULTI_STRAGGLER.label, MULTI_STRAGGLER.assumptions,
                 (p, *[s for s in slowdowns if isinstance(s, sp.Symbol)]))


# ---- any stragglers, g GPUs per server (derived) ---------------------------------------
def servers_cut(capacities) -> Term:
    """Cut term 1/min_j b_j (derived). Contract each server j to one node whose NICs send (and
    receive) at most b_j·B bytes per second, b_j = Σ over its GPUs of 1/ℓ_k; NVLink is free, so
    any GPU of the server may carry any of its data. Each server's n input elements must leave it
    and the n-element sum must enter it (q ≥ 2 servers), so T ≥ n/(b_j·B) for every j. The
    slowest server binds; with one fully slowed server b = g/ℓ this is Theorem 3's ℓ/g."""
    return _term("cut", sp.Max(*[1 / b for b in capacities]), servers_cut,
                 "derived: bounds/symbolic.py servers_cut")


def servers_volume(capacities) -> Term:
    """Volume term 2(q−1)/Σ_j b_j (derived). On the q contracted servers the gossip count of
    Theorem 1 gives at least 2(q−1) inter-server messages per element, 2(q−1)·n bytes in all.
    All NICs together send at most Σ_j b_j·B bytes per second. Dividing gives the term; with one
    server of b = g/ℓ and q−1 of b = g it is Theorem 3's volume term, and with g = 1 it is the
    multi-straggler volume term."""
    qq = len(capacities)
    return _term("volume", 2 * (qq - 1) / sum(capacities), servers_volume,
                 "derived: bounds/symbolic.py servers_volume")


def servers_bound(slowdowns_by_server) -> Bound:
    """Derived bound for any stragglers with g GPUs per server: one list of ℓ_k per server."""
    caps = [sum(1 / sp.sympify(x) for x in server) for server in slowdowns_by_server]
    return Bound("server-aggregate", servers_cut(caps), servers_volume(caps),
                 "derived (bounds/symbolic.py servers_cut / servers_volume)",
                 "q ≥ 2 servers of g GPUs, NVLink-rich, any ℓ_k ≥ 1 per GPU")


def straggler_servers(slowdowns) -> Bound:
    """Derived: m fully slowed servers (all g GPUs of server i at ℓ_i), q = p/g servers, symbolic
    in p and g: max{max ℓ_i/g, 2(q−1)/(g(q−m+Σ1/ℓ_i))}, i.e. the multi-straggler bound on q
    nodes divided by g."""
    slowdowns = [sp.sympify(x) for x in slowdowns]
    qq = p / g
    cut = Term("cut", sp.Max(*slowdowns) / g, " ".join(servers_cut.__doc__.split()),
               "derived: bounds/symbolic.py servers_cut")
    vol = Term("volume", 2 * (qq - 1) / (g * (qq - len(slowdowns)) + sum(g / x for x in slowdowns)),
               " ".join(servers_volume.__doc__.split()), "derived: bounds/symbolic.py servers_volume")
    return Bound("straggler servers", cut, vol, "derived (bounds/symbolic.py)",
                 "p GPUs, g per server, q = p/g ≥ 2 servers, NVLink-rich, m servers fully slowed")


# ---- facts used by tests and --derive --------------------------------------------------
def crossing_point(bound: Bound) -> sp.Expr:
    """The ℓ > 0 where cut = volume, solved by sympy (unique positive root)."""
    roots = [r for r in sp.solve(sp.Eq(bound.cut.expr, bound.volume.expr), ell) if r != 0]
    if len(roots) != 1:
        raise ValueError(f"expected one positive crossing point, got {roots}")
    return sp.simplify(roots[0])


def ratio_to_t0(term: Term, t0=T0) -> sp.Expr:
    return sp.simplify(term.expr / t0)
