"""One rank's flows of a proved generator, enumerated directly: O(p·k) work per rank, not the
O(p²·k) of the whole schedule.

A family's flows touch node r where its src or its dst is r. For each family and end, a
`Branch` solves that equation for one index (e.g. the ring hop of position i: src = r means
i = r, dst = r means i = r − 1 mod p) and leaves the other indices free over their loop ranges.
`rank_flow_arrays` evaluates every branch on numpy index arrays (the family formulas with the
arithmetic namespace `families.arrays.NP`, as the global arrays do), keeps the indices in the
family's domain and returns the rank's flows in posting order (optcc.schedule.posting_order:
start, src, dst, piece).

What makes this the schedule's own restriction to the rank, for every p (verifier.parametric.local,
property "local" of `optcc prove-all`): each branch is sound (what it enumerates in the domain
has the rank at that end), complete (every flow in the domain with the rank at that end is
the branch's solution at its free indices, which lie in the loop ranges), so both ends of a
flow enumerate it at the same index and compute the same posting key from the same terms; and
src ≠ dst (property well_formed) keeps the two branches of a family disjoint. Tested equal to
the global enumeration filtered to the rank (tests/optcc/test_rank_local.py).
"""
from __future__ import annotations

import importlib
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from optcc.algorithms.families import INT, Params, Term
from optcc.algorithms.families.local_form import Branch, LocalForm
from optcc.proof_sources import SOURCES
from optcc.errors import OptccError



_BUILT: dict[str, LocalForm] = {}


def local_form(algo: str) -> LocalForm:
    """The rank-local enumeration of a proved generator: `form()` of the `local` module in the
    folder optcc.proof_sources.SOURCES names for it (optcc/algorithms/ring, …/single)."""
    if algo not in SOURCES:
        raise OptccError("algo", f"no rank-local enumeration for {algo!r} (known: {', '.join(SOURCES)})")
    if algo not in _BUILT:
        module = importlib.import_module(SOURCES[algo].replace("/", ".") + ".local")
        _BUILT[algo] = module.form()
    return _BUILT[algo]


def free_positions(branch: Branch) -> list[int]:
    n = len(branch.family.index)
    return [i for i in range(n) if i != branch.solved]


@dataclass
class RankFlows:
    """One rank's flows as arrays in posting order: ranks, piece index, op (0 add, 1 copy) and
    start on the integer grid `scale` (time = start / scale, n/B)."""

    rank: int
    pieces: list[Fraction]
    src: npt.NDArray[np.int64]
    dst: npt.NDArray[np.int64]
    piece: npt.NDArray[np.int64]
    op: npt.NDArray[np.int64]
    start: npt.NDArray[np.int64]
    scale: int

    def __len__(self) -> int:
        return int(self.src.size)

    def peers(self) -> list[int]:
        """The ranks this rank exchanges with, ascending."""
        other = np.where(self.src == self.rank, self.dst, self.src)
        peers: list[int] = np.unique(other).tolist()
        return peers


