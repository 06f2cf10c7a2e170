"""paper_checks.shared_port: the shared-port LP schedule's column in the g > 1 rows, its values
recomputed independently (the built Schedule timed by optcc.timing.event_time, not the array
path), its verdict rule, `--json` and the markdown table."""
import json
from fractions import Fraction as F

import pytest

from paper_checks import event_checks as E
from paper_checks import settings as S
from paper_checks import shared_port as SP

ROWS = {"fig21-within-6pct-a-g8": (S.G_FIGURE21, S.P_FIGURE21_G8, (S.FIGURE21_ELLS,)),
        "within-6pct-fig22": (S.G_FIGURE22, S.P_FIGURE22, (S.ELL_4_OF_8,)),
        "within-6pct-fig10": (S.G_FIGURE10, S.P_FIGURE10, S.ELLS_UP_TO_HALF)}
TOL = (6 + 0.5) / 100


@pytest.fixture()
def rows(paper_report):            # tests/conftest.py: computed once per session
    return {r["id"]: r for r in paper_report["rows"]}


def test_the_g_gt_1_rows_carry_the_column_and_the_others_do_not(rows):
    for rid, r in rows.items():
        assert ("shared_port" in r["details"]) == (rid in ROWS), rid
    for rid, (g, ps, ells) in ROWS.items():
        sp = rows[rid]["details"]["shared_port"]
        assert sp["port_rule"].startswith("shared ports") and sp["latency_model"] == "simai"
        keys = {f"{','.join(map(str, e)) if isinstance(e, tuple) else e}@{p}" for e in ells for p in ps}
        assert set(sp["points"]) == keys
        assert rows[rid]["verdict"] == rows[rid]["verdicts"]["simai"]      # OptCC's verdict is not replaced


def test_each_point_follows_the_rule(rows):
    """FAIL (refuted by the bound) iff the bound is over the tolerance; PASS iff the event time is within it;
    K_SECOND only where K_FIRST is over and the estimate fits; points past p_max not computed."""
    for rid in ROWS:
        sp = rows[rid]["details"]["shared_port"]
        for key, pt in sp["points"].items():
            p = int(key.split("@")[1])
            if p > SP.P_MAX[rid]:
                assert pt["overhead"] is None and pt["verdict"] == "undecided" and not pt["tried_k"]
                continue
            if pt["bound_overhead"] > TOL:
                assert pt["verdict"] == "FAIL" and pt["decided_by"] == E.REFUTED_BY_BOUND and pt["overhead"] is None
                assert key in sp["refuted_by_bound"]
                continue
            assert pt["tried_k"][0] == SP.K_FIRST
            if pt["overhead"] is not None:
                assert pt["verdict"] == ("PASS" if pt["overhead"] <= TOL else "undecided")
                assert pt["overhead"] > pt["bound_overhead"]           # no schedule beats the bound
        verdicts = {pt["verdict"] for pt in sp["points"].values()}
        assert sp["verdict"] == ("FAIL" if "FAIL" in verdicts else "undecided" if "undecided" in verdicts else "PASS")


