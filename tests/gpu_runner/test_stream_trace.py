"""The streaming runner's trace (OPTCC_STREAM_TRACE) and its summary (gpu_runner.stream_trace)."""
import pytest

from gpu_runner.stream_trace import load, summarise


def _runs():
    # rank 0 sends flow 0 to rank 1 at 0.010 s; rank 1 posted its receive at 0.002 s (no deps)
    # and got it at 0.050 s, then forwarded flow 1 back at 0.0505 s after landing it.
    r0 = {"rank": 0, "total_s": 0.2, "ops": [
        [0, "send", 0, 1, 0.0, 0.010, 0.011, []],
        [1, "recv", 1, 1, 1.0, 0.012, 0.150, [[0, "S"]]],
        [2, "land", 1, None, 1.0, 0.151, None, [[1, "C"]]]]}
    r1 = {"rank": 1, "total_s": 0.16, "ops": [
        [0, "recv", 0, 0, 0.0, 0.002, 0.050, []],
        [1, "land", 0, None, 0.0, 0.0502, None, [[0, "C"]]],
        [2, "send", 1, 0, 1.0, 0.0505, 0.051, [[1, "S"], [0, "S"]]]]}
    return {0: r0, 1: r1}


def test_summary_values():
    s = summarise(_runs())
    assert s["ranks"] == 2 and s["total_s"] == 0.2
    assert s["reaction_s"]["median"] == pytest.approx(0.0005)          # 0.0505 - 0.050
    # flow 0: 0.050 - max(0.010, 0.002); flow 1: 0.150 - max(0.0505, 0.012)
    assert sorted([s["wire_s"]["p10"], s["wire_s"]["max"]]) == pytest.approx([0.040, 0.0995])
    assert s["recv_after_send_s"]["max"] == pytest.approx(-0.008)      # flow 0: 0.002 - 0.010; flow 1: 0.012 - 0.0505
    assert s["recv_held_by"] == {"none": 1, "chain": 1}


def test_load_takes_the_last_run(tmp_path):
    import json
    runs = _runs()
    with open(tmp_path / "rank0.jsonl", "w") as f:
        f.write(json.dumps({**runs[0], "total_s": 9.0}) + "\n" + json.dumps(runs[0]) + "\n")
    assert load(str(tmp_path))[0]["total_s"] == 0.2
    assert load(str(tmp_path), 0)[0]["total_s"] == 9.0


def test_a_real_streaming_run_writes_a_consistent_trace(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    from gpu_runner.launch import launch_trusted
    from optcc.algorithms import build_schedule
    from optcc.cluster import Cluster
    schedule = build_schedule("optcc", Cluster.build(3, stragglers={0: 2}), 2)
    path = str(tmp_path / "s.json")
    schedule.save(path)
    trace = tmp_path / "trace"
    trace.mkdir()
    monkeypatch.setenv("OPTCC_STREAM_TRACE", str(trace))
    res = launch_trusted(path, schedule.sha256(), 3, 4 * 3000, "int32", 60.0, iters=1,
                         runner="streaming")
    assert res.ok, res.describe_failure()
    runs = load(str(trace))
    assert sorted(runs) == [0, 1, 2]
    for r, run in runs.items():
        sends = sorted(o[2] for o in run["ops"] if o[1] == "send")
        recvs = sorted(o[2] for o in run["ops"] if o[1] == "recv")
        assert sends == [i for i, f in enumerate(schedule.flows) if f.src == r]
        assert recvs == [i for i, f in enumerate(schedule.flows) if f.dst == r]
        for o in run["ops"]:
            assert o[5] is not None and 0 <= o[5] <= run["total_s"]
            if o[1] in ("send", "recv"):
                assert o[5] <= o[6] <= run["total_s"]
    s = summarise(runs)
    assert sum(s["recv_held_by"].values()) == len(schedule.flows)
    # cross-rank times carry the ranks' start skew, so only same-rank orders are asserted above
    assert s["wire_s"] is not None and s["reaction_s"]["median"] >= 0


def test_a_spare_slot_lets_each_receive_post_before_the_previous_one_landed():
    """verifier.streaming's colouring keeps SLOT_SPARE = 1 slot free: consecutive slot users on a
    rank never share a slot (so the next receive is not held back by the previous landing), and
    the program is still proved (M, H, D)."""
    from optcc.algorithms import build_schedule
    from optcc.cluster import Cluster
    from optcc.lowering.streaming import SLOT_SPARE
    from verifier.streaming import prove_streaming
    assert SLOT_SPARE == 1
    schedule = build_schedule("optcc", Cluster.build(8, stragglers={0: 2}), 4)
    program, cx = prove_streaming(schedule)
    assert cx is None, cx
    starts = {i: f.start for i, f in enumerate(schedule.flows)}
    for rp in program.ranks:
        users = sorted((starts[op.flow], op.flow, op.slot) for op in rp.ops if op.kind in ("recv", "snap"))
        assert len(users) >= 2 and rp.n_slots >= 2
        assert all(a[2] != b[2] for a, b in zip(users, users[1:]))


def _port_unordered(schedule, program):
    """Pairs of unit-rate sends of one rank to different peers on one link that the schedule runs in turn
    (the first ends by the time the second starts) but whose start the program does not order
    after the first one's completion (no path of deps from C(first) to S(second))."""
    from optcc.timing import IntegerTimes
    grid = IntegerTimes(schedule)
    bad = []
    for rp in program.ranks:
        pred = {}                              # event (op, "S"|"C") -> events it waits for
        for n, op in enumerate(rp.ops):
            pred[(n, "S")] = list(op.deps)
            if op.kind in ("send", "recv"):
                pred[(n, "C")] = [(n, "S")]
        for seq in rp.peer_seq.values():
            for a, b in zip(seq, seq[1:]):
                pred[(b, "C")].append((a, "C"))
        sends = [n for n, op in enumerate(rp.ops) if op.kind == "send"]
        for b in sends:
            seen, todo = set(), [(b, "S")]
            while todo:
                e = todo.pop()
                for d in pred.get(e, ()):
                    if d not in seen:
                        seen.add(d)
                        todo.append(d)
            fb = rp.ops[b].flow
            for a in sends:
                fa = rp.ops[a].flow
                if rp.ops[a].peer != rp.ops[b].peer and grid.ends[fa] <= grid.starts[fb] and (a, "C") not in seen \
                        and schedule.flows[fa].link == schedule.flows[fb].link \
                        and schedule.flows[fa].rate == schedule.flows[fb].rate == 1:
                    bad.append((rp.rank, fa, fb))
    return bad


def test_sends_to_different_peers_keep_the_schedules_port_order():
    """PORT_ORDER: a rank's send waits for the completion of every unit-rate send to another peer
    that the schedule finishes on that port before it starts, so the port carries the schedule's flows in turn instead of
    sharing its bandwidth between peers (docs/gpu_runner.md); without it such pairs are unordered."""
    from optcc.algorithms import build_schedule
    from optcc.cluster import Cluster
    from optcc.lowering.streaming import PORT_ORDER, streaming_program
    from verifier.streaming import prove_streaming
    assert PORT_ORDER
    for cluster, k in ((Cluster.build(8, stragglers={0: 2}), 4), (Cluster.build(6, stragglers={1: 2, 4: 1.5}), 3),
                       (Cluster.build(8, g=2, stragglers={0: 2, 1: 2}), 2)):
        schedule = build_schedule("optcc", cluster, k)
        program, cx = prove_streaming(schedule)
        assert cx is None, cx
        assert _port_unordered(schedule, program) == []
        assert _port_unordered(schedule, streaming_program(schedule, port_order=False)) != []
