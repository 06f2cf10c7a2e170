"""The construction registry (optcc/algorithms/registry.py): which construction serves which
cluster, that build_schedule("optcc") is the chosen one, and each entry's closed form."""
from fractions import Fraction as F

import pytest

from optcc.algorithms import build_schedule
from optcc.algorithms.registry import choose, construction, constructions, optcc_closed_form
from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.timing import slot_time

SHAPES = [
    (Cluster.build(6), "optcc_single"),
    (Cluster.build(6, 1, {2: F(3, 2)}), "optcc_single"),
    (Cluster.build(6, 1, {0: F(2), 3: F(3, 2)}), "optcc_multi"),
    (Cluster.build(8, 2, {0: F(2), 1: F(2)}), "optcc_servers"),
    (Cluster.build(8, 4), "optcc_servers"),
    (Cluster.build(16, 4, {i: F(2) for i in range(4)}, latency_model="simai"), "few_servers"),   # q ≤ 8, Li + L > 0
    (Cluster.build(16, 4, {i: F(2) for i in range(4)}, latency_model="alpha"), "optcc_servers"),  # o alone
    (Cluster.build(12, 2, {0: F(2), 1: F(2), 4: F(3, 2), 5: F(3, 2)}), "optcc_rails"),   # two slow servers
    (Cluster.build(8, 2, {0: F(2)}), "optcc_rails"),                                     # mixed ℓ in a server
    (Cluster.build(5, 1, {i: F(3, 2) + i for i in range(5)}), "all_slow"),               # no healthy GPU
]


def test_the_table_order_and_names():
    assert [c.name for c in constructions()] == ["few_servers", "optcc_servers", "optcc_rails", "all_slow", "optcc_multi",
                                               "optcc_single"]


@pytest.mark.parametrize("cluster,name", SHAPES)
def test_choose_and_build_agree(cluster, name):
    chosen = choose(cluster)
    assert chosen.name == name
    for k in (1, 3):
        s = build_schedule("optcc", cluster, k)
        built = chosen.build(cluster, k)
        built.stated_slot_time = chosen.slot_time(cluster, k)    # build_schedule states the record's formula
        assert s.to_json() == built.to_json()
        assert slot_time(s) == chosen.slot_time(cluster, k) == optcc_closed_form(cluster, k)


def test_accepts_gives_a_reason_when_not():
    c = Cluster.build(6, 1, {0: F(2), 3: F(3, 2)})
    answers = {x.name: x.accepts(c) for x in constructions()}
    assert answers == {"few_servers": (False, "covers g ≥ 2 GPUs per server"),
                       "optcc_servers": (False, "covers g > 1 GPUs per server"),
                       "optcc_rails": (False, "optcc_rails is for g > 1 GPUs per server"),
                       "all_slow": (False, "some GPU is healthy"), "optcc_multi": (True, ""),
                       "optcc_single": (False, "covers at most one straggler")}
    assert construction("optcc_multi").accepts(Cluster.build(6, 1, {0: 2})) == (False, "needs m ≥ 2 stragglers")


def test_unknown_construction_names_the_field():
    with pytest.raises(OptccError) as e:
        construction("optcc_quantum")
    assert e.value.field == "algo" and "optcc_single" in e.value.message


def test_servers_refusal_sends_the_cluster_to_rails_with_its_reason():
    """Two straggler servers: optcc_servers says why not (straggler_server's refusal), optcc_rails serves."""
    c = Cluster.build(12, 2, {0: F(2), 1: F(2), 4: F(3, 2), 5: F(3, 2)})
    ok, why = construction("optcc_servers").accepts(c)
    assert not ok and why
    assert construction("optcc_rails").accepts(c)[0]
    assert construction("all_slow").accepts(c) == (False, "covers one GPU per server (g = 1; optcc_rails scales its own rails)")
