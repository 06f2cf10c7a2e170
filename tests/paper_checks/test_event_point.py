"""`python -m paper_checks.event_point P MODEL K` (the note beside the Figure 21 g = 8 row in
docs/paper_checks.md) as a user runs it: its overhead is the reference event model's
(optcc.timing.event_time on the built rails schedule) over NCCLNoFailure's; bad input exits 2."""
import json
import subprocess
import sys
from fractions import Fraction as F

from optcc.algorithms.registry import choose
from optcc.latency import units
from optcc.timing import event_time
from paper_checks import event_checks as E
from paper_checks import settings as S


def test_one_point_equals_the_reference_event_time():
    out = subprocess.run([sys.executable, "-m", "paper_checks.event_point", "32", "simai", "4", "--json"],
                         capture_output=True, text=True, check=True)
    got = json.loads(out.stdout)[0]
    c = E.cluster(32, S.G_FIGURE21, tuple(F(e) for e in S.FIGURE21_ELLS), "simai")
    o, li, lat = units(c, S.MESSAGE_BYTES)
    record = choose(c)
    assert record.name == "optcc_rails"
    sched = record.build(c, 4)
    want = event_time(sched, o, None, li, lat) / E.nccl_event(32, S.G_FIGURE21, "simai", S.MESSAGE_BYTES) - 1
    assert (got["p"], got["model"], got["k"]) == (32, "simai", 4)
    assert got["overhead"] == float(want) and 0.1 < got["overhead"] < 1


def test_bad_input_exits_2_naming_the_argument():
    for args in (["32", "foo", "4"], ["32", "simai"], ["abc", "simai", "4"], ["32", "simai", "0"],
                 ["20", "simai", "4"], ["8", "simai", "2"]):
        out = subprocess.run([sys.executable, "-m", "paper_checks.event_point", *args], capture_output=True, text=True)
        assert out.returncode == 2 and "points:" in out.stderr and "Traceback" not in out.stderr, out.stderr
