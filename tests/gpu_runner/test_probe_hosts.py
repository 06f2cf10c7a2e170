"""The probe measures hosts, not ranks: all local ranks of a host send at once (its NIC is what is
timed), the cluster it writes has g and the slow host's name, and both entry points print the
same report. CPU only: the timings come from a shared-link model; the namespace testbed's run of
the same is tests/gpu_runner/test_probe_testbed.py."""
import json
import subprocess
import sys

import pytest

from gpu_runner.probe import analyse, exchange_plan, nodes_of, report
from optcc.cluster import Cluster
from optcc.errors import OptccError

# 4 servers of 2 GPUs, the ranks interleaved as torchrun's dynamic rendezvous may number them
HOSTS = ["a", "b", "a", "c", "b", "d", "c", "d"]
NODES = [[0, 2], [1, 4], [3, 6], [5, 7]]


def test_ranks_are_grouped_by_host():
    assert nodes_of(HOSTS) == NODES
    assert nodes_of(["x", "x", "x"]) == [[0], [1], [2]]          # one host: each rank its own node
    assert nodes_of(["a", "b", "c"]) == [[0], [1], [2]]
    with pytest.raises(OptccError) as e:
        nodes_of(["a", "a", "b"])
    assert e.value.field == "hosts" and "a: 2, b: 1" in e.value.message


def test_all_local_ranks_of_a_host_send_at_once_to_one_other_host():
    plan = exchange_plan(NODES)
    node = {r: n for n, rs in enumerate(NODES) for r in rs}
    assert len(plan) == 3
    met = set()
    for pairs in plan:
        assert len(pairs) == 8
        for r, (dst, src) in enumerate(pairs):
            assert node[dst] != node[r] and node[src] != node[r]     # never the intra-host rate
            assert pairs[dst][1] == r                                 # the receiver expects it
            met.add((node[r], node[dst]))
        for rs in NODES:               # a host's ranks all send, to one host, and receive from one
            assert len({node[pairs[r][0]] for r in rs}) == 1 and len({node[pairs[r][1]] for r in rs}) == 1
    assert met == {(a, b) for a in range(4) for b in range(4) if a != b}


