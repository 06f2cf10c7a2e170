"""`paper-checks --figures`: a drawing error never loses the checks (they are printed first)."""
from __future__ import annotations

import json

from optcc_app.cli import main


def _cached(monkeypatch, paper_rows):
    from paper_checks import claims
    monkeypatch.setattr(claims, "all_checks", lambda progress=None, full_fit=False: paper_rows)


def _broken_drawing(monkeypatch):
    import paper_checks.figures as figures

    def draw(directory):
        raise RuntimeError("no display for the fonts")
    monkeypatch.setattr(figures, "draw_figures", draw)


def test_a_drawing_error_comes_after_the_table(tmp_path, capsys, monkeypatch, paper_rows):
    _cached(monkeypatch, paper_rows)
    _broken_drawing(monkeypatch)
    assert main(["paper-checks", "--figures", str(tmp_path / "figs")]) == 3
    out, err = capsys.readouterr()
    assert all(f"] {r.id}: " in out for r in paper_rows)               # every row was printed
    assert err.splitlines()[-1].startswith("optcc: error: --figures: the checks are above, but drawing into")


def test_a_drawing_error_keeps_the_json(tmp_path, capsys, monkeypatch, paper_rows):
    _cached(monkeypatch, paper_rows)
    _broken_drawing(monkeypatch)
    assert main(["paper-checks", "--json", "--figures", str(tmp_path / "figs")]) == 3
    report = json.loads(capsys.readouterr().out)
    assert {r["id"] for r in report["rows"]} == {r.id for r in paper_rows}
    assert report["figures_error"] == "RuntimeError: no display for the fonts"
