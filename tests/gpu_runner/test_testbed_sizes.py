"""`optcc testbed --sizes` pieces that need no root: the crossover, the runner hook, bad input."""
import subprocess
import sys

from gpu_runner.testbed_sizes import crossover_size


def _row(size, torch, optcc):
    return {"size": size, "torch_straggler_s": torch, "optcc_step_s": optcc}


def test_crossover_is_the_smallest_size_from_which_optcc_always_wins():
    rows = [_row(1, 0.1, 0.3), _row(2, 0.2, 0.25), _row(4, 0.4, 0.3), _row(8, 0.8, 0.5)]
    assert crossover_size(rows, "optcc_step_s") == 4
    rows[1]["optcc_step_s"] = 0.15            # a win at 2 counts only if every larger size wins too
    assert crossover_size(rows, "optcc_step_s") == 2
    rows[3]["optcc_step_s"] = 0.9             # loses at the largest size: no crossover
    assert crossover_size(rows, "optcc_step_s") is None


def test_bad_sizes_and_delay_are_input_errors():
    for extra, field in ((["--sizes", "1M,x"], "--sizes"), (["--delay-ms", "-1", "--sizes", "1M"], "--delay-ms")):
        res = subprocess.run([sys.executable, "-m", "optcc", "testbed", "--p", "3", "--straggler", "0:2",
                              "--rate", "40", *extra], capture_output=True, text=True, timeout=60)
        assert res.returncode == 2, res.stderr
        assert res.stderr.strip().startswith(f"optcc: error: {field}:"), res.stderr


def test_prediction_uses_the_event_model_once_it_takes_a_latency(monkeypatch):
    from fractions import Fraction

    from gpu_runner.testbed_sizes import predicted_seconds
    from optcc import timing
    from optcc.algorithms import build_schedule
    from optcc.cluster import Cluster
    cluster = Cluster.build(4, stragglers={0: 2}, bandwidth=5 * 10**6)
    schedule = build_schedule("optcc", cluster, 2)
    got = predicted_seconds(cluster, schedule, 1 << 20, 0.002, None)
    assert got > timing.units_to_seconds(cluster, timing.slot_time(schedule), 1 << 20)
    seen = {}

    def fake_event_time(schedule, alpha_units=Fraction(0), grid=None, issue_units=Fraction(0),
                        latency_units=Fraction(0)):
        seen.update(alpha=alpha_units, latency=latency_units)
        return Fraction(3)
    monkeypatch.setattr(timing, "event_time", fake_event_time)
    got = predicted_seconds(cluster, schedule, 1 << 20, 0.002, 0.0005)
    # seconds -> units of n/B: t·B/n; back: 3 units · n/B
    assert seen == {"alpha": Fraction(5, 10000) * 5 * 10**6 / 2**20, "latency": Fraction(2, 1000) * 5 * 10**6 / 2**20}
    assert got == 3 * 2**20 / 5e6
    assert predicted_seconds(cluster, schedule, 1 << 20, None, None) is None   # no measured delay


def test_overhead_is_the_probes_fixed_cost_beyond_the_round_trip():
    from gpu_runner.testbed_sizes import overhead_from_probe
    assert abs(overhead_from_probe(0.0065, 0.0043) - 0.0022) < 1e-12
    assert overhead_from_probe(0.003, 0.0043) == 0.0          # noise below the round trip: no overhead


def test_auto_segments_follow_the_measured_latency():
    """More data per message pays for the delay: auto's k grows with the size and shrinks as the
    measured per-message overhead grows; each k is optcc.segments' choice on the model cluster."""
    from fractions import Fraction

    from gpu_runner.testbed_sizes import segments_for
    from optcc.cluster import Cluster
    from optcc.segments import auto_segments
    sizes = [1 << 20, 16 << 20, 64 << 20]

    def model(o):
        return Cluster.build(8, stragglers={0: 2}, bandwidth=5 * 10**6, latency=Fraction("0.00215"),
                             overhead=Fraction(o))
    low, high = segments_for(model("0"), sizes, "auto"), segments_for(model("0.003"), sizes, "auto")
    assert [low[s] for s in sizes] == sorted(low[s] for s in sizes) and low[sizes[0]] < low[sizes[-1]]
    assert all(high[s] < low[s] for s in sizes), (low, high)
    assert all(high[s] == auto_segments("optcc", model("0.003"), s)[0] for s in sizes)
    assert segments_for(model("0"), sizes, 16) == {s: 16 for s in sizes}


