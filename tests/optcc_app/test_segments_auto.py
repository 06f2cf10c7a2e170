"""`--segments auto` as a user meets it: meaningful without a latency model, never capped silently."""
from __future__ import annotations

import json

from optcc.cluster import Cluster
from optcc.segments import AUTO_DEFAULT_LATENCY_MODEL, auto_segments, choose_segments
from optcc_app.cli import main


def test_a_cluster_without_latency_is_timed_under_the_documented_preset():
    plain = Cluster.build(16, stragglers={0: 2})
    under = Cluster.build(16, stragglers={0: 2}, latency_model=AUTO_DEFAULT_LATENCY_MODEL)
    assert auto_segments("optcc", plain, 1)[0] == 1024               # zero latency: every k looks free
    for n in (1, 64 << 10, 1 << 30):
        k, notes = choose_segments("auto", "optcc", plain, n)
        assert k == auto_segments("optcc", under, n)[0]
        assert len(notes) == 1 and f"'{AUTO_DEFAULT_LATENCY_MODEL}' latency model" in notes[0]
    assert choose_segments("auto", "optcc", plain, 1)[0] == 1
    assert choose_segments("auto", "optcc", under, 1 << 30) == (auto_segments("optcc", under, 1 << 30)[0], [])
    assert choose_segments("7", "optcc", plain, 1) == (7, [])


def test_a_small_message_gets_few_flows_and_the_cli_says_why(tmp_path, capsys):
    path = tmp_path / "s.json"
    assert main(["schedule", "--algo", "optcc", "--p", "16", "--straggler", "0:2", "--segments", "auto",
                 "--n", "64K", "-o", str(path)]) == 0
    err = capsys.readouterr().err
    assert "optcc: note: the cluster has no latency" in err and "k=1," in err
    assert len(json.loads(path.read_text())["flows"]) == 450        # k = 1, not k = 1024 (100 k flows)


def test_the_build_limit_is_said_not_silent():
    big = Cluster.build(1024, stragglers={0: 2}, latency_model="simai")
    k, notes = choose_segments("auto", "optcc", big, 8 << 30)
    best = auto_segments("optcc", big, 8 << 30)[0]
    assert k < best and len(notes) == 1
    assert f"k = {best} would be best" in notes[0] and f"using k = {k}" in notes[0]
    assert choose_segments("auto", "optcc", big, 8 << 30, build=False) == (best, [])
