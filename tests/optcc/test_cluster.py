"""Cluster: construction from flags and JSON, exact ℓ, and every bad input named by its field."""
from fractions import Fraction

import pytest

from optcc.cluster import Cluster, parse_straggler
from optcc.errors import OptccError


def test_defaults_and_exact_slowdown():
    c = Cluster.build(8, stragglers={0: "8/7", 3: 1.5})
    assert c.g == 1
    assert c.bandwidth == 50 * 10**9
    assert c.nvlink_speedup == 9
    assert c.slowdown[0] == Fraction(8, 7)
    assert c.slowdown[3] == Fraction(3, 2)
    assert c.stragglers == {0: Fraction(8, 7), 3: Fraction(3, 2)}
    assert c.healthy == [1, 2, 4, 5, 6, 7]
    assert c.nic_time(0, 3, Fraction(1, 4)) == Fraction(3, 8)   # slower end sets the speed


def test_json_round_trip_is_exact():
    c = Cluster.build(16, 4, {4: "4/3"}, bandwidth=25 * 10**9, overhead="3/1000000")
    assert Cluster.from_json(c.to_json()) == c


def test_parse_straggler():
    assert parse_straggler("0:8/7") == (0, Fraction(8, 7))
    assert parse_straggler("3:1.14") == (3, Fraction(57, 50))
    with pytest.raises(OptccError, match="RANK:ELL"):
        parse_straggler("3")


@pytest.mark.parametrize("kwargs, field, text", [
    (dict(p=1), "p", "at least 2"),
    (dict(p=0), "p", "positive"),
    (dict(p=8, stragglers={0: "0.5"}), "stragglers[0].ell", "≥ 1"),
    (dict(p=8, stragglers={0: "nan"}), "stragglers[0].ell", "finite"),
    (dict(p=8, stragglers={0: float("nan")}), "stragglers[0].ell", "finite"),
    (dict(p=8, stragglers={8: 2}), "stragglers[0].rank", "out of range"),
    (dict(p=8, stragglers={-1: 2}), "stragglers[0].rank", "out of range"),
    (dict(p=8, stragglers=[(1, 2), (1, 3)]), "stragglers[1].rank", "twice"),
    (dict(p=8, g=3), "g", "does not divide"),
    (dict(p=8, bandwidth=0), "bandwidth", "positive"),
    (dict(p=8, overhead=-1), "overhead", "≥ 0"),
])
def test_bad_values_name_their_field(kwargs, field, text):
    with pytest.raises(OptccError) as err:
        Cluster.build(**kwargs)
    assert err.value.field == field
    assert text in err.value.message


def test_from_json_refuses_unknown_keys_and_bad_shapes():
    with pytest.raises(OptccError) as err:
        Cluster.from_json({"p": 4, "straglers": []})
    assert err.value.field == "cluster.straglers"
    with pytest.raises(OptccError) as err:
        Cluster.from_json({"p": 4, "stragglers": [{"rank": 9, "ell": 2}]})
    assert err.value.field == "cluster.stragglers[0].rank"
