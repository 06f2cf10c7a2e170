"""The graph runner's grouping and capture logic (gpu_runner.device_executor), on CPU: a fake
backend records what `emit` issues (streams, events, waits, groups, capture, replay); a checker
builds the happens-before order those calls give a device (stream order, event waits, a group as
one barrier of its halves' streams) and asserts that every two accesses of one buffer range, one
a write, are ordered in issue order; the CPU virtual-rank backend computes the sums exactly.
No GPU has run any of it (docs/gpu_runner.md, "The graph runner")."""
from fractions import Fraction

import pytest

torch = pytest.importorskip("torch")

from gpu_runner.device_executor import (CpuVirtualBackend, GraphExecutor, Half, VirtualGraph,  # noqa: E402
                                        _Bound, _scratch, emit)
from gpu_runner.executor import RunnerError, run_virtual  # noqa: E402
from gpu_runner.runners import RUNNERS, make_executor, program_key  # noqa: E402
from optcc.algorithms import build_schedule  # noqa: E402
from optcc.cluster import Cluster  # noqa: E402
from optcc.lowering.step import build_all_plans, build_plan  # noqa: E402
from optcc.schedule import posting_order  # noqa: E402
from streaming_cases import random_schedule, signed_schedule  # noqa: E402
from test_runner import snapshot_schedule  # noqa: E402


def _span(t):
    lo = t.data_ptr()
    return (lo, lo + t.numel() * t.element_size())


class FakeBackend:
    """Records every call; buffers are real CPU tensors so accesses are byte ranges."""

    def __init__(self, drop_wait=None):
        self.calls = []
        self.nodes = []          # (streams, reads, writes, kind)
        self.events = {}         # event -> node index of its record
        self.wait_edges = {}     # node index -> node index of the record it waits for
        self.drop_wait = drop_wait
        self.n_waits = 0
        self._n = 0
        self.captures = self.replays = self.finishes = 0

    def stream(self, rank, name):
        self.calls.append(("stream", rank, name))
        return (rank, name)

    def event(self):
        self._n += 1
        return self._n

    def _node(self, streams, reads=(), writes=(), kind="op"):
        self.nodes.append((tuple(streams), [_span(t) for t in reads], [_span(t) for t in writes], kind))
        return len(self.nodes) - 1

    def record(self, event, stream):
        self.calls.append(("record", event, stream))
        self.events[event] = self._node([stream], kind="record")

    def wait(self, stream, event):
        self.calls.append(("wait", stream, event))
        k = self.n_waits
        self.n_waits += 1
        if k == self.drop_wait:
            return
        assert event in self.events, "a wait on an event not recorded before it"
        n = self._node([stream], kind="wait")
        self.wait_edges[n] = self.events[event]

    def copy(self, stream, dst, src):
        self.calls.append(("copy", stream))
        self._node([stream], [src], [dst])

    def add(self, stream, dst, src, coef):
        self.calls.append(("add", stream, coef))
        self._node([stream], [src, dst], [dst])

    def scale(self, stream, view, coef):
        self.calls.append(("scale", stream, coef))
        self._node([stream], [view], [view])

    def group(self, time, halves):
        self.calls.append(("group", time, [(h.rank, h.stream, [(f, q) for f, q, _ in h.sends],
                                            [(f, q) for f, q, _ in h.recvs]) for h in halves]))
        self._node([h.stream for h in halves], [b for h in halves for *_, b in h.sends],
                   [b for h in halves for *_, b in h.recvs], kind="group")

    def capture(self, emit_fn):
        self.captures += 1
        emit_fn(("origin", "origin"))
        return ("graph", self.captures)

    def replay(self, graph):
        self.replays += 1

    def finish(self, timeout):
        self.finishes += 1


