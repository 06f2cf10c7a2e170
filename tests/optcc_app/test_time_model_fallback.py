"""`optcc time --algo` beyond the event timer's array limit: the auto k the model chose is reported
with its model time, labelled as such, beside the event time of the largest k it can time (never
a silent smaller k); below the limit the output is unchanged."""
from __future__ import annotations

import json

from optcc_app.cli import main


def test_a_capped_auto_k_reports_the_model_time_labelled(capsys, monkeypatch):
    import optcc.algorithms as A
    from optcc.cluster import Cluster
    from optcc.model_time import slot
    argv = ["time", "--algo", "optcc", "--p", "16", "--straggler", "0:2", "--latency-model", "simai", "--json"]
    assert main(argv) == 0
    free = json.loads(capsys.readouterr().out)
    assert "model_at_auto_k" not in free and "segments" not in free   # not capped: as before
    monkeypatch.setattr(A, "MAX_ARRAY_WORK", 16**2 * 2)              # the event timer reaches k = 2 only
    assert main(argv) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    m = out["model_at_auto_k"]
    k_auto = m["segments"]
    assert out["segments"] == 2 < k_auto and f"auto k = {k_auto} is over the array limit" in captured.err
    assert "not event-timed" in m["source"]
    c = Cluster.build(16, 1, {0: 2})
    assert m["slot_time"] == float(slot("optcc", c, k_auto)) and m["time"] > m["slot_time"]   # + latency terms
    assert m["time"] < out["event_time"]                          # the model's k is the better one
    assert main(argv[:-1]) == 0
    table = capsys.readouterr().out
    assert f"model time at auto k = {k_auto} (closed form, not event-timed)" in table