def rank_flow_arrays(algo: str, p: int, k: int, s: int, ell: Fraction, rank: int) -> RankFlows:
    """The flows of `algo`'s families on (p, k, straggler s at ℓ) with `rank` at either end."""
    from optcc.algorithms.families.arrays import NP, PhaseGrid
    form = local_form(algo)
    if not 0 <= rank < p:
        raise OptccError("rank", f"expected a rank in 0..{p - 1}, got {rank}")
    P = Params(p, k, Fraction(ell), s)
    node = form.node_of(P, rank)
    ranges = form.ranges(P)
    origin, unit = form.clock(P)
    P = form.terms_params(P)
    parts: list[tuple[Any, ...]] = []           # (phase, offset, box, src, dst, piece, op)
    for br in form.branches:
        if not br.applies(NP, P, node):
            continue
        fam = br.family
        free = [ranges[fam.name][i] for i in free_positions(br)]
        if any(hi < lo for lo, hi in free):
            continue
        grids = np.meshgrid(*[np.arange(lo, hi + 1, dtype=np.int64) for lo, hi in free], indexing="ij")
        vals = [g.reshape(-1) for g in grids]
        idx = [np.broadcast_to(np.asarray(x, dtype=np.int64), vals[0].shape)
               for x in br.solve(NP, P, node, *vals)]
        keep = np.ones(vals[0].size, dtype=bool)
        for cond in fam.domain(NP, P, *idx):
            keep &= np.broadcast_to(np.asarray(cond, dtype=bool), keep.shape)
        if not keep.any():
            continue
        idx = [a[keep] for a in idx]
        T = fam.terms(NP, P, *idx)
        m = idx[0].size

        def full(v: Term, m: int = m) -> npt.NDArray[np.int64]:
            return np.broadcast_to(np.asarray(v, dtype=np.int64), (m,))

        for name in ("offset", "phase"):
            if not isinstance(getattr(T, name), (int, Fraction, np.integer)):
                raise TypeError(f"families.local: {fam.name}.{name} varies per flow")
        parts.append((int(T.phase), Fraction(T.offset), full(T.box), form.rank_of(P, full(T.src)),
                      form.rank_of(P, full(T.dst)), full(form.piece_of(P, tuple(full(c) for c in T.piece))),
                      0 if fam.op == "add" else 1))
    clock = PhaseGrid([(ph, offset) for ph, offset, *_ in parts], origin, unit)
    scale = clock.scale
    starts: list[npt.NDArray[np.int64]] = []
    cols: list[list[npt.NDArray[np.int64]]] = [[], [], [], []]
    for ph, offset, box, src, dst, piece, op in parts:
        base, step = clock.terms(ph, offset, int(box.max()))
        starts.append(box * step + base)
        for col, v in zip(cols, (src, dst, piece, np.full(box.size, op, dtype=np.int64))):
            col.append(v)
    if not parts:
        empty = np.zeros(0, dtype=np.int64)
        return RankFlows(rank, form.pieces(P), empty, empty, empty, empty, empty, scale)
    start = np.concatenate(starts)
    src, dst, piece, op = (np.concatenate(c).astype(np.int64) for c in cols)
    order = np.lexsort((piece, dst, src, start))     # posting order: start, src, dst, piece
    return RankFlows(rank, form.pieces(P), src[order], dst[order], piece[order], op[order], start[order], scale)


OP_CODES = {"add": 0, "copy": 1}     # RankFlows.op; any other op of a family is none of these (-1)


def rank_flows_reference(algo: str, p: int, k: int, s: int, ell: Fraction,
                         rank: int) -> tuple[list[Fraction], tuple[npt.NDArray[np.int64], ...], int]:
    """(pieces, (start, src, dst, piece, op) columns in posting order, scale) of `rank`'s flows,
    enumerated one flow at a time in exact arithmetic (INT): each branch's indices solved per
    point, the domain and terms evaluated as the proof states them, start = origin + (box +
    offset)·unit on the integer grid `scale` (exact: scale is the lcm of every phase's origin,
    unit and offset·unit denominators; each (phase, offset) pair's base and step computed once
    in Python ints, each start in Python ints), ranks and piece indices from the construction's
    own maps, op as OP_CODES. An independent route to what rank_flow_arrays computes with numpy
    (index grids, masks, its start grid, the sort), so a rank can check its part before it runs
    (check_rank_part); the columns become int64 arrays only at the end (OptccError where a start
    does not fit), sorted by the posting key (start, src, dst, piece)."""
    from itertools import product
    form = local_form(algo)
    ell = Fraction(ell)
    P = Params(p, k, ell.numerator if ell.denominator == 1 else ell, s)   # an integral ℓ as an int: the
    node = form.node_of(P, rank)                                           # same values, no Fraction per flow
    ranges = form.ranges(P)
    origin, unit = form.clock(P)
    PT = form.terms_params(P)
    rank_of = {n: form.rank_of(PT, n) for n in range(form.nodes(PT))}    # the form's map, each node once
    piece_of = form.piece_of
    pair_id: dict[tuple[int, Fraction], int] = {}       # (phase, offset) -> its index in `pairs`
    boxes: list[int] = []
    pair: list[int] = []
    src: list[int] = []
    dst: list[int] = []
    piece: list[int] = []
    ops: list[int] = []
    try:
        for br in form.branches:
            if not br.applies(INT, PT, node):
                continue
            fam = br.family
            free = [range(lo, hi + 1) for lo, hi in (ranges[fam.name][i] for i in free_positions(br))]
            op, solve, domain, terms = OP_CODES.get(fam.op, -1), br.solve, fam.domain, fam.terms
            for vals in product(*free):
                idx = solve(INT, PT, node, *vals)
                if not all(domain(INT, PT, *idx)):
                    continue
                T = terms(INT, PT, *idx)
                key = (T.phase, T.offset)
                j = pair_id.get(key)
                if j is None:
                    j = pair_id[key] = len(pair_id)
                boxes.append(T.box)
                pair.append(j)
                src.append(rank_of[T.src])
                dst.append(rank_of[T.dst])
                piece.append(piece_of(PT, T.piece))
                ops.append(op)
    except KeyError as e:
        raise OptccError("schedule", f"rank {rank}: a proved {algo} family names node {e.args[0]}, "
                                     f"outside 0..{len(rank_of) - 1}") from None
    pairs = [(int(ph), Fraction(off)) for ph, off in pair_id]
    scale = 1
    for ph, off in pairs:
        for x in (origin[ph], unit[ph], off * unit[ph]):
            scale = math.lcm(scale, Fraction(x).denominator)
    base = [int((origin[ph] + off * unit[ph]) * scale) for ph, off in pairs]
    step = [int(unit[ph] * scale) for ph, _ in pairs]
    try:
        cols = [np.array(c, dtype=np.int64) for c in
                ([base[j] + b * step[j] for j, b in zip(pair, boxes)], src, dst, piece, ops)]
    except OverflowError:
        raise OptccError("schedule", f"rank {rank}'s flow starts do not fit int64 on their grid "
                                     f"({scale} steps per n/B)") from None
    ref_start, ref_src, ref_dst, ref_piece, _ = cols
    posting = np.lexsort((ref_piece, ref_dst, ref_src, ref_start))      # key (start, src, dst, piece)
    return form.pieces(PT), tuple(c[posting] for c in cols), scale


