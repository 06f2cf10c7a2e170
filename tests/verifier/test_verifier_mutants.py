"""Mutation suite: every mutant of seven families, judged by an independent oracle, must be
refuted by the verifier when wrong and proved when still correct (kill rate 100%).

Oracle (tests/verifier_cases.really_wrong, no verifier code): optcc.simulate with random inputs
(2 seeds) under the stated times with same-instant landings in flow-index order and in the
runner's posting order, plus optcc.timing.check_capacity.
"""
from __future__ import annotations

from collections import Counter
from fractions import Fraction as F

import pytest

from optcc.algorithms.single.build import optcc_allreduce
from optcc.algorithms.ring.build import ring_allreduce
from optcc.cluster import Cluster
from optcc.timing import durations
from verifier import prove_allreduce
from verifier_cases import FAMILIES, local_op_p2, mutants, really_wrong, redundant_p3, signed_p3


def _ring(p, ell, k):
    return ring_allreduce(Cluster.build(p, stragglers={0: ell} if ell != 1 else {}), k)


def _optcc(p, ell, k):
    return optcc_allreduce(Cluster.build(p, stragglers={p - 1: ell} if ell != 1 else {}), k)


CASES = {
    "ring p=3 l=1 k=1": lambda: _ring(3, 1, 1),
    "ring p=4 l=2 k=1": lambda: _ring(4, 2, 1),
    "ring p=5 l=3/2 k=1": lambda: _ring(5, F(3, 2), 1),
    "ring p=4 l=8/7 k=2": lambda: _ring(4, F(8, 7), 2),
    "optcc p=4 l=2 k=1": lambda: _optcc(4, 2, 1),
    "optcc p=4 l=3/2 k=2": lambda: _optcc(4, F(3, 2), 2),
    "optcc p=5 l=2 k=1": lambda: _optcc(5, 2, 1),
    "optcc p=3 l=8/7 k=2": lambda: _optcc(3, F(8, 7), 2),
    "hand signed p=3": signed_p3,
    "hand local op p=2": local_op_p2,
    "hand redundant p=3": redundant_p3,
}
TOTALS: Counter = Counter()


@pytest.mark.parametrize("name", list(CASES))
def test_every_mutant_is_judged_right(name):
    schedule = CASES[name]()
    assert prove_allreduce(schedule).proved, "the unmutated schedule must be proved"
    seen, missed = Counter(), []
    for family, desc, mutant in mutants(schedule, durations(schedule)):
        wrong, _ = really_wrong(mutant)
        proof = prove_allreduce(mutant)
        seen[family, wrong] += 1
        if proof.proved == wrong:
            missed.append((family, desc, "wrong" if wrong else "correct", proof.properties))
    wrong_total = sum(v for (f, w), v in seen.items() if w)
    killed = wrong_total - sum(1 for m in missed if m[2] == "wrong")
    TOTALS["wrong"] += wrong_total
    TOTALS["killed"] += killed
    TOTALS["correct"] += sum(v for (f, w), v in seen.items() if not w)
    print(f"\n{name}: {sum(seen.values())} mutants, {wrong_total} wrong, kill rate "
          f"{killed}/{wrong_total} = {100 * killed / max(wrong_total, 1):.1f}%, "
          f"still-correct proved {sum(v for (f, w), v in seen.items() if not w) - (len(missed) - (wrong_total - killed))}")
    assert {f for f, _ in seen} >= set(FAMILIES) - ({"piece"} if len(schedule.pieces) == 1 else set()) - (
        {"destination"} if schedule.cluster.p == 2 else set())
    assert not missed, missed[:10]


def test_some_mutants_stay_correct_and_are_proved():
    """The suite must also exercise the 'prove every still-correct mutant' direction."""
    schedule = redundant_p3()
    correct = [m for _, _, m in mutants(schedule, durations(schedule)) if not really_wrong(m)[0]]
    assert len(correct) >= 5
    assert all(prove_allreduce(m).proved for m in correct)


def test_a_read_racing_an_in_flight_write_is_proved_as_the_runner_executes_it():
    """The mutant the old "eager landing" oracle called wrong (a read of rank 2 at t = 1 while a
    copy into rank 2 is in flight until 3/2): the runner sends the value held at the read's
    start, as the stated times say, so it is correct and proved (issue 12; on gloo in
    tests/verifier/test_trust_causality.py)."""
    schedule = redundant_p3()
    racing = [m for _, d, m in mutants(schedule, durations(schedule)) if d == "3 start 1/2"]
    assert len(racing) == 1 and really_wrong(racing[0]) == (False, False)
    proof = prove_allreduce(racing[0])
    assert proof.proved and proof.properties["causality"]
