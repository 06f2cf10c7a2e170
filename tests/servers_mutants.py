"""Mutants of the multi-GPU server lift, its NVLink brackets, their placement and the q = 2 swap
(optcc.algorithms.servers.families): each must be refuted by `prove_all("servers")` and by the
per-instance verifier on the schedule the mutant enumerates."""
from __future__ import annotations

from dataclasses import replace

from optcc.algorithms.servers import families as S

L = S.LIFT


def _rf(dst=None, inst_add=None, inst_copy=None):
    def round_flow(A, g, t, j, op):
        src, d, inst = L.round_flow(A, g, t, j, op)
        if dst is not None:
            d = dst(A, g, t, j)
            inst = d if op == "add" else j
        if op == "add" and inst_add is not None:
            inst = inst_add(A, g, t, j, d)
        if op != "add" and inst_copy is not None:
            inst = inst_copy(A, g, t, j, d)
        return src, d, inst
    return round_flow


LIFT_MUTANTS = {
    "rank s·(g−1) + l (servers overlap)": replace(L, rank=lambda A, g, s, l: A.mul(s, g - 1) + l),
    "rank s·g + l + 1 (off by one)": replace(L, rank=lambda A, g, s, l: A.mul(s, g) + l + 1),
    "piece l·(P−1) + π (instances overlap)": replace(L, piece=lambda A, P, l, pi: A.mul(l, P - 1) + pi),
    "piece l·P + π + 1 (off by one)": replace(L, piece=lambda A, P, l, pi: A.mul(l, P) + pi + 1),
    "piece size x/(g−1)": replace(L, size=lambda A, x, g: x / (g - 1)),
    "instance time D + t·g (scaled the wrong way)": replace(L, time=lambda A, D, t, g: D + t * g),
    "instance time t/g (no lead)": replace(L, time=lambda A, D, t, g: t / g),
    "NVLink round sends to (j + t + 1) mod g": replace(L, round_flow=_rf(dst=lambda A, g, t, j: A.mod(j + t + 1, g, 0, 1))),
    "rounds 1..g−2 (one round short)": replace(L, rounds=lambda A, g: (1, g - 2)),
    "rounds 0..g−1 (one round too many)": replace(L, rounds=lambda A, g: (0, g - 1)),
    "reduce-scatter carries the sender's instance": replace(L, round_flow=_rf(inst_add=lambda A, g, t, j, d: j)),
    "all-gather carries the receiver's instance": replace(L, round_flow=_rf(inst_copy=lambda A, g, t, j, d: d)),
    "reduce-scatter copies instead of adding": replace(L, rs_op="copy"),
    "all-gather adds instead of copying": replace(L, ag_op="add"),
    "round t starts at st + t·rnd": replace(L, round_start=lambda A, st, t, rnd: st + t * rnd),
    "rounds overlap (st + (t−1)·rnd/2)": replace(L, round_start=lambda A, st, t, rnd: st + (t - 1) * rnd / 2),
    "round length x/(2·s_nv)": replace(L, round_len=lambda A, x, s_nv: x / (2 * s_nv)),
    "batch (g−2)·rnd (one round short)": replace(L, batch_len=lambda A, g, rnd: (g - 2) * rnd),
    "RS batches not advanced (all at one start)": replace(L, rs_next=lambda A, st, b: st),
    "lead from the batch start, not its end": replace(L, lead_need=lambda A, st, b, ft, g: st - ft / g),
    "AG at its release, NVLink busy or not": replace(L, ag_start=lambda A, release, free: release),
    "AG when NVLink is free, released or not": replace(L, ag_start=lambda A, release, free: free),
}


# Mutants of a formula only the proof reads (the enumeration takes durations from the timing
# model): the schedule is unchanged, so only prove_all can refute them.
MODEL_MUTANTS = {
    "NIC duration not scaled by 1/g": replace(L, dur=lambda A, d, g: d),
    "NIC duration scaled by 1/g²": replace(L, dur=lambda A, d, g: d / (g * g)),
}


def _swap_terms(**change):
    def terms(A, P, i, d):
        T = S.SWAP.terms(A, P, i, d)
        return T._replace(**{k: f(A, P, T, i, d) for k, f in change.items()})
    return terms


SWAP_MUTANTS = {
    "q = 2 swap copies instead of adding": (replace(S.SWAP, op="copy"),),
    "q = 2 segments overlap (slot i − 1)": (replace(S.SWAP, terms=_swap_terms(
        box=lambda A, P, T, i, d: A.ite(i >= 1, i - 1, 0))),),
    "q = 2 one direction a slot late": (replace(S.SWAP, terms=_swap_terms(
        box=lambda A, P, T, i, d: i + d)),),
}


