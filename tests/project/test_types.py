"""mypy (configured in pyproject.toml's [tool.mypy]) reports zero errors: strict on optcc/ and
verifier/, the other packages relaxed there until annotated."""
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="mypy is not installed (pip install -e .[dev])")
def test_mypy_is_clean():
    out = subprocess.run([sys.executable, "-m", "mypy"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.startswith("Success: no issues found"), out.stdout + out.stderr