def test_segments_and_size_input_errors():
    base = [sys.executable, "-m", "optcc", "testbed", "--p", "3", "--straggler", "0:2", "--rate", "40"]
    for extra, field in ((["--segments", "0"], "--segments"), (["--segments", "x"], "--segments"),
                         (["--size", "4X"], "--size"),
                         (["--iters", "0"], "--iters")):
        res = subprocess.run(base + extra, capture_output=True, text=True, timeout=60)
        assert res.returncode == 2, (extra, res.stderr)
        assert res.stderr.strip().startswith(f"optcc: error: {field}:"), (extra, res.stderr)


def test_auto_segments_without_a_measured_delay_are_chosen_once_by_the_command(capsys):
    """--segments auto (the default) is left to the sweep only with --sizes and --delay-ms (there
    it comes from the measured delay and overhead); otherwise the command chooses it as every
    command does: at --size or the largest of --sizes, on the shaped cluster with --delay-ms as L,
    and with no delay under the default preset (AUTO_DEFAULT_LATENCY_MODEL, said on stderr)."""
    import argparse
    from fractions import Fraction

    from optcc.cluster import Cluster
    from optcc.segments import resolve_segments
    from optcc_app.commands._common import DEFAULT_SEGMENTS, _DefaultSegments
    from optcc_app.commands.testbed import _segments

    def k(**given):
        args = dict(segments=DEFAULT_SEGMENTS, size=8 << 20, sizes=None, delay_ms=None, p=8, rate=40.0)
        return _segments(argparse.Namespace(**{**args, **given}), 0, Fraction(2))
    plain = Cluster.build(8, stragglers={0: 2}, bandwidth=5 * 10**6)
    no_delay = k()
    assert no_delay == resolve_segments("auto", "optcc", plain, 8 << 20)
    assert "under the 'nccl' latency model" in capsys.readouterr().err       # said, typed or not
    assert k(segments=_DefaultSegments(DEFAULT_SEGMENTS)) == no_delay
    assert "under the 'nccl' latency model" in capsys.readouterr().err
    assert k(sizes="1M,4M") == resolve_segments("auto", "optcc", plain, 4 << 20)       # the largest size
    capsys.readouterr()
    delayed = Cluster.build(8, stragglers={0: 2}, bandwidth=5 * 10**6, latency=Fraction(2, 1000))
    assert k(delay_ms=2.0) == resolve_segments("auto", "optcc", delayed, 8 << 20) < no_delay
    assert "no latency" not in capsys.readouterr().err
    assert k(sizes="1M,4M", delay_ms=2.0) == "auto"                                   # the sweep measures
    assert k(segments="32") == 32


def test_streaming_runner_is_ordered_once_a_message_lasts_many_round_trips():
    """The sweep's rule: receives in port order (one round trip per change of sender) only where a
    median NIC message lasts ORDERED_RTTS round trips; the message time is the slot model's."""
    from gpu_runner.testbed_sizes import ORDERED_RTTS, message_seconds, streaming_runner_for
    from optcc.algorithms import build_schedule
    from optcc.cluster import Cluster
    from optcc.timing import IntegerTimes
    cluster = Cluster.build(8, stragglers={0: 2}, bandwidth=5 * 10**6)
    schedule = build_schedule("optcc", cluster, 16)
    grid = IntegerTimes(schedule)
    got = message_seconds(cluster, schedule, 32 << 20)
    short = min(grid.to_fraction(d) for d in grid.durs)      # healthy flows, the majority here
    assert abs(got - float(short) * (32 << 20) / 5e6) < 1e-9
    rtt = 0.0043
    assert streaming_runner_for(ORDERED_RTTS * rtt, rtt) == "streaming-ordered"
    assert streaming_runner_for(ORDERED_RTTS * rtt * 0.99, rtt) == "streaming"
    assert streaming_runner_for(10.0, None) == "streaming"
