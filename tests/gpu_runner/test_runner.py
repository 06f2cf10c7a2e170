"""gpu_runner plan and in-process executor (run_virtual): pieces, scratch, semantics, dtypes."""
from fractions import Fraction as F

import pytest

torch = pytest.importorskip("torch")

from gpu_runner.executor import Executor, RunnerError, run_virtual  # noqa: E402
from optcc.lowering.step import build_all_plans, build_plan, piece_ranges  # noqa: E402
from optcc.algorithms import build_schedule  # noqa: E402
from optcc.cluster import Cluster  # noqa: E402
from optcc.errors import OptccError  # noqa: E402
from optcc.schedule import Flow, LocalOp, Schedule  # noqa: E402

DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.int32, torch.int64]


def signed_schedule():
    """Hand-made p = 2 schedule with a coefficient 2, a LocalOp −1 and a copy:
    v0 = x0 + 2·x1; v1 = −x1; v0 += v1 → x0 + x1; v1 = v0."""
    c = Cluster.build(2)
    flows = [Flow(1, 0, 0, "add", F(0), coef=2), Flow(1, 0, 0, "add", F(1)), Flow(0, 1, 0, "copy", F(2))]
    return Schedule(c, [F(1)], flows, [LocalOp(1, 0, F(1), -1)], meta={"algorithm": "signed"}).validate()


def snapshot_schedule():
    """p = 3, straggler 0 (ℓ = 2), one piece. Rank 1 sends its piece to the straggler during [0, 2)
    while rank 2's add lands on that same piece at t = 1: the send must keep reading x1 (snapshot)."""
    c = Cluster.build(3, stragglers={0: 2})
    flows = [Flow(1, 0, 0, "add", F(0)),        # v0 = x0 + x1 at t = 2
             Flow(2, 1, 0, "add", F(0)),        # v1 = x1 + x2 at t = 1 (while 1 → 0 is in flight)
             Flow(2, 0, 0, "add", F(2)),        # v0 = x0 + x1 + x2 at t = 4
             Flow(0, 2, 0, "copy", F(4)),       # v2 = sum at t = 6
             Flow(2, 1, 0, "copy", F(6))]       # v1 = sum at t = 7
    return Schedule(c, [F(1)], flows, meta={"algorithm": "snapshot"}).validate()


def inputs(p, n, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return [torch.randn(n, generator=g).to(dtype) for _ in range(p)]
    return [torch.randint(-1000, 1001, (n,), generator=g, dtype=dtype) for _ in range(p)]


def check_allreduce(schedule, n, dtype):
    xs = inputs(schedule.cluster.p, n, dtype)
    exact = torch.stack([x.double() for x in xs]).sum(0)
    run_virtual(schedule, xs)
    for x in xs:
        if dtype.is_floating_point:
            eps = torch.finfo(dtype).eps
            bound = 2 * schedule.cluster.p * eps * torch.stack([y.double().abs() for y in inputs(schedule.cluster.p, n, dtype)]).sum(0)
            assert bool(((x.double() - exact).abs() <= bound + 1e-30).all())
        else:
            assert torch.equal(x.long(), exact.long())


@pytest.mark.parametrize("n", [0, 1, 5, 97, 1000, 4099])
def test_piece_ranges_cover_any_length(n):
    pieces = [F(1, 7)] * 4 + [F(3, 7)]
    ranges = piece_ranges(pieces, n)
    assert ranges[0][0] == 0 and ranges[-1][1] == n
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
    for (lo, hi), size in zip(ranges, pieces):   # each piece within one element of its share
        assert abs((hi - lo) - size * n) < 1


def test_batches_pair_up_across_ranks():
    s = build_schedule("ring", Cluster.build(5, stragglers={1: 2}), 2)
    plans = build_all_plans(s, 1003)
    for pl in plans:
        for st in pl.steps:
            for t in st.posts:
                other = plans[t.peer]
                mirror = [u for u in other.steps if u.time == st.time][0].posts
                # same flow on the other side, same element range, opposite direction
                assert [(u.flow, u.lo, u.hi) for u in mirror if u.peer == pl.rank and u.send != t.send].count(
                    (t.flow, t.lo, t.hi)) == 1
    # ring: every rank posts one send and one receive per step (2(p−1) steps per segment)
    assert all(pl.n_batches == 2 * 4 * 2 for pl in plans)


def test_scratch_is_reused_not_grown_per_step():
    s = build_schedule("ring", Cluster.build(8), 4)
    pl = build_plan(s, 3, 32 * 1000)
    shard = 32 * 1000 // 32
    assert pl.scratch_numel <= 2 * shard + 16      # a landing frees its slot for the next step


@pytest.mark.parametrize("p", [2, 3, 4, 5, 8])
@pytest.mark.parametrize("dtype", DTYPES)
def test_ring_virtual(p, dtype):
    s = build_schedule("ring", Cluster.build(p, stragglers={0: 2}), 2)
    for n in (1, 7, 2 * p + 1, 1001):
        check_allreduce(s, n, dtype)


@pytest.mark.parametrize("p", [3, 4, 5, 8])
@pytest.mark.parametrize("ell", [2, F(3, 2)])
def test_optcc_virtual(p, ell):
    s = build_schedule("optcc", Cluster.build(p, stragglers={0: ell}), 3)
    for dtype in (torch.int64, torch.float32, torch.bfloat16):
        for n in (1, 13, 1001):
            check_allreduce(s, n, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_signed_coefs_and_local_ops(dtype):
    check_allreduce(signed_schedule(), 37, dtype)


def test_snapshot_is_planned_for_a_piece_modified_in_flight():
    s = snapshot_schedule()
    pl = build_plan(s, 1, 64)
    snap = [t for st in pl.steps for t in st.snapshots]
    assert [t.flow for t in snap] == [0] and snap[0].slot is not None
    check_allreduce(s, 64, torch.int64)


def test_wrong_schedule_gives_wrong_answer():
    """The executor really executes (unsafe=True, the test path): dropping the last copy leaves
    rank 1 without the sum. Without unsafe the library gate refuses it, naming the failure."""
    s = signed_schedule()
    broken = Schedule(s.cluster, s.pieces, s.flows[:-1], s.local_ops).validate()
    xs = inputs(2, 9, torch.int64)
    total = xs[0] + xs[1]
    with pytest.raises(OptccError, match="sum: rank 1 ends with a wrong value of piece 0"):
        run_virtual(broken, [x.clone() for x in xs])
    with pytest.raises(OptccError, match="sum: rank 1"):
        Executor(broken, 0)
    with pytest.raises(OptccError, match="unsafe"):
        run_virtual(broken, xs, unsafe="yes")
    run_virtual(broken, xs, unsafe=True)
    assert torch.equal(xs[0], total) and not torch.equal(xs[1], total)


def test_refuses_unsupported_dtype_and_noncontiguous():
    s = signed_schedule()
    with pytest.raises(RunnerError, match="dtype"):
        run_virtual(s, [torch.zeros(4, dtype=torch.float64)] * 2)
    with pytest.raises(RunnerError, match="contiguous"):
        run_virtual(s, [torch.zeros(4, 4).t(), torch.zeros(4, 4).t()])
