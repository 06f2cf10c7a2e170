"""Streaming runner: the verifier's property (proofs and refutations), random interleavings in
process, and real gloo runs of random proved schedules (int64: exact)."""
import random

import pytest

from optcc.algorithms import build_schedule
from optcc.cluster import Cluster
from verifier import prove_allreduce
from optcc.lowering.streaming import streaming_program
from verifier.streaming import prove_streaming
from verifier.streaming_check import check_streaming

from streaming_cases import random_schedule, signed_schedule, simulate  # noqa: E402

FAMILIES = [("ring", Cluster.build(8), 1), ("optcc", Cluster.build(4, stragglers={0: 2}), 4),
            ("optcc", Cluster.build(8, stragglers={0: 2}), 8),
            ("optcc", Cluster.build(6, stragglers={0: 2, 3: 3}), 2),
            ("optcc", Cluster.build(8, 2, {2: 2, 3: 2}), 2), ("ring", Cluster.build(8, 2, {2: 2, 3: 2}), 1)]


@pytest.mark.parametrize("recv_order", [False, True])
@pytest.mark.parametrize("window", [1, 4])
@pytest.mark.parametrize("algo,cluster,k", FAMILIES)
def test_generated_schedules_are_proved_for_streaming(algo, cluster, k, window, recv_order):
    program, cx = prove_streaming(build_schedule(algo, cluster, k), window, recv_order)
    assert cx is None, cx
    assert program.window == window and program.recv_order == recv_order
    assert all(rp.peer_seq for rp in program.ranks)


def _mutant_cx(mutate, schedule=None):
    schedule = schedule or build_schedule("optcc", Cluster.build(4, stragglers={0: 2}), 2)
    program = streaming_program(schedule, 2)
    mutate(program)
    ok, cx = check_streaming(schedule, program)
    assert not ok
    return cx


def _drop(kind, ev, program):
    """Remove the first dep (ev event of an op of `kind`) from some op; returns (rank, op)."""
    for r, rp in enumerate(program.ranks):
        for n, op in enumerate(rp.ops):
            for d in op.deps:
                if rp.ops[d[0]].kind == kind and d[1] == ev:
                    op.deps.remove(d)
                    return r, n
    raise AssertionError("no such dependency")


def test_dropped_receive_completion_is_a_raw_hazard():
    cx = _mutant_cx(lambda pr: _drop("recv", "C", pr))
    assert cx["kind"] == "RAW" and "scratch slot" in cx["message"], cx


def test_dropped_landing_before_send_is_a_raw_hazard():
    cx = _mutant_cx(lambda pr: _drop("land", "S", pr))
    assert cx["kind"] in ("RAW", "WAW", "WAR"), cx


def test_dropped_send_completion_before_a_write_is_a_war_hazard():
    def mutate(pr):
        for rp in pr.ranks:
            for op in rp.ops:
                if op.kind in ("land", "scale"):
                    op.deps = [d for d in op.deps if not (rp.ops[d[0]].kind == "send" and d[1] == "C")]
    assert _mutant_cx(mutate)["kind"] == "WAR"


def test_dropped_window_dependency_is_refused():
    def mutate(pr):
        rp = pr.ranks[1]
        seq = next(iter(rp.peer_seq.values()))
        rp.ops[seq[2]].deps.remove((seq[0], "C"))
    assert _mutant_cx(mutate)["kind"] == "window"


def test_swapped_pair_order_is_refused():
    def mutate(pr):
        seq = pr.ranks[1].peer_seq[0]
        seq[0], seq[1] = seq[1], seq[0]
    assert _mutant_cx(mutate)["kind"] == "pair order differs"


def test_cross_rank_cycle_is_a_deadlock():
    """Rank 0's first send waits for its last receive, which needs that send (ring, p = 3)."""
    schedule = build_schedule("ring", Cluster.build(3), 1)

    def mutate(pr):
        rp = pr.ranks[0]
        first_send = next(n for n, op in enumerate(rp.ops) if op.kind == "send")
        last_recv = max(n for n, op in enumerate(rp.ops) if op.kind == "recv")
        rp.ops[first_send].deps.append((last_recv, "C"))
    cx = _mutant_cx(mutate, schedule)
    assert cx["kind"] == "deadlock" and len(cx["cycle"]) >= 4, cx


