"""The construction registry (optcc/algorithms/registry.py): which construction serves which
cluster, that build_schedule("optcc") is the chosen one, and each entry's closed form."""
from fractions import Fraction as F

import pytest

from optcc.algorithms import build_schedule
from optcc.algorithms.registry import CONSTRUCTIONS, choose, construction, optcc_closed_form
from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.timing import slot_time

SHAPES = [
    (Cluster.build(6), "optcc_single"),
    (Cluster.build(6, 1, {2: F(3, 2)}), "optcc_single"),
    (Cluster.build(6, 1, {0: F(2), 3: F(3, 2)}), "optcc_multi"),
    (Cluster.build(8, 2, {0: F(2), 1: F(2)}), "optcc_servers"),
    (Cluster.build(8, 4), "optcc_servers"),
]


def test_the_table_order_and_names():
    assert [c.name for c in CONSTRUCTIONS] == ["optcc_servers", "optcc_multi", "optcc_single"]


@pytest.mark.parametrize("cluster,name", SHAPES)
def test_choose_and_build_agree(cluster, name):
    chosen = choose(cluster)
    assert chosen.name == name
    for k in (1, 3):
        s = build_schedule("optcc", cluster, k)
        assert s.to_json() == chosen.build(cluster, k).to_json()
        assert slot_time(s) == chosen.slot_time(cluster, k) == optcc_closed_form(cluster, k)


def test_accepts_gives_a_reason_when_not():
    c = Cluster.build(6, 1, {0: F(2), 3: F(3, 2)})
    answers = {x.name: x.accepts(c) for x in CONSTRUCTIONS}
    assert answers == {"optcc_servers": (False, "covers g > 1 GPUs per server"), "optcc_multi": (True, ""),
                       "optcc_single": (False, "covers at most one straggler")}
    assert construction("optcc_multi").accepts(Cluster.build(6, 1, {0: 2})) == (False, "needs m ≥ 2 stragglers")


def test_unknown_construction_names_the_field():
    with pytest.raises(OptccError) as e:
        construction("optcc_quantum")
    assert e.value.field == "algo" and "optcc_single" in e.value.message
