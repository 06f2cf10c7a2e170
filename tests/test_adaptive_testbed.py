"""The adaptive hook on the shaped testbed (root): 4 nodes at 40 Mbit/s train a small MLP; node 0's
link is halved before step 3 and restored before step 8. The hook switches to OptCC within 3
steps of each change (the second slow step is the first a host can be named in), names node 0
with ℓ between 1.5 and 5 (shaped: 2; the errors are one-sided, high), every rank holds the same
parameters, and they equal a default-hook run's within 1e-5."""
import os

import pytest

torch = pytest.importorskip("torch")

ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
pytestmark = [pytest.mark.skipif(not ROOT, reason="the testbed needs root (network namespaces, tc)"),
              pytest.mark.alone, pytest.mark.xdist_group("testbed")]

TAG = "o41ad"
RATE = 40.0
DEGRADE, RESTORE, STEPS = 3, 8, 13


@pytest.fixture(autouse=True, scope="module")
def _no_stale_namespaces():
    from gpu_runner.testbed import remove_stale
    remove_stale(TAG)
    yield
    remove_stale(TAG)


@pytest.mark.slow
def test_switches_within_three_steps_each_way_on_the_testbed(tmp_path):
    from gpu_runner.adaptive_scenario import run_scenario, scenario_events, testbed_overhead
    from gpu_runner.testbed import Testbed
    events = scenario_events(4, RATE, DEGRADE, RESTORE)
    with Testbed(4, tag=TAG) as tb:
        tb.shape([RATE] * 4)
        cluster = testbed_overhead(tb)
        ad = run_scenario(tb, "adaptive", STEPS, events, cluster=cluster, params_out=str(tmp_path / "ad.pt"))
        tb.shape([RATE] * 4)
        ref = run_scenario(tb, "default", STEPS, events, params_out=str(tmp_path / "ref.pt"))
    modes = ad["modes"]
    to_optcc = modes.index("optcc")
    back = modes.index("default", to_optcc)
    assert DEGRADE < to_optcc <= DEGRADE + 3 and RESTORE < back <= RESTORE + 3, modes
    assert "optcc" not in modes[:DEGRADE] and "optcc" not in modes[back:], modes
    sw = ad["switches"]
    assert [s["to"] for s in sw] == ["optcc", "default"] and sw[0]["hosts"] == [f"{TAG}r0"], sw
    # shaped: 2. Errors are one-sided, high: a late peer's wait reads as slowness, and the fastest
    # rank sets B, where one of the sample's 48 KiB flows that rode a link's 16 KiB burst reads fast
    assert 1.5 <= sw[0]["ell"][f"{TAG}r0"] <= 5.0, sw
    assert ad["params_identical"] and ref["params_identical"]
    diff = (torch.load(tmp_path / "ad.pt") - torch.load(tmp_path / "ref.pt")).abs().max()
    assert float(diff) <= 1e-5
