"""Reference simulation: ring is correct everywhere; a broken schedule is caught and located."""
from fractions import Fraction as F

import pytest

from optcc.algorithms.ring.build import ring_allreduce
from optcc.cluster import Cluster
from optcc.schedule import Flow, LocalOp, Schedule
from optcc.simulate import simulate


@pytest.mark.parametrize("p", range(2, 10))
@pytest.mark.parametrize("ell, k", [(1, 1), ("3/2", 2), (3, 3)])
def test_ring_is_correct(p, ell, k):
    assert simulate(ring_allreduce(Cluster.build(p, stragglers={p - 1: ell}), k)).correct


def test_dropping_a_flow_is_caught():
    s = ring_allreduce(Cluster.build(4), 1)
    del s.flows[5]
    result = simulate(s)
    assert not result.correct
    assert set(result.first_wrong) == {"rank", "piece", "expected", "actual"}


def test_reads_see_the_value_at_start_and_signed_local_ops():
    # Rank 0 sends to 1 while 2's contribution is still in flight into 0: 1 must not see it.
    c = Cluster.build(3)
    flows = [Flow(2, 0, 0, "add", F(0)), Flow(0, 1, 0, "add", F(0)),
             # 1 now holds x0 + x1; 0 holds x0 + x2.  1 ← 1·(x0+x2) + (x0+x1) − x0·... use a scale:
             Flow(0, 1, 0, "add", F(1)), Flow(2, 1, 0, "add", F(2), coef=-1)]
    ops = [LocalOp(1, 0, F(1, 2), 1)]
    s = Schedule(c, [F(1)], flows, ops)
    r = simulate(s)
    x = r.inputs[:, 0]
    assert (r.final[1, 0] == (x[0] + x[1]) + (x[0] + x[2]) - x[2]).all()
