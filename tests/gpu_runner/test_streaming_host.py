"""The streaming runner's one completion path: a run posts and observes on the caller's thread
(no thread per peer), it waits for the in-flight post of the lowest index (so completions are
observed in index order), and a program whose dependency points forward, which that rule
cannot run without deadlock, is refused. On torch's fake process group, in this process."""
import threading

import pytest

from optcc.algorithms import build_schedule
from optcc.cluster import Cluster
from optcc.errors import OptccError

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")


@pytest.fixture
def fake_group():
    from torch.testing._internal.distributed.fake_pg import FakeStore
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=8)
    try:
        yield
    finally:
        dist.destroy_process_group()


def _straggler_executor():
    from gpu_runner import proof
    from gpu_runner.runners import make_executor
    schedule = build_schedule("optcc", Cluster.build(8, stragglers={0: 2}), 4)
    proof.require_proof(schedule)
    return schedule, make_executor(schedule, 0, "streaming")


def test_a_run_starts_no_thread(fake_group):
    _, ex = _straggler_executor()             # rank 0 exchanges with all 7 peers
    tensor = torch.zeros(64 * 4 * 7)
    before = {t.ident for t in threading.enumerate()}
    ex.run(tensor)
    ex.run(tensor)
    assert {t.ident for t in threading.enumerate()} == before
    assert ex.close(0.0) and not ex.failed


def test_completions_are_observed_lowest_post_first(fake_group):
    """Every post is waited for once, in increasing op index, although receives are posted ahead
    of earlier sends (the stub's works record which op the run waits on when they are waited)."""
    from torch._C._distributed_c10d import ProcessGroup
    _, ex = _straggler_executor()
    waited, posted = [], []
    saved = {name: ProcessGroup.__dict__[name] for name in ("send", "recv")}

    class Work:                                    # completes at once
        def wait(self):
            waited.append(ex._waiting)
            return True

    def stub(self, tensors, peer, tag):
        posted.append(peer)
        return Work()
    ProcessGroup.send = ProcessGroup.recv = stub
    try:
        ex.run(torch.zeros(64 * 4 * 7))
    finally:
        ProcessGroup.send, ProcessGroup.recv = saved["send"], saved["recv"]
    posts = [k for k, op in enumerate(ex.rp.ops) if op.kind in ("send", "recv")]
    assert len(posted) == len(posts) and waited == posts


def test_a_program_that_depends_on_a_later_op_is_refused():
    pytest.importorskip("torch")
    import copy

    from gpu_runner.streaming import StreamingExecutor
    from optcc.lowering.streaming import streaming_program
    schedule = build_schedule("optcc", Cluster.build(4, stragglers={0: 2}), 2)
    rp = copy.deepcopy(streaming_program(schedule).ranks[1])
    rp.ops[0].deps.append((len(rp.ops) - 1, "S"))
    with pytest.raises(OptccError, match="depends on a later op") as e:
        StreamingExecutor(schedule, 1, program=rp, unsafe=True)
    assert e.value.field == "program"


def _stub_transport(ex, events, fail_wait=None):
    """Replace the process group's send/recv with stubs that log (kind, tensor, peer) to `events`
    and return Works that log the op awaited (and raise at op `fail_wait`); returns the undo."""
    from torch._C._distributed_c10d import ProcessGroup
    saved = {name: ProcessGroup.__dict__[name] for name in ("send", "recv")}

    class Work:
        def wait(self):
            events.append(("wait", ex._waiting))
            if ex._waiting == fail_wait:
                raise RuntimeError("Connection closed by peer")
            return True

    def stub(kind):
        def post(self, tensors, peer, tag):
            events.append((kind, tensors[0].data_ptr(), tensors[0].numel(), peer))
            return Work()
        return post
    ProcessGroup.send, ProcessGroup.recv = stub("send"), stub("recv")

    def undo():
        ProcessGroup.send, ProcessGroup.recv = saved["send"], saved["recv"]
    return undo


def test_later_runs_replay_the_first_runs_events_without_the_heap(fake_group, monkeypatch):
    """A run after a complete one posts the same tensors to the same peers and waits for the same
    posts in the same order, with no heap operation (its order was recorded, not recomputed); on
    another tensor too (same sizes and peers, other buffers)."""
    import gpu_runner.streaming as streaming
    _, ex = _straggler_executor()
    tensor = torch.zeros(64 * 4 * 7)
    first: list = []
    second: list = []
    undo = _stub_transport(ex, first)
    try:
        ex.run(tensor)
    finally:
        undo()
    for name in ("heappop", "heappush"):
        monkeypatch.setattr(streaming.heapq, name, lambda *a: pytest.fail("the heap was used"))
    undo = _stub_transport(ex, second)
    try:
        ex.run(tensor)
    finally:
        undo()
    other: list = []                     # a run on another tensor replays the same events on its views
    undo = _stub_transport(ex, other)
    try:
        ex.run(torch.ones(64 * 4 * 7))
    finally:
        undo()
    posts = sum(1 for op in ex.rp.ops if op.kind in ("send", "recv"))
    assert len(first) == 2 * posts and second == first
    assert [e[:1] + e[2:] for e in other] == [e[:1] + e[2:] for e in first] and other != first


def test_a_failed_wait_in_a_replayed_run_names_what_was_awaited(fake_group):
    from gpu_runner.executor import RunnerError
    _, ex = _straggler_executor()
    tensor = torch.zeros(64 * 4 * 7)
    ex.run(tensor)
    k = next(k for k, op in enumerate(ex.rp.ops) if op.kind == "recv")
    undo = _stub_transport(ex, [], fail_wait=k)
    try:
        with pytest.raises(RunnerError, match=f"peer failure while waiting for the data of flow "
                                              f"{ex.rp.ops[k].flow} from rank {ex.rp.ops[k].peer}"):
            ex.run(tensor)
    finally:
        undo()
    assert ex.failed
