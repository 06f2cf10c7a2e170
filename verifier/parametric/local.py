"""Property "local": a rank's own enumeration (optcc.algorithms.families.local) is exactly the
schedule restricted to that rank, for every size.

Per family of a generator and per end (src, dst), with node r symbolic (0 ≤ r < nodes):
  sound     r in the branch's nodes, free indices in their loop ranges, the solved index from
            them, that index in the family's domain ⇒ the flow's end is r;
  complete  an index in the domain ⇒ at r = its src (and at r = its dst) one branch of that end
            applies, and only one, its free indices lie in their loop ranges and its solved
            index is the index itself.
So each rank enumerates exactly its flows, each once (src ≠ dst is property well_formed), and
both ends of a flow enumerate it at the same index: they evaluate the same terms on it, so they
agree on its posting key (start, src, dst, piece) and on everything else about it.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import z3

from optcc.algorithms.families.local import free_positions, local_form
from verifier.parametric.arith import Z3Arith
from verifier.parametric.generic import GeneratorModel, fresh_index
from verifier.parametric.obligations import Obligation

if TYPE_CHECKING:
    from optcc.algorithms.families import Term
    from verifier.parametric.arith import Z3Term


def _in_ranges(vals: Sequence[Term], spans: Sequence[tuple[Term, Term]]) -> Z3Term:
    return z3.And(*[z3.And(v >= lo, v <= hi) for v, (lo, hi) in zip(vals, spans)]) if vals else z3.BoolVal(True)


def obligations(C: GeneratorModel) -> list[Obligation]:
    """Soundness per branch, completeness per family and end, over C's families (a mutant's too)."""
    form = local_form(C.name)
    swap = dict(zip((f.name for f in form.families), C.families))
    P = C.P
    out: list[Obligation] = []
    for br in form.branches:
        fam = swap[br.family.name]
        A = Z3Arith()
        r = z3.Int("r")
        free_pos = free_positions(br)
        free = [z3.Int(f"{fam.index[i]}_free") for i in free_pos]
        spans = form.ranges(P)[fam.name]
        PT = form.terms_params(P)
        idx = tuple(br.solve(A, PT, r, *free))
        T = fam.terms(A, PT, *idx)
        end = T.src if br.end == "src" else T.dst
        assume = (C.assume + [r >= 0, r < C.nodes(P), br.applies(A, P, r),
                              _in_ranges(free, [spans[i] for i in free_pos])]
                  + fam.domain(A, PT, *idx) + A.product_lemmas())
        out.append(Obligation("local", f"{fam.name}: the {br.end} branch enumerates only flows at its rank",
                              assume, end == r, list(A.side), P, [(fam, idx)]))
    for fam in C.families:
        A = Z3Arith()
        idx = fresh_index(fam, "1")
        PT = form.terms_params(P)
        T = fam.terms(A, PT, *idx)
        fam_spans = form.ranges(P).get(fam.name)
        goals: list[Z3Term] = []
        for end, r in (("src", T.src), ("dst", T.dst)):
            mine = [br for br in form.branches if swap[br.family.name] is fam and br.end == end]
            hits: list[Z3Term] = []
            for br in mine:
                assert fam_spans is not None                # a family with branches has ranges
                free_pos = free_positions(br)
                again = br.solve(A, PT, r, *[idx[i] for i in free_pos])
                hits.append(z3.And(br.applies(A, P, r), _in_ranges([idx[i] for i in free_pos],
                                                                   [fam_spans[i] for i in free_pos]),
                                   *[a == b for a, b in zip(again, idx)]))
            goals.append(z3.Or(*hits) if hits else z3.BoolVal(False))          # found by one branch
            goals += [z3.Not(z3.And(mine[a].applies(A, P, r), mine[b].applies(A, P, r)))
                      for a in range(len(mine)) for b in range(a + 1, len(mine))]  # and only one
        out.append(Obligation("local", f"{fam.name}: both ends enumerate every flow once, at its own index",
                              C.assume + fam.domain(A, PT, *idx) + A.product_lemmas(), z3.And(*goals),
                              list(A.side), P, [(fam, idx)]))
    return out
