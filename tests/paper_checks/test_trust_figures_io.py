"""`optcc paper-checks --figures DIR` writes its PNGs with the project's atomic writer: a symlink
(or a folder) in the way is refused before the checks run, exit 2, and its target is untouched;
a figure is never half-written."""
from __future__ import annotations

import os

import pytest

from optcc_app.cli import main


def test_a_symlinked_figure_is_refused_before_any_work(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    target = tmp_path / "precious.txt"
    target.write_text("keep me")
    out = tmp_path / "figs"
    out.mkdir()
    os.symlink(target, out / "figure9.png")
    assert main(["paper-checks", "--figures", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("optcc: error: --figures:") and "symbolic link" in err and "figure9.png" in err
    assert target.read_text() == "keep me"
    assert sorted(os.listdir(out)) == ["figure9.png"]      # nothing else written


def test_save_figure_writes_atomically_and_refuses_symlinks(tmp_path):
    plt = pytest.importorskip("matplotlib.pyplot")
    from optcc.errors import OptccError
    from paper_checks.figures import save_figure
    fig = plt.figure()
    save_figure(fig, str(tmp_path / "a.png"), 50)
    assert (tmp_path / "a.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    os.symlink(tmp_path / "a.png", tmp_path / "b.png")
    with pytest.raises(OptccError, match="symbolic link"):
        save_figure(fig, str(tmp_path / "b.png"), 50)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".optcc-")] == []
    plt.close(fig)