def test_zero_duration_and_bad_window_are_refused():
    from optcc.errors import OptccError
    with pytest.raises(OptccError):
        prove_streaming(build_schedule("ring", Cluster.build(3), 1), 0)


@pytest.mark.parametrize("seed", range(6))
def test_random_interleavings_compute_the_allreduce(seed):
    torch = pytest.importorskip("torch")
    from optcc.lowering.step import piece_ranges
    rng = random.Random(seed)
    schedule = signed_schedule() if seed == 0 else random_schedule(rng, max_p=4)
    program, cx = prove_streaming(schedule, rng.choice([1, 2, 4]), recv_order=seed % 2 == 1)
    assert cx is None, cx
    numel = rng.choice([5, 37, 64])
    p = schedule.cluster.p
    g = torch.Generator().manual_seed(seed)
    xs = [torch.randint(-1000, 1001, (numel,), generator=g, dtype=torch.int64) for _ in range(p)]
    want = torch.stack(xs).sum(0)
    for trial in range(2):
        ys = simulate(schedule, program, [x.clone() for x in xs], rng, piece_ranges(schedule.pieces, numel))
        for r, y in enumerate(ys):
            assert torch.equal(y, want), (schedule.meta.get("algorithm"), r, trial)


def test_simulator_catches_an_unsafe_program():
    """Without its receive-completion dependency a landing reads a slot before the data is there."""
    torch = pytest.importorskip("torch")
    from optcc.lowering.step import piece_ranges
    schedule = build_schedule("optcc", Cluster.build(4, stragglers={0: 2}), 2)
    program = streaming_program(schedule, 2)
    for rp in program.ranks:
        for op in rp.ops:
            if op.kind == "land":
                op.deps = [d for d in op.deps if d[1] != "C"]
    xs = [torch.full((24,), r + 1, dtype=torch.int64) for r in range(4)]
    wrong = 0
    for seed in range(5):
        ys = simulate(schedule, program, [x.clone() for x in xs], random.Random(seed), piece_ranges(schedule.pieces, 24))
        wrong += sum(int((y != 10).sum()) for y in ys)
    assert wrong > 0


def test_random_schedules_are_proved():
    rng = random.Random(7)
    for _ in range(4):
        s = random_schedule(rng, max_p=4)
        assert prove_allreduce(s).proved
        assert prove_streaming(s)[1] is None


def test_streaming_is_bitwise_equal_to_the_step_runner_on_floats():
    """Same order of additions per piece: float results equal the step runner's bit for bit."""
    torch = pytest.importorskip("torch")
    from gpu_runner.executor import run_virtual
    from optcc.lowering.step import piece_ranges
    schedule = build_schedule("optcc", Cluster.build(5, stragglers={2: 3}), 3)
    program, cx = prove_streaming(schedule, 2)
    assert cx is None
    g = torch.Generator().manual_seed(3)
    xs = [torch.randn(301, generator=g) for _ in range(5)]
    step = run_virtual(schedule, [x.clone() for x in xs])
    streamed = simulate(schedule, program, [x.clone() for x in xs], random.Random(5), piece_ranges(schedule.pieces, 301))
    assert all(torch.equal(a, b) for a, b in zip(step, streamed))
    assert not all(torch.equal(step[0], x) for x in xs)


def test_recv_order_posts_each_receive_after_the_previous_senders_message():
    """streaming-ordered: a receive from another peer than the previous receive on its link (which
    the schedule ends first) waits for that receive's completion; the plain program does not."""
    schedule = build_schedule("optcc", Cluster.build(8, stragglers={0: 2}), 4)

    def ordered_pairs(program):
        n_ordered = n_pairs = 0
        for rp in program.ranks:
            recvs = [n for n, op in enumerate(rp.ops) if op.kind == "recv"]
            for a, b in zip(recvs, recvs[1:]):
                if rp.ops[a].peer != rp.ops[b].peer:
                    n_pairs += 1
                    n_ordered += (a, "C") in rp.ops[b].deps
        return n_ordered, n_pairs
    ordered, pairs = ordered_pairs(prove_streaming(schedule, recv_order=True)[0])
    assert pairs > 0 and ordered == pairs
    assert ordered_pairs(prove_streaming(schedule)[0])[0] < pairs
