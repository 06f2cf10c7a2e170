"""Latency parameters (o, Li, L): cluster fields, presets, CLI flags, and the event model."""
import json
from collections import Counter, defaultdict
from fractions import Fraction as F

import pytest

from optcc.algorithms import build_schedule
from optcc.algorithms.baselines import flat_ring_allreduce
from optcc_app.cli import main
from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.latency import PRESETS, model_name, resolve
from optcc.timing import IntegerTimes, durations, event_time


# ---- cluster fields and presets -----------------------------------------------------------
def test_presets_have_the_documented_values():
    us = F(1, 10**6)
    assert (PRESETS["alpha"].overhead, PRESETS["alpha"].issue_delay, PRESETS["alpha"].latency) == (5 * us, 0, 0)
    assert (PRESETS["simai"].overhead, PRESETS["simai"].issue_delay, PRESETS["simai"].latency) == (0, 2 * us, 2 * us)
    assert (PRESETS["nccl"].overhead, PRESETS["nccl"].issue_delay, PRESETS["nccl"].latency) == (0, 0, 14 * us)


def test_explicit_values_override_a_preset():
    lat = resolve("simai", latency="1/1000000")
    assert (lat["overhead"], lat["issue_delay"], lat["latency"]) == (0, F(2, 10**6), F(1, 10**6))
    assert lat["latency_model"] == "custom"
    assert resolve("nccl")["latency_model"] == "nccl"
    assert resolve(None, overhead=1)["latency_model"] == ""


def test_cluster_json_round_trip_and_old_files():
    c = Cluster.build(8, stragglers={0: 2}, latency_model="simai", overhead="1/1000000")
    back = Cluster.from_json(c.to_json())
    assert back == c and back.overhead == F(1, 10**6) and back.latency_model == "custom"
    old = {"p": 4, "alpha": "1/1000"}                    # a file written before issue 21 names o `alpha`
    assert Cluster.from_json(old) == Cluster.from_json({"p": 4, "overhead": "1/1000"})
    assert Cluster.from_json(old).overhead == F(1, 1000)
    assert Cluster.from_json({**old, "overhead": "1/1000"}).overhead == F(1, 1000)
    with pytest.raises(OptccError) as e:                 # both names, two values: refused, not guessed
        Cluster.from_json({**old, "overhead": "1/100"})
    assert e.value.field == "cluster.alpha"
    with pytest.raises(OptccError) as e:
        Cluster.from_json({"p": 4, "alpha": -1})
    assert e.value.field == "cluster.alpha"
    # One name in what is written: `overhead`, never `alpha`; Li, L and a preset only when set.
    assert set(Cluster.build(4, overhead="1/1000").to_json()) == {"p", "g", "stragglers", "bandwidth",
                                                                   "nvlink_bandwidth", "overhead"}
    assert model_name(Cluster.build(4, latency_model="nccl")) == "nccl"
    assert model_name(Cluster.build(4, overhead=F(5, 10**6))) == "alpha"   # the preset's exact values
    assert model_name(Cluster.build(4)) == "none"


@pytest.mark.parametrize("kwargs, field", [
    (dict(overhead=-1), "overhead"), (dict(issue_delay="nan"), "issue_delay"),
    (dict(latency=float("inf")), "latency"), (dict(latency_model="ns3"), "latency_model"),
])
def test_bad_latencies_name_their_field(kwargs, field):
    with pytest.raises(OptccError) as err:
        Cluster.build(4, **kwargs)
    assert err.value.field == field


def test_bad_json_latency_model_is_refused():
    with pytest.raises(OptccError) as err:
        Cluster.from_json({"p": 4, "latency_model": "fast"})
    assert err.value.field == "cluster.latency_model"


@pytest.mark.parametrize("argv, field", [
    (["--overhead=-1e-6"], "--overhead"), (["--alpha=-1"], "--alpha"),
    (["--issue-delay", "nan"], "--issue-delay"), (["--latency", "inf"], "--latency"),
    (["--latency-model", "loggp"], "--latency-model"),
])
def test_cli_bad_latency_exits_2_naming_the_flag(argv, field, tmp_path, capsys):
    out = tmp_path / "s.json"
    assert main(["schedule", "--algo", "ring", "--p", "4", "-o", str(out)] + argv) == 2
    assert capsys.readouterr().err.startswith(f"optcc: error: {field}:")
    assert not out.exists()


