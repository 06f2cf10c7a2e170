"""tests/conftest.py's run lock as pytest-xdist runs it, in a pytest of its own: a worker that kept
the exclusive hold for its next `alone` test lets it go when that test is skipped before its
fixtures run (a non-root machine skips the testbed's), instead of the next shared test waiting
forever on its own worker's hold."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]

SCRATCH = '''
import pytest
pytestmark = pytest.mark.xdist_group("scratch")      # one worker, in this order


@pytest.mark.alone
def test_alone():
    pass


@pytest.mark.alone
@pytest.mark.skipif(True, reason="the case under test: an alone test skipped before its fixtures run, as the testbed's are without root")
def test_alone_skipped():
    pass


def test_shared():
    pass
'''


def test_an_alone_test_skipped_after_an_alone_one_leaves_no_hold(tmp_path):
    pytest.importorskip("xdist")
    (tmp_path / "test_scratch.py").write_text(SCRATCH, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_XDIST", "PYTEST_CURRENT"))}
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), str(TESTS.parent)])
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "conftest",
                           "-n", "2", "--dist", "loadgroup", "-W", "ignore::pytest.PytestUnknownMarkWarning",
                           "--rootdir", str(tmp_path), "--basetemp", str(tmp_path / "bt"), "test_scratch.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "2 passed, 1 skipped" in done.stdout, done.stdout + done.stderr
