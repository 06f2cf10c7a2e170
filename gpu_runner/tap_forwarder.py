"""Delay and receive pacing for the testbed without netem: a user-space switch between TAP devices.

The kernel here has no `netem`, so a one-way delay cannot be a qdisc. Instead each rank's
namespace gets a TAP device (`eth0`) and this process holds the other end of every one of them:
a frame the rank sends is read from its TAP, switched by destination MAC (broadcast and
multicast go to every other rank), and written into the destination's TAP at

    deliver = max(arrival + D, free[dst]) + bytes / rate[dst]          (derived, see below)

free[dst] = deliver. That is a link model with propagation delay D followed by the receiver's
port serialising at its shaped rate (a FIFO per receiver, never dropping): the sender's own
egress is shaped by tc tbf on its TAP (which also gives TCP its back-pressure), the receive
direction here. Times are absolute, so a late wake-up never accumulates into the pacing.

Started by gpu_runner.testbed (`python -m gpu_runner.tap_forwarder CONFIG_JSON`), it prints
`ready` once every TAP is open, then obeys lines on stdin: `rates R0 R1 ...` (bytes/s, 0 =
unpaced), `stats` (prints one JSON line), and exits on EOF, so it never outlives its parent.
"""
from __future__ import annotations

import ctypes
import errno
import fcntl
import heapq
import json
import os
import select
import struct
import sys
import time

TUNSETIFF = 0x400454CA          # linux/if_tun.h: _IOW('T', 202, int)
IFF_TAP = 0x0002
IFF_NO_PI = 0x1000
CLONE_NEWNET = 0x40000000
PR_SET_TIMERSLACK = 29          # linux/prctl.h
FRAME_MAX = 65536


def _setns(fd: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


def open_tap(netns: str, ifname: str) -> int:
    """Attach to the existing TAP `ifname` inside network namespace `netns`; a non-blocking fd."""
    own = os.open("/proc/self/ns/net", os.O_RDONLY)
    target = os.open(f"/var/run/netns/{netns}", os.O_RDONLY)
    try:
        _setns(target)
        try:
            fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
            fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", ifname.encode(), IFF_TAP | IFF_NO_PI))
        finally:
            _setns(own)
    finally:
        os.close(own)
        os.close(target)
    return fd


def mac_of(rank: int, tag_byte: int) -> bytes:
    """Locally administered unicast MAC 02:0e:TT:00:RH:RL for rank r (TT: one byte of the tag)."""
    return bytes([0x02, 0x0E, tag_byte & 0xFF, 0x00, (rank + 1) >> 8, (rank + 1) & 0xFF])


class Switch:
    """The forwarding state: per-receiver FIFO pacing plus a fixed delay, one heap of frames."""

    def __init__(self, fds: list[int], macs: list[bytes], delay_s: float):
        self.fds = fds
        self.port_of = {m: r for r, m in enumerate(macs)}
        self.delay_s = delay_s
        self.rates = [0.0] * len(fds)
        self.free = [0.0] * len(fds)
        self.heap: list = []
        self.seq = 0
        self.stats = {"frames": 0, "bytes": 0, "dropped_unknown": 0, "write_errors": 0,
                      "late_max_s": 0.0, "late_sum_s": 0.0, "queued_max": 0}

    def enqueue(self, src: int, frame: bytes, now: float) -> None:
        dst_mac = frame[:6]
        if dst_mac[0] & 1:                       # broadcast / multicast: every other port
            dsts = [d for d in range(len(self.fds)) if d != src]
        else:
            d = self.port_of.get(dst_mac)
            if d is None or d == src:
                self.stats["dropped_unknown"] += 1
                return
            dsts = [d]
        for d in dsts:
            start = max(now + self.delay_s, self.free[d])
            at = start + (len(frame) / self.rates[d] if self.rates[d] > 0 else 0.0)
            self.free[d] = at
            self.seq += 1
            heapq.heappush(self.heap, (at, self.seq, d, frame))
        self.stats["queued_max"] = max(self.stats["queued_max"], len(self.heap))

    def deliver_due(self, now: float) -> None:
        while self.heap and self.heap[0][0] <= now:
            at, _, d, frame = heapq.heappop(self.heap)
            try:
                os.write(self.fds[d], frame)
            except OSError:
                self.stats["write_errors"] += 1
                continue
            late = now - at
            self.stats["frames"] += 1
            self.stats["bytes"] += len(frame)
            self.stats["late_sum_s"] += late
            self.stats["late_max_s"] = max(self.stats["late_max_s"], late)

    def read_port(self, src: int) -> None:
        fd = self.fds[src]
        while True:
            try:
                frame = os.read(fd, FRAME_MAX)
            except OSError as e:
                if e.errno in (errno.EAGAIN, errno.EWOULDBLOCK):
                    return
                raise
            if not frame:
                return
            self.enqueue(src, frame, time.monotonic())


def serve(switch: Switch, control, out) -> None:
    """The loop: deliver what is due, sleep until the next frame is due or a port is readable."""
    ctl = control.fileno()
    fds = switch.fds
    port = {fd: r for r, fd in enumerate(fds)}
    buf = b""
    while True:
        now = time.monotonic()
        switch.deliver_due(now)
        timeout = max(0.0, switch.heap[0][0] - time.monotonic()) if switch.heap else None
        readable, _, _ = select.select([ctl, *fds], [], [], timeout)
        for fd in readable:
            if fd != ctl:
                switch.read_port(port[fd])
                continue
            data = os.read(ctl, 4096)
            if not data:
                return                              # parent gone or done: exit
            buf += data
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                _command(switch, line.decode().split(), out)


def _command(switch: Switch, words: list[str], out) -> None:
    if not words:
        return
    if words[0] == "rates":
        rates = [float(x) for x in words[1:]]
        if len(rates) != len(switch.fds) or any(r < 0 for r in rates):
            out.write(json.dumps({"error": "rates: one non-negative rate per port"}) + "\n")
        else:
            switch.rates = rates
            out.write("ok\n")
    elif words[0] == "stats":
        out.write(json.dumps(switch.stats) + "\n")
    else:
        out.write(json.dumps({"error": f"unknown command {words[0]!r}"}) + "\n")
    out.flush()


def main(argv=None) -> int:
    cfg = json.loads((argv or sys.argv[1:])[0])
    # timer slack 1 ns instead of 50 µs: select() wakes when the next frame is due, not later
    ctypes.CDLL(None).prctl(PR_SET_TIMERSLACK, ctypes.c_ulong(1), 0, 0, 0)
    # the forwarder is the network: on a busy machine it must not wait behind other processes
    # (nice −20, not a real-time class: a bug here can slow the machine down, never freeze it)
    try:
        os.nice(-20)
    except OSError:
        pass
    fds = [open_tap(ns, cfg["ifname"]) for ns in cfg["namespaces"]]
    macs = [bytes.fromhex(m.replace(":", "")) for m in cfg["macs"]]
    switch = Switch(fds, macs, cfg["delay_ms"] / 1000.0)
    print("ready", flush=True)
    serve(switch, sys.stdin, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
