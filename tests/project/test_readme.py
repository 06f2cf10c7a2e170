"""README opens with the two one-line commands, and .ci/run runs the second one verbatim."""
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text().splitlines()
    fence = readme.index("```bash")
    demo_cmd, test_cmd = readme[fence + 1], readme[fence + 2]
    assert demo_cmd.endswith("optcc demo")
    assert "pytest" in test_cmd and "torch==2.13.0" in test_cmd
    ci_lines = (ROOT / ".ci" / "run").read_text().splitlines()
    assert test_cmd in ci_lines


def test_the_demo_line_installs_what_the_demo_runs():
    """Line 1 must give the demo its real run: torch's CPU build first, then the runner extra."""
    readme = (ROOT / "README.md").read_text().splitlines()
    demo_cmd = readme[readme.index("```bash") + 1]
    torch_at, runner_at = demo_cmd.find("pip install -q torch==2.13.0"), demo_cmd.find("'.[runner]'")
    assert 0 <= torch_at < runner_at < demo_cmd.find("optcc demo")


def test_packaging_names_a_free_distribution_a_licence_and_typed_packages():
    import tomllib
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == "optcc-allreduce"       # "optcc" on PyPI is someone else's (GAMS)
    assert project["license"] == "MIT" and (ROOT / "LICENSE").read_text().startswith("MIT License")
    assert "torch" not in " ".join(project["dependencies"])      # bounds, LP and proofs install light
    for package in ("optcc", "optcc_app", "bounds", "lp_models", "verifier", "gpu_runner", "paper_checks"):
        assert (ROOT / package / "py.typed").exists(), package
    assert not (ROOT / "compose").exists()          # a PyPI name; the composition layer is optcc_app.compose


@pytest.mark.alone          # 8 gloo ranks within the example's own timeout: no other test's load beside it
def test_the_python_api_example_runs_as_shown(tmp_path, monkeypatch):
    """README's "Python API" block, exactly as shown, as a doctest (in a temporary folder: it
    writes oc8.json)."""
    import doctest
    import importlib.util
    import pytest
    if importlib.util.find_spec("torch") is None:
        pytest.skip("the example's last step runs gloo processes: needs torch")
    text = (ROOT / "README.md").read_text()
    block = text.split("## Python API (from a notebook)", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(tmp_path)
    test = doctest.DocTestParser().get_doctest(block, {}, "README Python API", "README.md", 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test)
    assert runner.failures == 0 and runner.tries >= 15


def test_install_hints_name_the_distribution_pyproject_declares():
    import tomllib
    from optcc.needs import DISTRIBUTION
    assert DISTRIBUTION == tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["name"]
