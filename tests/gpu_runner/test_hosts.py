"""Stragglers named by host: cluster JSON parsing, process placement, and gloo runs with emulated
hosts (OPTCC_HOSTNAME per rank) where the slow host gets the straggler's part."""
import pytest

from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.hosts import place_processes


def test_host_straggler_takes_a_free_server_and_round_trips():
    c = Cluster.from_json({"p": 8, "g": 2, "stragglers": [{"rank": 0, "ell": 3}, {"host": "nodeC", "ell": 2}]})
    assert c.hosts == ((1, "nodeC"),)
    assert c.slowdown[:4] == (3, 1, 2, 2) and set(c.slowdown[4:]) == {1}   # the whole server at ℓ
    assert Cluster.from_json(c.to_json()) == c
    assert "hosts" not in Cluster.build(4, stragglers={0: 2}).to_json()     # old JSON unchanged


def test_hosts_list_pins_servers():
    c = Cluster.from_json({"p": 4, "stragglers": [{"host": "b", "ell": 2}],
                           "hosts": [{"server": 3, "host": "b"}, {"server": 0, "host": "a"}]})
    assert c.hosts == ((0, "a"), (3, "b")) and c.stragglers == {3: 2}


@pytest.mark.parametrize("data,field", [
    ({"p": 4, "stragglers": [{"host": "", "ell": 2}]}, "cluster.stragglers[0].host"),
    ({"p": 4, "stragglers": [{"host": "a", "rank": 1, "ell": 2}]}, "cluster.stragglers[0]"),
    ({"p": 4, "stragglers": [{"host": "a", "ell": 2}, {"host": "a", "ell": 3}]}, "cluster.stragglers[1].host"),
    ({"p": 2, "stragglers": [{"rank": 0, "ell": 2}, {"rank": 1, "ell": 2}, {"host": "a", "ell": 2}]},
     "cluster.stragglers[2].host"),
    ({"p": 4, "hosts": [{"server": 4, "host": "a"}]}, "cluster.hosts[0].server"),
    ({"p": 4, "hosts": [{"server": 0, "host": "a"}, {"server": 1, "host": "a"}]}, "cluster.hosts"),
])
def test_bad_host_json_names_the_field(data, field):
    with pytest.raises(OptccError) as e:
        Cluster.from_json(data)
    assert e.value.field == field


def test_placement_follows_the_hosts():
    c = Cluster.from_json({"p": 4, "g": 2, "stragglers": [{"host": "slow", "ell": 2}]})
    # processes 0, 1 on "fast", 2, 3 on "slow" (local ranks reversed on "slow")
    order = place_processes(c, ["fast", "fast", "slow", "slow"], [0, 1, 1, 0], [2, 2, 2, 2])
    assert order == [3, 2, 0, 1]          # schedule ranks 0, 1 (the straggler server) on host "slow"


@pytest.mark.parametrize("names,lws,words", [
    (["a", "a", "b", "b"], [2, 2, 2, 2], "'slow' named by the cluster is not among"),
    (["slow", "slow", "slow", "b"], [2, 2, 2, 2], "2 servers of g = 2"),
    (["slow", "slow", "b", "b"], [4, 4, 4, 4], "LOCAL_WORLD_SIZE is 4"),
])
def test_placement_refuses_mismatched_hosts(names, lws, words):
    c = Cluster.from_json({"p": 4, "g": 2, "stragglers": [{"host": "slow", "ell": 2}]})
    with pytest.raises(OptccError) as e:
        place_processes(c, names, [0, 1, 0, 1], lws)
    assert e.value.field == "hosts" and words in str(e.value)


def _launch(tmp_path, cluster_json, hosts, g, algo="optcc", timeout=30.0):
    pytest.importorskip("torch")
    from gpu_runner.launch import launch_trusted
    from optcc.algorithms import build_schedule
    schedule = build_schedule(algo, Cluster.from_json(cluster_json), 2)
    path = str(tmp_path / "s.json")
    schedule.save(path)

    def env(r):
        return {"OPTCC_HOSTNAME": hosts[r], "LOCAL_RANK": str(hosts[:r].count(hosts[r])),
                "LOCAL_WORLD_SIZE": str(g)}
    return launch_trusted(path, schedule.sha256(), len(hosts), 8 * 1001, "int64", timeout, env_extra=env)


def test_slow_host_runs_the_straggler_part_on_gloo(tmp_path):
    res = _launch(tmp_path, {"p": 4, "stragglers": [{"host": "nodeC", "ell": 2}]},
                  ["nodeA", "nodeB", "nodeC", "nodeD"], 1)
    assert res.ok, res.describe_failure()
    r = res.result
    assert r["correct"] and r["rows"][0]["wrong"] == 0
    assert r["hosts"] == ["nodeA", "nodeB", "nodeC", "nodeD"]
    assert r["schedule_rank_of_process"][2] == 0            # nodeC does the straggler's part
    assert sorted(r["schedule_rank_of_process"]) == [0, 1, 2, 3]