def hazards(fake):
    """Pairs (i, j), i issued before j, touching overlapping bytes (one a write) that stream order
    and event waits do not order; and whether the origin stream forks and joins every node."""
    last = {}
    reach = []
    for n, (streams, _, _, _) in enumerate(fake.nodes):
        preds = [last[s] for s in streams if s in last]
        if n in fake.wait_edges:
            preds.append(fake.wait_edges[n])
        r = 0
        for m in preds:
            r |= reach[m] | (1 << m)
        reach.append(r)
        for s in streams:
            last[s] = n
    bad = []
    acc = [(n, rd, wr) for n, (_, rd, wr, _) in enumerate(fake.nodes) if rd or wr]
    for a, (i, ri, wi) in enumerate(acc):
        for j, rj, wj in acc[a + 1:]:
            conflict = any(x[0] < y[1] and y[0] < x[1] for x in wi for y in rj + wj) or \
                any(x[0] < y[1] and y[0] < x[1] for x in ri for y in wj)
            if conflict and not (reach[j] >> i) & 1:
                bad.append((i, j))
    end = last[("origin", "origin")]
    joined = all((reach[end] >> n) & 1 for n in range(end))
    forked = all(reach[n] & 1 for n in range(1, len(fake.nodes)))
    return bad, forked and joined


def _schedules():
    """Ring and OptCC, a coefficient and a local op (signed), a snapshotted send (snapshot), and
    random relabelled ring / OptCC / two-straggler / server / hierarchical schedules."""
    import random
    return [("ring", build_schedule("ring", Cluster.build(3), 2)),
            ("optcc", build_schedule("optcc", Cluster.build(4, stragglers={0: 2}), 2)),
            ("optcc5", build_schedule("optcc", Cluster.build(5, stragglers={1: 3}), 1)),
            ("signed", signed_schedule()), ("snapshot", snapshot_schedule())] + \
        [(f"random{seed}", random_schedule(random.Random(seed), max_p=6)) for seed in range(6)]


def _virtual_bound(schedule, numel, dtype=torch.float32):
    plans = build_all_plans(schedule, numel)
    flats = [torch.zeros(numel, dtype=dtype) for _ in plans]
    return [_Bound(r, pl, f, _scratch(pl, f)) for r, (pl, f) in enumerate(zip(plans, flats))]


@pytest.mark.parametrize("name,schedule", _schedules())
def test_every_conflicting_access_is_ordered_by_streams_and_events(name, schedule):
    fake = FakeBackend()
    emit(fake, _virtual_bound(schedule, 200), ("origin", "origin"))
    bad, fork_join = hazards(fake)
    assert bad == [] and fork_join
    assert sum(1 for _, _, _, kind in fake.nodes if kind == "group") > 0


def test_per_rank_emission_is_ordered_and_forked_from_the_capture_stream():
    schedule = build_schedule("optcc", Cluster.build(4, stragglers={0: 2}), 2)
    for r in range(4):
        plan = build_plan(schedule, r, 200)
        flat = torch.zeros(200)
        fake = FakeBackend()
        emit(fake, [_Bound(r, plan, flat, _scratch(plan, flat))], ("origin", "origin"))
        bad, fork_join = hazards(fake)
        assert bad == [] and fork_join
        groups = [c for c in fake.calls if c[0] == "group"]
        assert all(len(c[2]) == 1 and c[2][0][0] == r and c[2][0][1] == (r, "comm") for c in groups)
        assert len(groups) == plan.n_batches


def test_the_checker_sees_a_dropped_landing_or_posting_wait():
    """Not vacuous, and no wait is idle: dropping any wait but the fork and join ones (a compute
    stream's on a group: a landing, a send's end; a comm stream's on its step's compute work)
    leaves an unordered conflict in this schedule."""
    schedule = build_schedule("ring", Cluster.build(3), 2)
    fake = FakeBackend()
    emit(fake, _virtual_bound(schedule, 200), ("origin", "origin"))
    waits = [c for c in fake.calls if c[0] == "wait"]
    inner = [k for k, c in enumerate(waits) if c[1] != ("origin", "origin") and c[2] != 1]   # not fork/join
    assert len(inner) > 10
    caught = 0
    for k in inner:
        dropped = FakeBackend(drop_wait=k)
        emit(dropped, _virtual_bound(schedule, 200), ("origin", "origin"))
        bad, _ = hazards(dropped)
        caught += bool(bad)
    assert caught == len(inner)


