"""Multi-straggler OptCC (g = 1, m ≥ 2): proofs, port rule, closed form, dispatch, float32 replay, gloo run."""
from __future__ import annotations

from fractions import Fraction as F

import numpy as np
import pytest

from optcc.algorithms import build_schedule
from optcc.algorithms.multi.build import optcc_multi_allreduce, optcc_multi_slot_time
from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.simulate import simulate
from optcc.timing import check_capacity, durations, slot_time
from verifier import prove_allreduce

CASES = [
    (5, {0: F(2), 1: F(4, 3)}, 2),
    (6, {3: F(4, 3), 1: F(8, 7)}, 3),
    (7, {0: F(3, 2), 4: F(2), 6: F(8, 7)}, 2),
    (8, {2: F(2), 5: F(2), 7: F(3)}, 1),
    (3, {0: F(2), 2: F(3, 2)}, 2),          # one healthy GPU
    (7, {0: F(4, 3), 5: F(8, 7)}, 4),       # both fill pieces, relays through both stragglers
    (4, {1: F(3), 3: F(5, 2)}, 3),          # ℓ > 2: fill only for the faster straggler's slack
    (6, {0: F(4, 3), 2: F(8, 7), 5: F(8, 7)}, 4),   # m = 3 chain fill (pairs idle together)
    (8, {1: F(2), 3: F(4, 3), 4: F(3, 2), 6: F(8, 7)}, 3),   # m = 4 chain fill
]


@pytest.mark.parametrize("p,st,k", CASES)
def test_proved_correct_and_exclusive(p, st, k):
    s = optcc_multi_allreduce(Cluster.build(p, stragglers=st), k)
    assert prove_allreduce(s).proved
    assert simulate(s).correct
    assert check_capacity(s) is None
    assert all(f.rate == 1 for f in s.flows)


CLOSED_FORM_CASES = [(p, m, ells, k) for p in (3, 4, 5, 7, 8, 9, 16, 23, 40, 64) for m in (2, 3)
                     for ells in ((F(4, 3), F(8, 7), F(8, 7)), (F(2), F(4, 3), F(3, 2)), (F(3), F(5, 2), F(9, 8)))
                     for k in (1, 2, 5) if m < p and (p <= 23 or k <= 2)]


