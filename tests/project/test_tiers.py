"""The test tiers (README): `slow` comes from measured durations (tests/slow_tests.txt) and the
paper-checks fixtures; the fast tier (`-m "not slow"`) still tests every package."""
from __future__ import annotations

import re

import pytest

from conftest import PAPER_FIXTURES, measured_slow, plain_nodeid

PACKAGES = ("optcc", "optcc_app", "bounds", "lp_models", "verifier", "gpu_runner", "paper_checks")


def _whole_suite(request):
    """The session's items, or a skip where this run selects part of the suite (-m, -k, a file)."""
    items = request.session.items
    if request.config.option.markexpr or request.config.option.keyword or len(items) < 1000:
        pytest.skip("needs the whole suite collected (a partial run deselects the tests it checks)")
    return items


def test_every_listed_slow_test_exists_and_is_marked(request):
    items = {plain_nodeid(item): item for item in _whole_suite(request)}
    listed = measured_slow()
    assert len(listed) >= 50
    stale = sorted(listed - set(items))
    assert not stale, f"tests/slow_tests.txt names tests that no longer exist: {stale[:5]}"
    assert all(items[n].get_closest_marker("slow") for n in listed)
    readers = [i for i in items.values() if PAPER_FIXTURES & set(i.fixturenames)]
    assert readers and all(i.get_closest_marker("slow") for i in readers)


def test_the_fast_tier_covers_every_package(request):
    items = _whole_suite(request)
    fast_modules = {i.module for i in items if not i.get_closest_marker("slow")}
    sources = [open(m.__file__, encoding="utf-8").read() for m in fast_modules]
    for pkg in PACKAGES:
        pattern = re.compile(rf"^\s*(from|import) {pkg}\b", re.M)
        assert any(pattern.search(src) for src in sources), f"no fast test imports {pkg}"
