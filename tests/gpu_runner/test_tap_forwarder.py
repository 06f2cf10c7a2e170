"""The testbed forwarder's link model (no root: pipes stand in for the TAP devices)."""
import os

import pytest

from gpu_runner.tap_forwarder import Switch, mac_of


def _frame(dst: bytes, src: bytes, size: int) -> bytes:
    return dst + src + b"\x08\x00" + bytes(size - 14)


@pytest.fixture
def ports():
    pipes = [os.pipe() for _ in range(3)]
    yield pipes
    for r, w in pipes:
        os.close(r)
        os.close(w)


def test_delay_then_receiver_pacing_fifo(ports):
    macs = [mac_of(r, 7) for r in range(3)]
    sw = Switch([w for _, w in ports], macs, delay_s=0.002)
    sw.rates = [1e6, 1e6, 0.5e6]                       # bytes/s
    sw.enqueue(0, _frame(macs[2], macs[0], 1000), now=10.0)
    sw.enqueue(1, _frame(macs[2], macs[1], 1000), now=10.0)   # same receiver: queues behind
    sw.enqueue(0, _frame(macs[1], macs[0], 500), now=10.0)
    due = sorted((at, d) for at, _, d, _ in sw.heap)
    # deliver = max(arrival + D, free[dst]) + bytes / rate[dst]
    assert due == [(pytest.approx(10.0025), 1), (pytest.approx(10.004), 2), (pytest.approx(10.006), 2)]
    sw.deliver_due(10.0039)
    assert os.read(ports[1][0], 4096)[:6] == macs[1] and sw.stats["frames"] == 1
    sw.deliver_due(10.01)
    assert len(os.read(ports[2][0], 4096)) == 2000 and sw.stats["frames"] == 3
    assert sw.stats["late_max_s"] == pytest.approx(0.006)   # 10.01 − 10.004


def test_broadcast_floods_unknown_unicast_drops(ports):
    macs = [mac_of(r, 7) for r in range(3)]
    sw = Switch([w for _, w in ports], macs, delay_s=0.0)
    sw.enqueue(1, _frame(b"\xff" * 6, macs[1], 60), now=0.0)
    assert sorted(d for _, _, d, _ in sw.heap) == [0, 2]
    sw.enqueue(1, _frame(mac_of(9, 7), macs[1], 60), now=0.0)
    assert sw.stats["dropped_unknown"] == 1 and len(sw.heap) == 2


def test_macs_are_local_unicast_and_distinct():
    macs = {mac_of(r, 200) for r in range(300)}
    assert len(macs) == 300
    assert all(m[0] & 0b11 == 0b10 for m in macs)      # locally administered, unicast