def check_rank_part(algo: str, p: int, k: int, s: int, ell: Fraction, rank: int, flows: RankFlows) -> None:
    """Refuse (OptccError "schedule") a rank's part, as the arrays its Schedule is made of
    (rank_flow_arrays, one Flow per row: optcc.generated.GeneratedSchedule.rank_schedule), that
    is not rank_flows_reference's enumeration: every flow, op, start and piece size."""
    pieces, want, scale = rank_flows_reference(algo, p, k, s, ell, rank)
    if list(flows.pieces) != pieces:
        raise OptccError("schedule", f"rank {rank}'s piece sizes are not the proved construction's")
    if len(flows) != want[0].size:
        raise OptccError("schedule", f"rank {rank} built {len(flows)} flows; the proved {algo} families "
                                     f"give it {want[0].size}")
    got = (flows.start, flows.src, flows.dst, flows.piece, flows.op)
    if scale == flows.scale and all(np.array_equal(g, w) for g, w in zip(got, want)):
        return
    common = math.lcm(scale, flows.scale)                 # one grid for both, in Python ints
    rows = [list(zip([t * (common // sc) for t in c[0].tolist()], *(x.tolist() for x in c[1:])))
            for c, sc in ((got, flows.scale), (want, scale))]
    i = next((i for i, (g, w) in enumerate(zip(*rows)) if g != w), None)
    if i is None:
        return                                            # the same flows on two grids
    names = {v: k for k, v in OP_CODES.items()}
    (gt, *g), (wt, *w) = rows[0][i], rows[1][i]
    raise OptccError("schedule", f"rank {rank}'s flow {i} ({g[0]} -> {g[1]}, piece {g[2]}, {names.get(g[3], g[3])} "
                                 f"at {Fraction(gt, common)}) is not the proved families' ({w[0]} -> {w[1]}, "
                                 f"piece {w[2]}, {names.get(w[3], w[3])} at {Fraction(wt, common)}); refusing to run it")


def check_start_grid(algo: str, p: int, k: int, s: int, ell: Fraction, field: str = "cluster") -> None:
    """OptccError(field) where a rank's starts on these parameters would not fit rank_flow_arrays'
    integer grid (int64): every start lies before the construction's finish, so the grid's scale
    times the finish bounds them. Cheap: the clock and one term evaluation per family."""
    from optcc.algorithms.families.arrays import INT64_SAFE, PhaseGrid
    form = local_form(algo)
    P = Params(p, k, Fraction(ell), s)
    origin, unit = form.clock(P)
    PT = form.terms_params(P)
    ranges = form.ranges(P)
    pairs: set[tuple[int, Fraction]] = set()
    for fam in form.families:
        T = fam.terms(INT, PT, *(lo for lo, _ in ranges[fam.name]))
        pairs.add((int(T.phase), Fraction(T.offset)))
    grid = PhaseGrid(sorted(pairs), origin, unit)
    finish = form.finish(P)
    bound = (finish + 4 * max(unit)) * grid.scale     # the last box, its length and offset: margin
    if bound >= INT64_SAFE:
        raise OptccError(field, f"ℓ = {ell} puts this schedule's flow starts on a grid of {grid.scale} steps per "
                                f"n/B, beyond int64 (about 2^{int(bound).bit_length()}); give ℓ with a smaller "
                                "denominator")
