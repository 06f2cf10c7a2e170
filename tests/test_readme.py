"""README opens with the two one-line commands, and .ci/run runs the second one verbatim."""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text().splitlines()
    fence = readme.index("```bash")
    demo_cmd, test_cmd = readme[fence + 1], readme[fence + 2]
    assert demo_cmd.endswith("optcc demo")
    assert "pytest" in test_cmd and "torch==2.13.0" in test_cmd
    ci_lines = (ROOT / ".ci" / "run").read_text().splitlines()
    assert test_cmd in ci_lines
