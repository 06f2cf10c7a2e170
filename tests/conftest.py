"""Shared fixtures: the paper-checks report is computed once per test session (it is the slowest
computation of the suite; tests/test_paper_checks*.py and the CLI test all read this one)."""
import pytest


@pytest.fixture(scope="session")
def paper_rows():
    """The Row objects of claims.all_checks(), computed once."""
    from paper_checks import claims
    return claims.all_checks()


@pytest.fixture(scope="session")
def paper_report(paper_rows):
    from paper_checks.report import run_paper_checks
    return run_paper_checks(rows=paper_rows)