def test_time_json_reports_the_latency_model(tmp_path, capsys):
    path = str(tmp_path / "ring.json")
    assert main(["schedule", "--algo", "ring", "--p", "4", "--latency-model", "nccl", "-o", path]) == 0
    capsys.readouterr()
    assert main(["time", path, "--json", "--n", str(50 * 10**9)]) == 0   # n/B = 1 s
    out = json.loads(capsys.readouterr().out)
    assert out["latency_model"] == {"name": "nccl", "overhead": 0.0, "issue_delay": 0.0, "latency": 14e-6}
    # Ring over 4 GPUs: 6 dependent steps of 1/4 n/B, each landing L later.
    assert out["event_time"] == pytest.approx(6 * (0.25 + 14e-6))
    assert out["seconds"]["event"] == pytest.approx(out["event_time"])
    assert main(["time", path, "--json", "--n", str(50 * 10**9), "--alpha", "1e-6"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["latency_model"]["name"] == "custom"
    assert out["event_time"] == pytest.approx(6 * (0.25 + 15e-6))


# ---- the event model against an independent reference --------------------------------------
def reference_event_time(schedule, o, li, lat):
    """O(n²) restatement of the rule: start = max(ready + Li, ports free), ports held o + d,
    lands L later; 'ready'/'free' count the writes/port flows whose slot end ≤ the slot start;
    NVLink flows with equal start, end, src and dst (two or more) go one after another in piece
    order, each for rate·(o + d)."""
    durs = durations(schedule)
    flows = schedule.flows
    batch = Counter((f.start, durs[i], f.src, f.dst) for i, f in enumerate(flows) if f.link == "nvlink")
    events = sorted([(f.start, 1, f.piece, i) for i, f in enumerate(flows)]
                    + [(op.time, 0, 0, j) for j, op in enumerate(schedule.local_ops)])
    writes = defaultdict(list)     # (rank, piece) -> [(slot end, landed)]
    ports = defaultdict(list)      # port -> [(slot end, freed)]
    last = {}                      # batch -> the end of its latest flow
    finish = F(0)
    for t, kind, _, i in events:
        if kind == 0:
            op = schedule.local_ops[i]
            key = (op.rank, op.piece)
            ready = max([x for e, x in writes[key] if e <= t], default=F(0))
            writes[key].append((t, ready))
            finish = max(finish, ready)
            continue
        f = flows[i]
        sp, rp = (f.src, f.link, "s"), (f.dst, f.link, "r")
        start = max([x for e, x in writes[(f.src, f.piece)] if e <= t], default=F(0)) + li
        for port in (sp, rp):
            start = max([start] + [x for e, x in ports[port] if e <= t])
        b = (f.start, durs[i], f.src, f.dst)
        if f.link == "nvlink" and batch[b] > 1:
            start = max(start, last.get(b, F(0)))
            free = last[b] = start + f.rate * (o + durs[i])
        else:
            free = start + o + durs[i]
        end = f.start + durs[i]
        writes[(f.dst, f.piece)].append((end, free + lat))
        ports[sp].append((end, free))
        ports[rp].append((end, free))
        finish = max(finish, free + lat)
    return finish


def _schedules():
    out = []
    for p, strag, k in [(3, {0: 2}, 1), (4, {1: F(4, 3)}, 3), (5, {0: 2}, 2), (6, {2: 3}, 2),
                        (5, {0: F(8, 7), 3: F(4, 3)}, 2), (6, {0: 2, 1: F(3, 2)}, 1), (5, {}, 2)]:
        c = Cluster.build(p, stragglers=strag)
        out.append(build_schedule("optcc", c, k))
        out.append(build_schedule("ring", c, k))
    for p, g, k in [(4, 2, 2), (6, 2, 1), (8, 4, 2)]:
        c = Cluster.build(p, g, stragglers={r: 2 for r in range(g)})
        out.append(build_schedule("optcc", c, k))
        out.append(flat_ring_allreduce(c))
    return out


SCHEDULES = _schedules()


@pytest.mark.parametrize("idx", range(len(SCHEDULES)))
def test_event_model_matches_the_reference(idx):
    s = SCHEDULES[idx]
    grid = IntegerTimes(s)
    for o, li, lat in [(F(0), F(0), F(0)), (F(1, 50), F(0), F(0)), (F(0), F(1, 30), F(0)),
                       (F(0), F(0), F(1, 7)), (F(1, 90), F(1, 40), F(1, 60)), (F(1, 3), F(1, 5), F(1, 2))]:
        assert event_time(s, o, grid, li, lat) == reference_event_time(s, o, li, lat), (s.meta, o, li, lat)


@pytest.mark.parametrize("idx", range(len(SCHEDULES)))
def test_overhead_alone_is_the_alpha_model(idx):
    """o = α, Li = L = 0: the old α-per-flow model (today's event time), on every schedule."""
    s = SCHEDULES[idx]
    for a in (F(1, 1000), F(1, 13), F(2)):
        assert event_time(s, a, None, F(0), F(0)) == event_time(s, a) == reference_event_time(s, a, F(0), F(0))


def test_li_and_l_enter_only_as_their_sum():
    """A chain of m flows pays Li before each start and L after each landing: only Li + L counts."""
    for s in SCHEDULES[:6]:
        assert event_time(s, F(0), None, F(1, 20), F(1, 30)) == event_time(s, F(0), None, F(0), F(1, 20) + F(1, 30))
