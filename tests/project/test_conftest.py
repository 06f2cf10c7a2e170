"""tests/conftest.py's shared set-up keeps what it promises."""
from __future__ import annotations

import importlib
import json

from conftest import CACHES, cache_in


def test_every_listed_cache_exists():
    """A renamed cache would silently stop being reset: each listed one must still be there."""
    for module_name, attr in CACHES:
        cache = cache_in(importlib.import_module(module_name), attr)
        assert hasattr(cache, "cache_clear") or hasattr(cache, "clear"), (module_name, attr)


def test_caches_are_reset_between_tests_part_1():
    from optcc.cluster import Cluster
    from optcc.model_time import _SLOT_CACHE, model_time
    model_time("optcc", Cluster.build(8, stragglers={0: 2}, latency_model="simai"), 4, 1 << 30)
    assert _SLOT_CACHE


def test_caches_are_reset_between_tests_part_2():
    from optcc.model_time import _SLOT_CACHE
    assert not _SLOT_CACHE                     # part 1 filled it; the autouse fixture emptied it


def test_run_optcc_runs_the_command_line(run_optcc, tmp_path):
    done = run_optcc("bound", "--p", "8", "--straggler", "0:2", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["lower_bound"] == 2
