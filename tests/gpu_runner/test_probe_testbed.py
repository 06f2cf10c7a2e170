"""The probe on the namespace testbed with 2 ranks per node (root only): 4 namespaces, each one
node whose 2 gloo ranks share its shaped link, as the GPUs of a server share its NIC. One node
at half rate: that host is named, ℓ within 10%; identical links: nobody is named."""
import os
import subprocess

import pytest

pytest.importorskip("torch")

ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
TAG = "o41p"          # this file's namespaces: o41p…h, o41p…r0..r3
pytestmark = [pytest.mark.skipif(not ROOT, reason="the testbed needs root (network namespaces, tc)"),
              pytest.mark.alone, pytest.mark.xdist_group("testbed")]


@pytest.fixture(autouse=True, scope="module")
def _no_stale_namespaces():
    from gpu_runner.testbed import remove_stale
    remove_stale(TAG)
    yield
    remove_stale(TAG)


def _namespaces():
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def _probe(stragglers):
    from gpu_runner.probe import probe_testbed
    tag = f"{TAG}{os.getpid() % 10000}"
    return tag, probe_testbed(8, stragglers, 16, 128 * 1024, 3, 60, per_node=2, tag=tag)


@pytest.mark.slow
def test_two_ranks_per_node_half_rate_host_named_and_identical_links_name_nobody():
    from optcc.cluster import Cluster
    before = _namespaces()
    tag, res = _probe({2: 2})
    assert [(n["host"], n["ranks"]) for n in res["nodes"]] == [(f"{tag}r{k}", [2 * k, 2 * k + 1]) for k in range(4)]
    assert [n["straggler"] for n in res["nodes"]] == [False, False, True, False], res["nodes"]
    assert abs(res["nodes"][2]["ell"] - 2) <= 0.2, res["nodes"]
    cluster = Cluster.from_json(res["cluster"])
    assert (cluster.p, cluster.g, cluster.hosts) == (8, 2, ((2, f"{tag}r2"),))
    assert set(cluster.stragglers) == {4, 5}
    # B per rank: half the 16 Mbit/s link that the node's 2 ranks share
    assert abs(float(cluster.bandwidth) - 1e6) <= 0.1e6, res["healthy_bytes_per_s"]

    _, res = _probe({})
    assert not any(n["straggler"] for n in res["nodes"]), res["nodes"]
    assert res["decision"].startswith("no straggler") and res["cluster"]["stragglers"] == []
    assert res["cluster"]["g"] == 2
    assert _namespaces() == before
