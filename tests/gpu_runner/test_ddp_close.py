"""OptccHookState.close() drains and joins the communication thread; a state the program forgets
to close is drained and joined at interpreter exit (before shutdown kills daemon threads, which
aborts the process when one is inside a C++ call); a dropped state's thread ends. No process
group: a stand-in executor (run: multiply by a constant after a short sleep) replaces the runner.
"""
import gc
import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")


class SlowDouble:
    """Stand-in executor (gpu_runner.runners.RankExecutor): doubles the tensor in place after
    `delay_s` (a bucket still in flight)."""

    failed = False

    def __init__(self, delay_s):
        self.delay_s = delay_s
        self.ran = []
        self.closed = 0

    def prepare(self, tensor):
        return None

    def close(self, timeout=None):
        self.closed += 1
        return True

    def run(self, tensor):
        import time
        time.sleep(self.delay_s)
        tensor.mul_(2)
        self.ran.append(float(tensor[0]))
        return tensor


def _state():
    from gpu_runner.ddp_hook import OptccHookState
    from optcc.algorithms import build_schedule
    from optcc.cluster import Cluster
    return OptccHookState(build_schedule("optcc", Cluster.build(4, stragglers={0: 2}), 2), runner="step")


def test_close_drains_every_bucket_then_joins_and_refuses_new_ones():
    from gpu_runner import ddp_hook
    from gpu_runner.executor import RunnerError
    state = _state()
    state._executor = fake = SlowDouble(0.05)
    futs = [state.submit(torch.full((4,), float(i + 1))) for i in range(3)]
    thread = state._comm[1]
    assert thread.is_alive() and thread in ddp_hook._open
    state.close()
    assert [f.done() for f in futs] == [True, True, True]
    assert [float(f.value()[0]) for f in futs] == [2.0, 4.0, 6.0]      # in submission order
    assert fake.ran == [2.0, 4.0, 6.0]
    assert not thread.is_alive() and thread not in ddp_hook._open
    with pytest.raises(RunnerError, match="closed"):
        state.submit(torch.ones(4))
    state.close()                                                       # idempotent


def test_dropped_state_ends_its_thread():
    state = _state()
    state._executor = SlowDouble(0.0)
    assert float(state.submit(torch.ones(2)).wait()[0]) == 2.0
    thread = state._comm[1]
    del state
    gc.collect()
    thread.join(10)
    assert not thread.is_alive()


def test_exit_without_close_drains_and_joins(tmp_path):
    """The script submits a bucket that is still running when the script ends and never closes
    the state: exit still waits for it (the marker holds its result) and the exit code is 0."""
    marker = tmp_path / "done.txt"
    script = textwrap.dedent(f"""
        import sys, torch
        sys.path[:0] = [{os.path.dirname(__file__)!r}, {os.path.dirname(os.path.dirname(__file__))!r},
                        {os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))!r}]
        from test_ddp_close import SlowDouble, _state

        class Marking(SlowDouble):
            def run(self, tensor):
                super().run(tensor)
                for _ in range(200):             # C++ calls that release the GIL, at exit time
                    tensor.add_(0)
                open({str(marker)!r}, "w").write(str(float(tensor.sum())))
                return tensor

        state = _state()
        state._executor = Marking(0.5)
        fut = state.submit(torch.ones(8))
        assert not fut.done()
        print("submitted", flush=True)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "submitted" in proc.stdout
    assert "terminate called" not in proc.stderr
    assert marker.read_text() == "16.0"