def test_fig21_g8_points_recomputed_from_the_built_schedule(rows):
    """p = 32 and 64 of fig21-within-6pct-a-g8: lp_server_schedule built as Flow objects and timed
    by optcc.timing.event_time (not the array path the row uses); the flat ring from its schedule
    at p = 32 (baselines_rings.flat_ring_allreduce), from ring_event_time at 64."""
    from lp_models.to_schedule import lp_server_schedule
    from optcc.algorithms.baselines.rings import flat_ring_allreduce
    from optcc.cluster import Cluster
    from optcc.event_timer import ring_event_time
    from optcc.latency import units as latency_units
    from optcc.timing import event_time
    pts = rows["fig21-within-6pct-a-g8"]["details"]["shared_port"]["points"]
    for p in (32, 64):
        pt = pts[f"2,3/2@{p}"]
        c = Cluster.build(p, 8, {i * 8 + j: e for i, e in enumerate((F(2), F(3, 2))) for j in range(8)},
                          nvlink_bandwidth=S.NVLINK_BANDWIDTH, latency_model="simai")
        o, li, lat = latency_units(c, S.MESSAGE_BYTES)
        healthy = Cluster.build(p, 8, nvlink_bandwidth=S.NVLINK_BANDWIDTH, latency_model="simai")
        if p == 32:
            ring_s = flat_ring_allreduce(healthy)
            ring = event_time(ring_s, o, issue_units=li, latency_units=lat)
            assert ring == ring_event_time(healthy, o, li, lat)
        else:
            ring = ring_event_time(healthy, o, li, lat)
        sched = lp_server_schedule(c, pt["k"])
        assert len(sched.flows) == pt["flows"]
        t = event_time(sched, o, issue_units=li, latency_units=lat)
        assert float(t / ring - 1) == pytest.approx(pt["overhead"], abs=1e-12)
        assert pt["verdict"] == "PASS"           # measured: 6.12% and 4.44%, within 6% + 0.5 pp


def test_json_and_markdown_carry_the_column(rows, paper_report, tmp_path, capsys, monkeypatch, paper_rows):
    from optcc_app.cli import main
    from paper_checks import claims
    from paper_checks.report import render_markdown_table
    monkeypatch.setattr(claims, "all_checks", lambda progress=None, full_fit=False: paper_rows)
    assert main(["paper-checks", "--json"]) == 0
    out = {r["id"]: r for r in json.loads(capsys.readouterr().out)["rows"]}
    for rid in ROWS:
        assert out[rid]["details"]["shared_port"] == json.loads(json.dumps(rows[rid]["details"]["shared_port"]))
    table = render_markdown_table(paper_report).splitlines()
    assert table[0].endswith("| shared-port LP schedule (simai) |")
    by_id = {line.split(" | ")[0][2:]: line for line in table[2:] if line.startswith("| ")}
    sp = rows["fig21-within-6pct-a-g8"]["details"]["shared_port"]
    worst = sp["points"][sp["worst_key"]]
    assert by_id["fig21-within-6pct-a-g8"].endswith(
        f"| **{sp['verdict']}** {100 * sp['worst']:.2f}% at {sp['worst_key']} (k = {worst['k']}); per point: "
        + ", ".join(f"2,3/2@{p} {100 * sp['points'][f'2,3/2@{p}']['overhead']:.2f}%" for p in (32, 64, 128))
        + "; not computed: 2,3/2@256, 2,3/2@512, 2,3/2@1024 |")
    assert by_id["sota-57-r2ccl"].endswith("| – |")


def test_flow_estimate_bounds_the_built_schedule():
    from lp_models.to_schedule import lp_server_plan
    from optcc.algorithms.servers.arrays import lifted_event_arrays
    from paper_checks.event_checks import cluster
    for p, g, ells, k in [(32, 8, S.FIGURE21_ELLS, 8), (16, 4, F(2), 4), (32, 4, F(8, 7), 3)]:
        c = cluster(p, g, ells, "simai")
        plan, inst = lp_server_plan(c, k)
        n = len(lifted_event_arrays(c, plan))
        q, roots = p // g, len(inst.pieces) // k          # servers with a root share
        assert n == 2 * k * roots * (q - 1) * g + 2 * q * k * roots * g * (g - 1)    # the estimate's count
        assert SP.flow_estimate(p, g, k) == n * q // roots >= n


def test_the_cell_says_a_fail_is_the_bounds_before_its_worst_timed_point():
    pts = {"2@16": {"overhead": None, "k": None, "verdict": "FAIL"},
           "2@32": {"overhead": 0.0612, "k": 64, "verdict": "PASS"}}
    r = {"verdict": "FAIL", "worst_key": "2@32", "worst": 0.0612, "points": pts, "undecided": [],
         "refuted_by_bound": ["2@16"]}
    assert SP.cell(r) == "**FAIL** refuted by the bound at 2@16; worst timed point 6.12% at 2@32 (k = 64)"