def _shared_link_times(hosts, rate, size, c=0.004, jitter=(0.0, 0.03, 0.01)):
    """t[small/full][rep][src][dst] of the probe's plan, each host's link shared fairly by the
    streams that cross it (each direction on its own), ranks of one host ~1000× faster."""
    nodes = nodes_of(hosts)
    node = {r: n for n, rs in enumerate(nodes) for r in rs}
    p = len(hosts)
    out = []
    for x in (size // 4, size):
        reps = []
        for jit in jitter:
            t = [[0.0] * p for _ in range(p)]
            for pairs in exchange_plan(nodes):
                sends = {n: sum(node[pairs[r][0]] != n for r in rs) for n, rs in enumerate(nodes)}
                recvs = {n: sum(node[pairs[r][1]] != n for r in rs) for n, rs in enumerate(nodes)}
                for r, (dst, _) in enumerate(pairs):
                    a, b = node[r], node[dst]
                    share = 1000 * rate[a] if a == b else min(rate[a] / sends[a], rate[b] / recvs[b])
                    t[r][dst] = c + x / share * (1 + jit)
            reps.append(t)
        out.append(reps)
    return out


def test_a_half_rate_host_is_named_with_g_and_its_ranks():
    rate = {0: 4e6, 1: 4e6, 2: 4e6, 3: 2e6}       # host d's link at half rate, shared by its 2 ranks
    t_small, t_full = _shared_link_times(HOSTS, rate, 1 << 18)
    res = analyse(t_small, t_full, 1 << 18, HOSTS)
    assert res["g"] == 2 and not res["one_host"]
    assert [(n["host"], n["ranks"], n["straggler"]) for n in res["nodes"]] == [
        ("a", [0, 2], False), ("b", [1, 4], False), ("c", [3, 6], False), ("d", [5, 7], True)]
    assert res["nodes"][3]["ell"] == pytest.approx(2.0, rel=0.01)
    assert res["nodes"][0]["send_bytes_per_s"] == pytest.approx(4e6, rel=0.01)     # the host's NIC
    assert res["healthy_bytes_per_s"] == pytest.approx(2e6, rel=0.01)               # B per rank
    assert [r["ell"] > 1.5 for r in res["ranks"]] == [h == "d" for h in HOSTS]
    assert res["fixed_cost_s"] == pytest.approx(0.004, rel=0.01)
    assert res["decision"].startswith("stragglers d (ranks 5, 7): ")
    cluster = Cluster.from_json(res["cluster"])
    assert (cluster.p, cluster.g, cluster.hosts) == (8, 2, ((3, "d"),))
    assert cluster.stragglers == {6: 2, 7: 2}        # server 3's schedule ranks
    assert abs(float(cluster.bandwidth) - 2e6) <= 0.02 * 2e6


def test_identical_links_name_nobody_and_still_write_g():
    t_small, t_full = _shared_link_times(HOSTS, {n: 4e6 for n in range(4)}, 1 << 18)
    res = analyse(t_small, t_full, 1 << 18, HOSTS)
    assert not any(n["straggler"] for n in res["nodes"]) and res["decision"].startswith("no straggler")
    assert res["cluster"]["g"] == 2 and res["cluster"]["stragglers"] == [] and "hosts" not in res["cluster"]


def test_one_host_runs_each_rank_as_a_node_and_names_no_host():
    hosts = ["x"] * 3
    t_small, t_full = _shared_link_times(hosts, {0: 4e6, 1: 4e6, 2: 2e6}, 1 << 18)
    res = analyse(t_small, t_full, 1 << 18, hosts)
    assert res["one_host"] and res["g"] == 1 and [n["ranks"] for n in res["nodes"]] == [[0], [1], [2]]
    assert res["cluster"]["stragglers"] == [{"rank": 2, "ell": 2}] and "hosts" not in res["cluster"]


def test_two_hosts_cannot_tell():
    hosts = ["a", "a", "b", "b"]
    t_small, t_full = _shared_link_times(hosts, {0: 4e6, 1: 2e6}, 1 << 18)
    res = analyse(t_small, t_full, 1 << 18, hosts)
    assert res["decision"].startswith("cannot tell: with two nodes") and res["smallest_named_ell"] is None
    assert res["cluster"]["stragglers"] == []


def test_the_written_cluster_plans_for_the_real_shape(tmp_path):
    """`optcc schedule --cluster` of the probe's file: p = 8, g = 2, and a run puts host d's
    processes (whatever their process ranks) on the slow server's schedule ranks."""
    from optcc.hosts import place_processes
    from optcc.schedule import Schedule
    t_small, t_full = _shared_link_times(HOSTS, {0: 4e6, 1: 4e6, 2: 4e6, 3: 2e6}, 1 << 18)
    path = tmp_path / "probe.json"
    path.write_text(json.dumps(analyse(t_small, t_full, 1 << 18, HOSTS)["cluster"]))
    done = subprocess.run([sys.executable, "-m", "optcc", "schedule", "--algo", "optcc", "--cluster", str(path),
                           "--segments", "2", "-o", str(tmp_path / "s.json")], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    cluster = Schedule.load(str(tmp_path / "s.json")).cluster
    assert (cluster.p, cluster.g, cluster.hosts, cluster.stragglers) == (8, 2, ((3, "d"),), {6: 2, 7: 2})
    local = [next(rs.index(r) for rs in NODES if r in rs) for r in range(8)]      # LOCAL_RANK
    order = place_processes(cluster, HOSTS, local, [2] * 8)
    assert [order[6], order[7]] == [5, 7]


def test_report_is_the_same_facts_as_json_and_as_a_table():
    t_small, t_full = _shared_link_times(HOSTS, {0: 4e6, 1: 4e6, 2: 4e6, 3: 2e6}, 1 << 18)
    res = analyse(t_small, t_full, 1 << 18, HOSTS)
    res["cluster_file"] = "probe.json"
    assert json.loads(report(res, True)) == json.loads(json.dumps(res))
    text = report(res, False)
    lines = text.splitlines()
    assert lines[0].startswith("# 8 ranks on 4 hosts, g = 2 per host, all ranks of a host sending at once")
    rows = {ln.split()[1]: ln.split() for ln in lines[2:6]}
    assert {h: (r[2], r[-1]) for h, r in rows.items()} == {"a": ("0,2", "no"), "b": ("1,4", "no"),
                                                           "c": ("3,6", "no"), "d": ("5,7", "yes")}
    assert float(rows["d"][7]) == pytest.approx(res["nodes"][3]["ell"], abs=5e-4)
    assert f"# {res['decision']}" in lines
    assert f"o = {res['fixed_cost_s'] * 1e6:.1f} us" in text
    assert "# cluster: p=8, g=2, straggler 6:ℓ=2, straggler 7:ℓ=2, server 3 on host d, B = " in text
    assert lines[-1] == "wrote probe.json"
