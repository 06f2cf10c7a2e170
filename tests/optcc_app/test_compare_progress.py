"""`optcc compare` reports its rows on stderr as they finish where the schedules take seconds
(p²·k ≥ LOUD_WORK), and stays quiet on small clusters (issue 25 item 6)."""
from __future__ import annotations

import json

from optcc_app.commands._common import LOUD_WORK


def test_large_compare_prints_each_row_as_it_finishes(run_optcc):
    args = ("compare", "--p", "40", "--straggler", "0:2", "--segments", "64", "--no-prove")
    assert 40 ** 2 * 64 >= LOUD_WORK
    res = run_optcc(*args, "--json", timeout=300)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    lines = res.stderr.splitlines()
    assert lines[0].startswith("optcc compare: p=40, straggler 0:ℓ=2, k = 64: solving the fluid LPs")
    assert lines[1].startswith("optcc compare: fluid LPs solved")
    rows = [line.split()[3].rstrip(":") for line in lines[2:]]
    assert rows == list(out["algorithms"]), lines          # one line per row, in the table's order
    for line, (name, a) in zip(lines[2:], out["algorithms"].items()):
        shown = f"{a['time']:.4f} n/B" if a["time"] is not None else "not available"
        assert f"row {name}: {shown} (" in line and line.endswith(" s)"), line


def test_small_compare_prints_only_its_table(run_optcc):
    res = run_optcc("compare", "--p", "8", "--straggler", "0:3/2", "--segments", "64", "--no-prove")
    assert 8 ** 2 * 64 < LOUD_WORK
    assert res.returncode == 0 and res.stderr == "", res.stderr
    assert res.stdout.startswith("# AllReduce on p=8")


def test_large_schedule_prints_its_stages(run_optcc, tmp_path):
    """`optcc schedule` of a large flow list says what it builds, how long that took, where it
    writes and how big the file is (it once ran 46.5 s silent at p = 1024)."""
    out = tmp_path / "r.json"
    res = run_optcc("schedule", "--algo", "ring", "--p", "320", "--form", "flows", "-o", str(out), timeout=300)
    assert 320 ** 2 >= LOUD_WORK and res.returncode == 0, res.stderr
    lines = res.stderr.splitlines()
    assert lines[0] == "optcc schedule: building ring on p=320, k=1 (about p²·k = 102,400 flows)", lines
    assert lines[1].startswith("optcc schedule: built 204,160 flows in ") and lines[1].endswith(f" s; writing {out}")
    mb = out.stat().st_size / 1e6
    assert lines[2].startswith(f"wrote {out}: ring, p=320, k=1, 320 pieces, 204160 flows ({mb:.0f} MB, ")


def test_small_schedule_prints_one_line(run_optcc, tmp_path):
    res = run_optcc("schedule", "--algo", "ring", "--p", "8", "-o", str(tmp_path / "r.json"))
    assert res.returncode == 0 and len(res.stderr.splitlines()) == 1 and res.stderr.startswith("wrote ")


def test_schedule_from_a_cluster_file_says_what_auto_k_assumed(run_optcc, tmp_path):
    """`optcc schedule --cluster FILE` with auto k names the message size and the per-message
    latency its k was chosen for (a probe's file: its measured overhead), and --n changes it."""
    import json as _json
    cluster = tmp_path / "c.json"
    cluster.write_text(_json.dumps({"p": 4, "stragglers": [{"rank": 0, "ell": 2}], "bandwidth": 5000000,
                                    "overhead": "13/2000"}))
    res = run_optcc("schedule", "--algo", "optcc", "--cluster", str(cluster), "--n", "4M", "-o", str(tmp_path / "s.json"))
    assert res.returncode == 0, res.stderr
    note = res.stderr.splitlines()[0]
    assert note.startswith("optcc: note: auto k = 7: the k minimising the model time of a 4,194,304-byte message (--n)")
    assert "per message o = 6500 us, Li = 0 us, L = 0 us" in note and "k=7," in res.stderr