@pytest.mark.parametrize("name,schedule", _schedules())
def test_each_group_holds_exactly_the_flows_starting_then(name, schedule):
    """Checked against the schedule, not the plan: one group per start time, every flow of that
    start in it once, a send in its source's half and a receive in its destination's, in
    posting order on both ends."""
    fake = FakeBackend()
    emit(fake, _virtual_bound(schedule, 600), ("origin", "origin"))
    groups = [c for c in fake.calls if c[0] == "group"]
    flows = schedule.flows
    starts = sorted({f.start for f in flows})
    assert [t for _, t, _ in groups] == starts
    pos = {i: n for n, i in enumerate(posting_order(schedule))}
    for _, t, halves in groups:
        want = {i for i, f in enumerate(flows) if f.start == t}
        sends = [(i, rank, q) for rank, _, ss, _ in halves for i, q in ss]
        recvs = [(i, rank, q) for rank, _, _, rs in halves for i, q in rs]
        assert sorted(i for i, _, _ in sends) == sorted(want) == sorted(i for i, _, _ in recvs)
        assert all(flows[i].src == rank and flows[i].dst == q for i, rank, q in sends)
        assert all(flows[i].dst == rank and flows[i].src == q for i, rank, q in recvs)
        for rank, stream, ss, rs in halves:
            assert stream == (rank, "comm")
            for side in (ss, rs):
                assert [pos[i] for i, _ in side] == sorted(pos[i] for i, _ in side)


@pytest.mark.parametrize("algo,p,k", [("ring", 3, 2), ("ring", 5, 1), ("optcc", 4, 2), ("optcc", 5, 3),
                                      ("optcc", 8, 2)])
def test_cpu_virtual_ranks_sum_exactly_and_replay(algo, p, k):
    schedule = build_schedule(algo, Cluster.build(p, stragglers={0: 2} if algo == "optcc" else {}), k)
    n = 1001
    xs = [torch.zeros(n, dtype=torch.int64) for _ in range(p)]
    graph = VirtualGraph(schedule, xs, CpuVirtualBackend(), unsafe=True)
    for seed in range(2):                      # one capture, replayed on new values in the same tensors
        g = torch.Generator().manual_seed(seed)
        inputs = [torch.randint(-10**6, 10**6, (n,), generator=g, dtype=torch.int64) for _ in range(p)]
        for x, v in zip(xs, inputs):
            x.copy_(v)
        graph.run()
        exact = torch.stack(inputs).sum(0)
        assert all(torch.equal(x, exact) for x in xs)
    assert graph.n_ops > 0


@pytest.mark.parametrize("name,schedule", _schedules())
def test_cpu_virtual_ranks_equal_the_step_runners_run_virtual(name, schedule):
    """Every schedule above (snapshots, coefficients, local ops, copies) in int64: the graph's
    virtual ranks end exactly where the step runner's in-process oracle does."""
    p = schedule.cluster.p
    g = torch.Generator().manual_seed(3)
    inputs = [torch.randint(-1000, 1001, (257,), generator=g, dtype=torch.int64) for _ in range(p)]
    a = [x.clone() for x in inputs]
    b = [x.clone() for x in inputs]
    VirtualGraph(schedule, a, CpuVirtualBackend(), unsafe=True).run()
    run_virtual(schedule, b, unsafe=True)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert all(torch.equal(x, sum(inputs)) for x in a)


