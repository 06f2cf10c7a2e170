"""The three port disciplines of the event model against SimGrid (benchmarks/simgrid_disciplines.py
replays a schedule in SimGrid's max-min network model), where SimGrid is installed."""
import importlib.util
from fractions import Fraction as F
from pathlib import Path

import pytest

from optcc.algorithms.registry import choose
from optcc.cluster import Cluster
from optcc.latency import units
from optcc.timing import DISCIPLINES, event_time

_spec = importlib.util.spec_from_file_location(
    "simgrid_disciplines", Path(__file__).resolve().parents[2] / "benchmarks" / "simgrid_disciplines.py")
SG = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(SG)
_sg, _why = SG.load_simgrid()
pytestmark = pytest.mark.skipif(_sg is None, reason=_why)


@pytest.mark.parametrize("discipline", DISCIPLINES)
def test_optcc_one_straggler_agrees_with_simgrid(discipline):
    """OptCC, p = 8, ℓ = 2, k = 4 (392 flows, simai at 8 GiB): the event model and SimGrid's
    replay agree to 1e-9 (relative) under each discipline."""
    c = Cluster.build(8, 1, {0: F(2)}, bandwidth=50e9, latency_model="simai")
    s = choose(c).build(c, 4)
    o, li, lat = units(c, 8 * 2**30)
    ours = float(event_time(s, o, None, li, lat, discipline))
    assert SG.replay(s, o, li, lat, discipline) == pytest.approx(ours, rel=1e-9)
