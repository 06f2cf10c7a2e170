"""Checks of the testbed's network emulation itself: ICMP round-trip time and bulk TCP throughput.

This machine has no `ping` or `iperf`, so both are here (stdlib only). Run inside a rank's
namespace by the testbed (`ip netns exec NS python -m gpu_runner.netcheck ...`):

    ping ADDR [--count N]               ICMP echo (raw socket, root): prints {"rtt_s": [...]}
    sink PORT [--seconds S]             accept one TCP connection, count bytes, print the rate
    source ADDR PORT --seconds S        send zeros as fast as TCP allows for S seconds

The sink measures from its first received byte (so TCP's handshake and slow start's first round
trips count, as in a real transfer) to its last.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import struct
import sys
import time


def _checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


def ping(addr: str, count: int, interval_s: float = 0.05, timeout_s: float = 2.0) -> list[float]:
    """Round-trip times of `count` ICMP echo requests (seconds), one at a time."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.getprotobyname("icmp"))
    sock.settimeout(timeout_s)
    ident = os.getpid() & 0xFFFF
    rtts = []
    for seq in range(count):
        payload = b"optcc-netcheck".ljust(56, b".")
        header = struct.pack("!BBHHH", 8, 0, 0, ident, seq)
        packet = struct.pack("!BBHHH", 8, 0, _checksum(header + payload), ident, seq) + payload
        t0 = time.perf_counter()
        sock.sendto(packet, (addr, 0))
        while True:
            data, _ = sock.recvfrom(2048)
            t1 = time.perf_counter()
            ihl = (data[0] & 0x0F) * 4
            typ, _, _, rid, rseq = struct.unpack("!BBHHH", data[ihl:ihl + 8])
            if typ == 0 and rid == ident and rseq == seq:
                rtts.append(t1 - t0)
                break
        time.sleep(interval_s)
    sock.close()
    return rtts


def sink(port: int, timeout_s: float) -> dict:
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(1)
    srv.settimeout(timeout_s)
    conn, _ = srv.accept()
    conn.settimeout(timeout_s)
    total, first, last = 0, None, None
    while True:
        data = conn.recv(1 << 20)
        if not data:
            break
        now = time.perf_counter()
        if first is None:
            first = now
        total += len(data)
        last = now
    conn.close()
    srv.close()
    span = (last - first) if first is not None and last > first else 0.0
    return {"bytes": total, "seconds": span, "bytes_per_s": total / span if span else 0.0}


def source(addr: str, port: int, seconds: float, timeout_s: float) -> dict:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            conn = socket.create_connection((addr, port), timeout=timeout_s)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    chunk = bytes(1 << 16)
    sent = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        conn.sendall(chunk)
        sent += len(chunk)
    conn.close()
    return {"bytes": sent}


def _run_json(cmd: list[str], timeout_s: float) -> dict:
    import subprocess
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    if res.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[-4:])} failed: {res.stderr.strip()[-300:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def measure_link(tb, src: int, dst: int, seconds: float = 3.0, count: int = 20, port: int = 29555) -> dict:
    """On testbed `tb`: ICMP RTTs from rank src to dst, then TCP throughput src -> dst (sink-side)."""
    import statistics
    import subprocess
    # at nice −10, like the testbed's workers: on a loaded machine a starved measuring process
    # would add its own wake-up delays to the round trips it measures
    me = ["nice", "-n", "-10", sys.executable, "-m", "gpu_runner.netcheck"]
    rtts = _run_json(tb.prefix(src) + me + ["ping", tb.address(dst), "--count", str(count)],
                     30 + count)["rtt_s"]
    sink_proc = subprocess.Popen(tb.prefix(dst) + me + ["sink", str(port), "--timeout", str(seconds + 30)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _run_json(tb.prefix(src) + me + ["source", tb.address(dst), str(port), "--seconds", str(seconds)],
                  seconds + 60)
        out, err = sink_proc.communicate(timeout=seconds + 60)
    finally:
        if sink_proc.poll() is None:
            sink_proc.kill()
            sink_proc.wait()
    if sink_proc.returncode != 0:
        raise RuntimeError(f"sink failed: {err.strip()[-300:]}")
    got = json.loads(out.strip().splitlines()[-1])
    return {"rtt_s": rtts, "rtt_median_s": statistics.median(rtts), "throughput_bytes_per_s": got["bytes_per_s"],
            "bytes": got["bytes"], "seconds": got["seconds"]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gpu_runner.netcheck")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("ping")
    p.add_argument("addr")
    p.add_argument("--count", type=int, default=10)
    s = sub.add_parser("sink")
    s.add_argument("port", type=int)
    s.add_argument("--timeout", type=float, default=30.0)
    c = sub.add_parser("source")
    c.add_argument("addr")
    c.add_argument("port", type=int)
    c.add_argument("--seconds", type=float, default=3.0)
    c.add_argument("--timeout", type=float, default=30.0)
    a = ap.parse_args(argv)
    if a.cmd == "ping":
        out = {"rtt_s": ping(a.addr, a.count)}
    elif a.cmd == "sink":
        out = sink(a.port, a.timeout)
    else:
        out = source(a.addr, a.port, a.seconds, a.timeout)
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
