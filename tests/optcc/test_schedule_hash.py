"""Schedule.canonical_bytes writes the flows itself (fast path); the bytes, and so every sha256
a certificate, attestation or generated schedule names, equal json.dumps(to_json(), sort_keys)."""
from __future__ import annotations

import json
from fractions import Fraction

import pytest

from optcc.algorithms import algorithm_names, build_schedule
from optcc.cluster import Cluster
from optcc.schedule import Flow, LocalOp, Schedule


def _plain(schedule: Schedule) -> bytes:
    return json.dumps(schedule.to_json(), sort_keys=True, separators=(",", ":")).encode()


CLUSTERS = [Cluster.build(5, 1, {1: Fraction(3, 2)}), Cluster.build(8, 2, {2: 2, 3: 2}),
            Cluster.build(6), Cluster.build(8, 1, {0: 2, 5: 3}), Cluster.build(4, 1, {r: 2 for r in range(4)}),
            Cluster.build(12, 4, {r: 2 for r in range(4)}, latency_model="simai")]   # few_servers (3 servers, latency)


@pytest.mark.parametrize("algo", algorithm_names())
def test_fast_canonical_bytes_equal_json_dumps_for_every_algorithm(algo):
    from optcc.errors import OptccError
    built = 0
    for c in CLUSTERS:
        try:
            s = build_schedule(algo, c, 2)
        except OptccError:
            try:
                s = build_schedule(algo, c, 1)
            except OptccError:
                continue
        assert s.canonical_bytes() == _plain(s)
        built += 1
    assert built >= 1


def test_every_optional_field_and_odd_value_is_written_alike():
    c = Cluster.build(4, 2, {0: 2})
    flows = [Flow(0, 1, 0, "add", Fraction(1, 3), "nvlink", Fraction(1, 2), 3),
             Flow(1, 2, 1, "copy", Fraction(2), "nic", Fraction(1), -1),
             Flow(2, 3, 0, "add", Fraction(0), "nic", Fraction(5, 1), 1)]
    s = Schedule(c, [Fraction(1, 2)] * 2, flows, [LocalOp(1, 0, Fraction(1, 7), 2)], meta={"a": "\x00optcc-flows\x00"})
    assert s.canonical_bytes() == _plain(s)
    s.flows.append(Flow(True, 2, 0, "add", Fraction(1)))          # a bool rank: json writes true
    assert s.canonical_bytes() == _plain(s)
    s.flows[-1] = Flow(0, 2, 0, "xor", Fraction(1))               # an unknown word: json escapes it
    assert s.canonical_bytes() == _plain(s)