def test_cpu_virtual_ranks_float_match_the_step_runners_run_virtual():
    """Same plans, same order of additions per element: bit-equal to run_virtual in float32."""
    schedule = build_schedule("optcc", Cluster.build(5, stragglers={2: Fraction(3, 2)}), 2)
    g = torch.Generator().manual_seed(7)
    inputs = [torch.randn(777, generator=g) for _ in range(5)]
    a = [x.clone() for x in inputs]
    b = [x.clone() for x in inputs]
    VirtualGraph(schedule, a, CpuVirtualBackend(), unsafe=True).run()
    run_virtual(schedule, b, unsafe=True)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    exact = torch.stack([x.double() for x in inputs]).sum(0)
    assert max(float((x.double() - exact).abs().max()) for x in a) < 1e-4


def test_a_virtual_group_without_its_send_is_refused():
    backend = CpuVirtualBackend()
    buf = torch.zeros(4)
    with pytest.raises(RunnerError, match="flow 3's receive on rank 1 has no send from rank 0"):
        backend.group(0, [Half(1, (1, "comm"), [], [(3, 0, buf)])])


def test_both_modes_run_only_a_gated_schedule():
    """A ring missing its last flow: the gate refuses it (naming the failed property) in the
    virtual mode and in the per-rank executor, as every runner does; unsafe=True runs it wrong."""
    from optcc.errors import OptccError
    from optcc.schedule import Schedule
    s = build_schedule("ring", Cluster.build(3), 1)
    broken = Schedule(s.cluster, s.pieces, s.flows[:-1], s.local_ops).validate()
    with pytest.raises(OptccError, match="sum: rank"):
        VirtualGraph(broken, [torch.zeros(8, dtype=torch.int64) for _ in range(3)], CpuVirtualBackend())
    with pytest.raises(OptccError, match="sum: rank"):
        GraphExecutor(broken, 0, backend=FakeBackend())
    xs = [torch.full((8,), r + 1, dtype=torch.int64) for r in range(3)]
    VirtualGraph(broken, xs, CpuVirtualBackend(), unsafe=True).run()
    assert sum(bool((x == 6).all()) for x in xs) < 3


def test_graph_executor_captures_once_per_tensor_and_replays_per_allreduce():
    schedule = build_schedule("ring", Cluster.build(3), 2)
    fake = FakeBackend()
    ex = GraphExecutor(schedule, 1, unsafe=True, backend=fake)
    x, y = torch.zeros(300), torch.zeros(500)
    for _ in range(3):
        assert ex.run(x) is x
    assert (fake.captures, fake.replays, fake.finishes) == (1, 3, 3)
    ex.run(y)
    assert (fake.captures, fake.replays) == (2, 4)
    assert not ex.failed and ex.close()


def test_graph_runner_is_in_the_table_and_refuses_what_it_cannot_run():
    assert "graph" in RUNNERS and program_key("graph") is None
    schedule = build_schedule("ring", Cluster.build(3), 1)
    ex = make_executor(schedule, 0, "graph", unsafe=True)
    assert isinstance(ex, GraphExecutor)
    with pytest.raises(RunnerError, match="needs CUDA tensors"):
        ex.run(torch.zeros(16))


def test_a_generated_schedule_is_refused_by_the_graph_runner_naming_it():
    """The graph runner runs the step plans, which need the flow list: the launcher's and the
    worker's checks refuse a generated schedule, naming --runner graph."""
    import argparse

    from gpu_runner.launch import check_runner
    from gpu_runner.worker import _rank_part
    from optcc.errors import OptccError
    from optcc.generated import GeneratedSchedule
    gen = GeneratedSchedule.of("optcc", Cluster.build(8, stragglers={0: 2}), 2)
    with pytest.raises(OptccError, match="--runner graph needs the flow list") as e:
        check_runner(gen, "graph")
    assert e.value.field == "runner"
    with pytest.raises(ValueError, match="--runner graph needs the flow list"):
        _rank_part(gen, 0, argparse.Namespace(runner="graph", dtype="float32", allow_worse_numerics=False))
    assert check_runner(build_schedule("ring", Cluster.build(3), 1), "graph") == "graph runner"
