"""--segments auto for real runs keeps a k whose posts the host can issue in time:
k·H ≤ n/(2·c_post·B) (optcc.segments, derived), never capped silently."""
from fractions import Fraction

import pytest

from optcc.cluster import Cluster
from optcc.segments import HOST_POST_S, choose_segments, host_segments
from optcc.schedule import Schedule


@pytest.mark.parametrize("p, stragglers, n", [(64, {0: 2}, 2**30), (1024, {0: 2}, 2**33), (16, {0: 2, 1: 3}, 2**26),
                                              (5, {}, 2**20)])
def test_host_segments_is_the_largest_k_the_rule_allows(p, stragglers, n):
    c = Cluster.build(p, stragglers=stragglers)
    k = host_segments(c, n, HOST_POST_S)
    healthy = p - len(stragglers)
    allowed = Fraction(n) / (2 * HOST_POST_S * c.bandwidth)
    assert k >= 1
    assert k == 1 or k * healthy <= allowed
    assert (k + 1) * healthy > allowed


def test_the_paper_scale_example_of_the_docstring():
    """p = 1024, k = 25, 8 GiB, B = 50 GB/s: a healthy rank must post every ~3.4 µs."""
    c = Cluster.build(1024, stragglers={0: 2})
    interval = Fraction(2**33) / (2 * c.bandwidth * 25 * 1023)
    assert 3.3e-6 < float(interval) < 3.5e-6


@pytest.mark.parametrize("p, n", [(64, 2**30), (256, 2**33), (16, 2**26)])
def test_auto_for_a_real_run_is_capped_by_the_host_and_says_so(p, n):
    c = Cluster.build(p, stragglers={0: 2}, latency_model="simai")
    free, notes = choose_segments("auto", "optcc", c, n, build=False)
    capped, host_notes = choose_segments("auto", "optcc", c, n, build=False, host_post_s=HOST_POST_S)
    k_host = host_segments(c, n, HOST_POST_S)
    assert free > k_host >= capped                      # these sizes: the host binds
    assert any("HOST_POST_S" in note and f"up to k = {k_host}" in note for note in host_notes)
    assert not any("HOST_POST_S" in note for note in notes)


def test_a_host_that_keeps_up_changes_nothing():
    c = Cluster.build(8, stragglers={0: 2}, latency_model="simai")
    assert choose_segments("auto", "optcc", c, 2**33, build=False, host_post_s=Fraction(1, 10**9)) \
        == choose_segments("auto", "optcc", c, 2**33, build=False)


def test_optcc_bench_builds_the_host_capped_k(monkeypatch, capsys):
    """The documented command: `optcc bench --algo optcc` with auto k; the launch is replaced after
    the schedule was built, proved and attested, so nothing runs."""
    pytest.importorskip("torch")
    from optcc_app.cli import main
    seen = {}

    class Stop(Exception):
        pass

    def fake_launch(nproc, worker_args, timeout_s, **kw):
        seen["schedule"] = Schedule.load(worker_args[worker_args.index("--schedule") + 1])
        raise Stop()
    monkeypatch.setattr("gpu_runner.launch.launch", fake_launch)
    assert main(["bench", "--nproc", "16", "--algo", "optcc", "--straggler", "0:2", "--latency-model", "simai",
                 "-b", "64M", "-e", "64M"]) == 3                # the Stop above, as an internal error
    c = Cluster.build(16, stragglers={0: 2}, latency_model="simai")
    capped = choose_segments("auto", "optcc", c, 2**26, host_post_s=HOST_POST_S)[0]
    assert capped < choose_segments("auto", "optcc", c, 2**26)[0]
    assert seen["schedule"].meta["segments"] == capped == host_segments(c, 2**26, HOST_POST_S)
    assert "HOST_POST_S" in capsys.readouterr().err