@pytest.mark.parametrize("p,m,ells,k", CLOSED_FORM_CASES)
def test_closed_form_equals_generated(p, m, ells, k):
    st = {r: ells[i] for i, r in enumerate(range(0, p, max(1, p // m))[:m])}
    c = Cluster.build(p, stragglers=st)
    s = optcc_multi_allreduce(c, k)
    assert slot_time(s) == optcc_multi_slot_time(c, k)
    assert min(f.start for f in s.flows) == 0
    if p <= 16:
        assert check_capacity(s) is None and simulate(s).correct


def test_dispatch_multi_and_single():
    c2 = Cluster.build(6, stragglers={0: F(2), 3: F(4, 3)})
    assert build_schedule("optcc", c2, 2).meta["construction"].startswith("multi-straggler")
    c1 = Cluster.build(6, stragglers={0: F(2)})
    assert "multi" not in build_schedule("optcc", c1, 2).meta["construction"]


def test_errors():
    with pytest.raises(OptccError):
        optcc_multi_allreduce(Cluster.build(5, stragglers={0: F(2)}), 1)
    with pytest.raises(OptccError):
        optcc_multi_allreduce(Cluster.build(5, stragglers={0: F(2), 1: F(2)}), 0)


def test_a_mutated_schedule_is_refuted():
    s = optcc_multi_allreduce(Cluster.build(5, stragglers={0: F(2), 1: F(4, 3)}), 1)
    s.flows = [f for f in s.flows if not (f.src == 1 and f.op == "add")][:] + \
              [f for f in s.flows if f.src == 1 and f.op == "add"][1:]
    assert not prove_allreduce(s).proved


def replay(schedule, inputs, dtype):
    """Replay the schedule's arithmetic in `dtype` (events in time order, lands → local ops → reads)."""
    vals = [[x.astype(dtype).copy() for x in row] for row in inputs]
    events = []
    for f, d in zip(schedule.flows, durations(schedule)):
        events.append((f.start, 2, f))
        events.append((f.start + d, 0, f))
    for op in schedule.local_ops:
        events.append((op.time, 1, op))
    events.sort(key=lambda e: (e[0], e[1]))
    inflight = {}
    for _, kind, x in events:
        if kind == 2:
            inflight[id(x)] = vals[x.src][x.piece].copy()
        elif kind == 0:
            v = inflight.pop(id(x))
            if x.op == "copy":
                vals[x.dst][x.piece] = v
            else:
                vals[x.dst][x.piece] = (vals[x.dst][x.piece] + dtype(x.coef) * v).astype(dtype)
        else:
            vals[x.rank][x.piece] = (dtype(x.coef) * vals[x.rank][x.piece]).astype(dtype)
    return vals


def test_float32_replay_and_subtracting_rule_error():
    """Our rule only adds; the Σ(P + s_i) − (m−1)P rule cancels. Both measured against float64."""
    c = Cluster.build(6, stragglers={0: F(2), 2: F(4, 3), 5: F(8, 7)})
    s = optcc_multi_allreduce(c, 2)
    rng = np.random.default_rng(1)
    n = 256
    inputs = [[rng.standard_normal(n) * 10.0 ** rng.integers(-2, 3) for _ in s.pieces] for _ in range(c.p)]
    ref = [sum(inputs[r][i] for r in range(c.p)) for i in range(len(s.pieces))]
    out = replay(s, inputs, np.float32)
    err_ours = max(float(np.max(np.abs(out[r][i] - ref[i]))) for r in range(c.p) for i in range(len(s.pieces)))
    scale = max(float(np.max(np.abs(x))) for row in inputs for x in row)
    assert err_ours < 1e-5 * scale * c.p
    # subtracting rule on the same data: P = healthy partial, results R_i = P + s_i
    m, errs = 3, []
    for i in range(len(s.pieces)):
        P = sum(inputs[r][i].astype(np.float32) for r in c.healthy).astype(np.float32)
        R = [(P + inputs[r][i].astype(np.float32)).astype(np.float32) for r in c.stragglers]
        got = (sum(R).astype(np.float32) - np.float32(m - 1) * P).astype(np.float32)
        errs.append(float(np.max(np.abs(got - ref[i]))))
    err_sub = max(errs)
    print(f"worst |error| vs float64, float32: ours {err_ours:.3e}, subtracting rule {err_sub:.3e}")
    assert err_sub > 0


def test_int_exact_replay():
    c = Cluster.build(7, stragglers={1: F(2), 4: F(3, 2)})
    s = optcc_multi_allreduce(c, 3)
    rng = np.random.default_rng(2)
    inputs = [[rng.integers(-1000, 1000, 16) for _ in s.pieces] for _ in range(c.p)]
    out = replay(s, inputs, np.int64)
    for i in range(len(s.pieces)):
        ref = sum(inputs[r][i] for r in range(c.p))
        for r in range(c.p):
            assert np.array_equal(out[r][i], ref)


@pytest.mark.parametrize("dtype", ["int32", "float32"])
def test_gloo_run_p5_m2(tmp_path, dtype):
    pytest.importorskip("torch", reason="the runner needs torch (the 'runner' extra)")
    from gpu_runner.launch import launch_trusted
    c = Cluster.build(5, stragglers={0: F(2), 3: F(4, 3)})
    s = optcc_multi_allreduce(c, 2)
    assert prove_allreduce(s).proved
    path = str(tmp_path / "m.json")
    s.save(path)
    res = launch_trusted(path, s.sha256(), 5, 4096, dtype, 120, backend="gloo")
    assert res.ok, res.describe_failure()
    print("runner result:", res.result)
    row = res.result["rows"][0]
    assert res.result["correct"] and row["wrong"] == 0
    if dtype == "int32":
        assert row["max_abs_error"] == 0


@pytest.mark.parametrize("m", [2, 3, 4])
def test_drain_last_hop_identity(m):
    """The closed form's drain term `_drain_last_slot` equals what `_drain_slots` places
    (an identity checked here over a range, not proved in general)."""
    from optcc.algorithms.multi.build import _drain_last_slot, _drain_slots
    for H in list(range(2, 12)) + [17, 30]:
        for k in (1, 2, 5):
            d = _drain_slots(H, m, k)
            assert len(d) >= H * (H - 1)
            assert max(d.values()) == _drain_last_slot(H, m, k)


@pytest.mark.parametrize("p,st,k", [(6, {0: F(4, 3), 2: F(8, 7), 5: F(8, 7)}, 4),
                                    (9, {0: F(2), 3: F(4, 3), 5: F(3, 2)}, 6)])
def test_chain_fill_m3_adds_pieces_and_time_drops(p, st, k, monkeypatch):
    """m ≥ 3 fill: k − 2 pieces per fillable straggler here; slot time strictly below no fill."""
    import optcc.algorithms.multi.build as M
    c = Cluster.build(p, stragglers=st)
    s = optcc_multi_allreduce(c, k)
    roots = sum(1 for e in st.values() if e < 2 * max(F(1), max(st.values()) / 2))
    assert len(s.pieces) == k * (p - len(st)) + (k - 2) * roots
    with_fill = optcc_multi_slot_time(c, k)
    monkeypatch.setattr(M, "_chain_fill_plan", lambda *a: None)
    assert optcc_multi_slot_time(c, k) > with_fill


@pytest.mark.parametrize("H", list(range(3, 13)) + [20, 31, 62])
def test_coincide_rotation_ports_and_sums(H):
    """m = 2: the shared-idle rotation (two moved all-gather hops) keeps one flow per port
    direction and a correct sum for every H tried; its fill pieces exist (≥ k − 2 per root)."""
    from optcc.algorithms.multi.build import _chain_fill_plan
    c = Cluster.build(H + 2, stragglers={0: F(4, 3), H + 1: F(8, 7)})
    s = optcc_multi_allreduce(c, 4)
    assert check_capacity(s) is None
    n = _chain_fill_plan(H, 4, [F(4, 3), F(8, 7)])[2]
    assert n >= 2 and len(s.pieces) == 4 * H + 2 * n
    if H <= 31:
        assert simulate(s).correct
    assert slot_time(s) == optcc_multi_slot_time(c, 4)