def test_slow_server_by_host_with_two_gpus_each(tmp_path):
    res = _launch(tmp_path, {"p": 4, "g": 2, "stragglers": [{"host": "nodeB", "ell": 2}]},
                  ["nodeA", "nodeA", "nodeB", "nodeB"], 2)
    assert res.ok, res.describe_failure()
    assert res.result["correct"]
    assert res.result["schedule_rank_of_process"] == [2, 3, 0, 1]


def test_unknown_host_is_refused_before_any_rank_starts(tmp_path, monkeypatch):
    import subprocess
    started = []
    real_popen = subprocess.Popen

    def popen(cmd, *a, **k):
        if "gpu_runner" in cmd:                    # [python, -m, gpu_runner, ...]: a rank
            started.append(cmd)
        return real_popen(cmd, *a, **k)
    monkeypatch.setattr(subprocess, "Popen", popen)
    with pytest.raises(OptccError) as e:
        _launch(tmp_path, {"p": 4, "stragglers": [{"host": "nodeZ", "ell": 2}]},
                ["nodeA", "nodeB", "nodeC", "nodeD"], 1, timeout=20.0)
    assert e.value.field == "hosts" and "'nodeZ'" in e.value.message and "not among the hosts" in e.value.message
    assert started == []


def test_cli_refuses_a_host_cluster_that_this_machine_cannot_place(tmp_path, capsys):
    """`optcc run` of a schedule naming host nodeZ on one local machine: exit 2 naming the hosts, no rank started."""
    from optcc.algorithms import build_schedule
    from optcc_app.cli import main
    path = str(tmp_path / "s.json")
    build_schedule("optcc", Cluster.from_json({"p": 4, "stragglers": [{"host": "nodeZ", "ell": 2}]}), 2).save(path)
    assert main(["run", "--nproc", "4", "--schedule", path, "--backend", "gloo", "--runner", "step"]) == 2
    err = capsys.readouterr().err.splitlines()[-1]                  # after run's progress lines
    assert err.startswith("optcc: error: hosts: LOCAL_WORLD_SIZE is 4 but the cluster has g = 1")
    assert len(err.strip().splitlines()) == 1


def test_unknown_host_ends_every_rank_with_the_error(tmp_path):
    """Where the launcher cannot check (torchrun, or launch() without the schedule), the ranks refuse together."""
    pytest.importorskip("torch")
    from gpu_runner.launch import launch, prepare_schedule, worker_certificate
    from optcc.algorithms import build_schedule
    path = str(tmp_path / "s.json")
    build_schedule("optcc", Cluster.from_json({"p": 4, "stragglers": [{"host": "nodeZ", "ell": 2}]}), 2).save(path)
    schedule, _ = prepare_schedule(path, 4)
    hosts = ["nodeA", "nodeB", "nodeC", "nodeD"]
    res = launch(4, ["--schedule", path, "--certificate", worker_certificate(schedule, str(tmp_path)),
                     "--size", "8008", "--dtype", "int64"], 60.0,
                 env_extra=lambda r: {"OPTCC_HOSTNAME": hosts[r], "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1"})
    assert not res.ok and all(rc not in (0, None) for rc in res.returncodes)
    assert res.wall_s < 60.0                     # refused at start-up (torch's import aside), nobody waits
    text = res.describe_failure()
    assert all(f"rank {r}:" in text for r in range(4)) and "nodeZ" in text and "not among the hosts" in text


def test_torchrun_two_nodes_static_rendezvous_on_localhost(tmp_path):
    """Two torchrun 'nodes' (static rendezvous) on this machine, host names nodeA (node 0) and
    nodeB (node 1); the cluster names nodeB slow, so node 1's processes take schedule ranks 0, 1."""
    from conftest import torchrun_two_nodes
    from optcc.algorithms import build_schedule
    schedule = build_schedule("optcc", Cluster.from_json({"p": 4, "g": 2, "stragglers": [{"host": "nodeB", "ell": 2}]}), 2)
    path = str(tmp_path / "s.json")
    schedule.save(path)                      # each rank proves it before joining (no certificate)
    result = torchrun_two_nodes(path, lambda node: {"OPTCC_HOSTNAME": ("nodeA", "nodeB")[node]})
    assert result["correct"] and result["hosts"] == ["nodeA", "nodeA", "nodeB", "nodeB"]
    assert result["schedule_rank_of_process"] == [2, 3, 0, 1]
