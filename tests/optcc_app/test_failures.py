"""Lost NICs (--failed-nics, cluster JSON "failed_nics"): the ℓ mapping with and without PXN
pooling, JSON round trip, the commands that accept it, and bad input naming the field."""
import json
from fractions import Fraction as F

import pytest

from bounds.closed_form import lower_bound, lower_bound_straggler_server
from optcc_app.cli import main
from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.failures import server_slowdowns


def test_pooled_mapping_is_the_papers_8_over_7():
    assert server_slowdowns(8, 1) == [F(8, 7)] * 8          # paper: 1 of 8 NICs lost, ℓ = 8/7
    assert server_slowdowns(8, 4) == [F(2)] * 8             # paper: half lost, ℓ = 2


@pytest.mark.parametrize("g,c,expect", [(8, 1, [2, 2, 1, 1, 1, 1, 1, 1]),
                                        (4, 2, [2, 2, 2, 2]),
                                        (4, 3, [4, 4, 4, 4]),
                                        (8, 5, [3, 3, 2, 3, 3, 3, 3, 2])])
def test_unpooled_mapping_shares_one_nic(g, c, expect):
    ells = server_slowdowns(g, c, pooling=False)
    assert ells == [F(x) for x in expect]
    # derived: the server keeps (g − c) NICs of bandwidth either way
    assert sum(1 / x for x in ells) == g - c == sum(1 / x for x in server_slowdowns(g, c))


def test_cluster_json_round_trip_and_bound():
    c = Cluster.build(32, 8, {0: 2}, failed_nics=[(2, 1)])
    assert c.slowdown[16:24] == (F(8, 7),) * 8 and c.slowdown[0] == 2
    data = c.to_json()
    assert data["failed_nics"] == [{"server": 2, "count": 1}] and data["stragglers"] == [{"rank": 0, "ell": 2}]
    assert Cluster.from_json(data) == c
    assert "failed_nics" not in Cluster.build(8, 2, {0: 2}).to_json()     # older JSON unchanged
    one = Cluster.build(32, 8, failed_nics=[(1, 4)])
    assert lower_bound(one) == lower_bound_straggler_server(32, 8, 2)
    nopxn = Cluster.build(16, 4, failed_nics=[(1, 1)], pxn=False)
    assert nopxn.to_json()["pxn"] is False and Cluster.from_json(nopxn.to_json()) == nopxn
    assert nopxn.slowdown[4:8] == (2, 2, 1, 1)


@pytest.mark.parametrize("failed,field", [([(0, 4)], "failed_nics[0].count"),
                                          ([(0, 0)], "failed_nics[0].count"),
                                          ([(0, -1)], "failed_nics[0].count"),
                                          ([(4, 1)], "failed_nics[0].server"),
                                          ([(1, 1), (1, 2)], "failed_nics[1].server"),
                                          ([(0, 1)], "failed_nics[0].server")])
def test_core_errors_name_the_field(failed, field):
    with pytest.raises(OptccError) as e:
        Cluster.build(16, 4, {1: 2} if field == "failed_nics[0].server" and failed == [(0, 1)] else None,
                      failed_nics=failed)
    assert e.value.field == field


@pytest.mark.parametrize("arg", ["1:4", "9:1", "1:-1", "1:x", "1"])
def test_cli_bad_input_exits_2(arg, capsys):
    assert main(["bound", "--p", "16", "--g", "4", "--failed-nics", arg]) == 2
    assert capsys.readouterr().err.startswith("optcc: error: --failed-nics:")


def test_commands_accept_failed_nics(tmp_path, capsys):
    flags = ["--p", "16", "--g", "4", "--failed-nics", "1:1", "--failed-nics", "2:2"]
    assert main(["bound", "--json"] + flags) == 0
    b = json.loads(capsys.readouterr().out)
    assert b["lower_bound_exact"] == str(lower_bound(Cluster.build(16, 4, failed_nics=[(1, 1), (2, 2)])))
    path = str(tmp_path / "s.json")
    assert main(["schedule", "--algo", "optcc", "--segments", "2", "-o", path] + flags) == 0
    capsys.readouterr()
    assert main(["time", path, "--json"]) == 0
    t = json.loads(capsys.readouterr().out)
    assert t["capacity_ok"] and t["ratio_to_lower_bound"] >= 1
    assert main(["verify", path]) == 0
    capsys.readouterr()
    assert main(["compare", "--json", "--segments", "2"] + flags) == 0
    row = json.loads(capsys.readouterr().out)["algorithms"]["optcc"]
    assert row["proved"] is True and row["source"] == "schedule (optcc_rails)"
    assert main(["bound", "--p", "16", "--g", "4", "--failed-nics", "1:1", "--no-pxn", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["lower_bound_exact"] == "2/5"   # b = 3 on server 1