PL = S.PLACEMENT

# Mutants of the closed-form placement times (q ≤ 2). The touch times feed server_flows, so the
# schedule changes and the per-instance verifier refutes them too; the others are read by the
# proof (and by server_finish_time) only.
TOUCH_MUTANTS = {
    "q = 2 first touch one slot late (i + 1)": replace(PL, first_touch=lambda A, k, i: i + 1),
    "q = 2 last write one slot early (i)": replace(PL, last_write=lambda A, k, i: i),
}


def _touch(which, change):
    real = S.optcc_first_touch if which == "first" else S.optcc_last_landing
    return replace(PL, **{"optcc_" + which: lambda A, P, v, key: change(A, P, v, key, real(A, P, v, key))})


def _owner_at_rs(A, P, v, key, r):
    from optcc.algorithms.single.families import _base, _hop, _tau_rs
    if len(key) == 1:
        return r
    sigma, o = key
    H = P.p - 1
    owner = A.And(v != H, v == o)
    return (A.ite(owner, 1, r[0]), A.ite(owner, _base(A, P, sigma, o) + _tau_rs(A, P, H - 1) + _hop(A, P), r[1]))


def _last_in_pipeline(A, P, v, key, r):
    from optcc.algorithms.single.families import _base, _hop, _tau_ag
    if len(key) == 1:
        return r
    sigma, o = key
    H = P.p - 1
    x = A.mod(A.ite(v == H, 0, v) - o - 1, H, -1, 0)
    hit = A.And(v != H, v != o, sigma == P.k - 1)
    return (A.ite(hit, 1, r[0]), A.ite(hit, _base(A, P, sigma, o) + _tau_ag(A, P, x) + _hop(A, P), r[1]))


def _p2p_first_upload(A, P, v, key, r):
    from optcc.algorithms.single.families import _base
    if len(key) == 2:
        return r
    H = P.p - 1
    return r[0], A.ite(v == H, _base(A, P, key[0], H - 1) + 2, r[1])


TOUCH_MUTANTS.update({
    "q ≥ 3 S first touches a shard at its download (B + 2), not its upload": _touch(
        "first", lambda A, P, v, key, r: r if len(key) == 1 else (r[0], A.ite(v == P.p - 1, r[1] + 2, r[1]))),
    "q ≥ 3 first touch of a σ ≥ 1 shard one hop late": _touch(
        "first", lambda A, P, v, key, r: r if len(key) == 1 else
        (r[0], A.ite(A.And(v != P.p - 1, key[0] >= 1), r[1] + 2, r[1]))),
    "q ≥ 3 owner's last landing at its last RS hop, not the download": _touch("last", _owner_at_rs),
    "q ≥ 3 last segment's last landing as an AG hop, not the epilogue": _touch("last", _last_in_pipeline),
    "q ≥ 3 S's last P2P landing from o = H − 1 (the first upload)": _touch("last", _p2p_first_upload),
    "q ≥ 3 a σ = 0 shard first touched at prologue step 0 by every node (too early)": _touch(
        "first", lambda A, P, v, key, r: r if len(key) == 1 else
        (r[0], A.ite(A.And(v != P.p - 1, key[0] == 0), 0, r[1]))),
})

PLACEMENT_MUTANTS = {
    "q = 2 RS batch i at (i + 1)·c": replace(PL, rs_start=lambda A, i, c: (i + 1) * c),
    "q = 2 lead c only (NVLink-bound deadline missed)": replace(PL, lead=lambda A, k, c, N: c),
    "q = 2 lead kc − (k−1)N only": replace(PL, lead=lambda A, k, c, N: k * c - (k - 1) * N),
    "q = 2 AG start without the RS block": replace(
        PL, ag_start=lambda A, i, k, c, N, D: S._max(A, D + N + i * c, D + (i + 1) * N)),
    "q = 2 AG start at its release only": replace(PL, ag_start=lambda A, i, k, c, N, D: D + (i + 1) * N),
    "q = 2 finish without the drain (ℓ/g + W/(2k))": replace(
        PL, finish=lambda A, g, k, ell, s_nv: S._max(A, ell / g + S._nvlink_work(A, g, s_nv) / (2 * k),
                                                     S._nvlink_work(A, g, s_nv))),
    "q = 2 finish ℓ/g + W (no overlap)": replace(
        PL, finish=lambda A, g, k, ell, s_nv: ell / g + S._nvlink_work(A, g, s_nv)),
    "q = 1 finish W/2": replace(PL, finish_one=lambda A, g, s_nv: S._nvlink_work(A, g, s_nv) / 2),
}
