"""Shaped-network testbed: real asymmetric bandwidth between ranks, not a simulation (root only).

Layout (DESIGN.md, "Runner"): one hub network namespace holding a bridge, and one namespace per
rank joined to it by a veth pair created directly inside the namespaces (nothing is added to
the machine's own namespace). Each rank's link is shaped in BOTH directions with tc tbf: the
rank-side egress limits what it sends, the hub-side egress what it receives; healthy rate B,
straggler rate B/ℓ. Addresses come from the benchmark range 198.18.0.0/15 only. gloo runs over
TCP between the namespaces (GLOO_SOCKET_IFNAME=eth0).

With a one-way delay (`delay_ms`, no netem in this kernel) the veth pairs and the bridge are
replaced by one TAP device per rank namespace and gpu_runner/tap_forwarder.py, a process in the
hub namespace that switches frames between the TAPs with the delay and paces each rank's receive
direction at its rate; tbf still shapes each rank's egress (on its TAP).

Everything created is removed on exit, also on Ctrl-C, SIGTERM or failure: deleting a namespace
deletes its veth end or TAP, the bridge goes with the hub namespace, and the forwarder (in the
hub namespace, reading its stdin) is stopped first. `remove_stale(prefix)` clears leftovers of a
killed run by name prefix.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import select
import subprocess
import sys
import tempfile
from fractions import Fraction

from optcc.errors import OptccError

SUBNET = "198.18.0"          # 198.18.0.0/24, inside the benchmark range 198.18.0.0/15 (RFC 2544)
TCP_BUFFER = int(os.environ.get("OPTCC_TESTBED_TCP_BUFFER", 32 * 1024))   # bytes, per socket
TBF_LIMIT_BYTES = 8 << 20    # tbf queue: larger than any TCP window here, so shaping delays, never drops
TAP_MTU = 9000               # jumbo frames: 6x fewer frames for the user-space forwarder to move
FORWARDER_START_S = 30.0
WORKER_NICE = -10


def _sh(*cmd, check=True):
    res = subprocess.run(cmd, capture_output=True, text=True)
    if check and res.returncode != 0:
        raise OptccError("testbed", f"`{' '.join(cmd)}` failed: {res.stderr.strip() or res.stdout.strip()}")
    return res


def require_root() -> None:
    if os.geteuid() != 0:
        raise OptccError("testbed", "needs root (it creates network namespaces and tc rate limits)")
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            raise OptccError("testbed", f"needs the `{tool}` command (iproute2)")


def tbf_args(rate_mbit: float) -> list[str]:
    """tbf parameters: rate, a burst of ~2 ms at that rate (≥ 16 KiB), a deep queue (no drops:
    a tail drop costs TCP a 200 ms retransmission timeout, which would measure TCP, not bandwidth)."""
    rate_bps = rate_mbit * 1e6
    burst = max(16 * 1024, int(rate_bps / 8 * 0.002))
    return ["rate", f"{rate_mbit}mbit", "burst", str(burst), "limit", str(TBF_LIMIT_BYTES)]


class Testbed:
    """Context manager: `with Testbed(p) as tb: tb.shape(rates); tb.prefix(rank) ...`."""

    def __init__(self, p: int, tag: str | None = None, delay_ms: float | None = None):
        if not 2 <= p <= 200:
            raise OptccError("p", f"the testbed takes 2 ≤ p ≤ 200 ranks, got {p}")
        if delay_ms is not None and not 0 <= delay_ms <= 10_000:
            raise OptccError("delay_ms", f"expected 0 ≤ delay ≤ 10000 ms, got {delay_ms}")
        self.p = p
        self.tag = tag or f"otb{os.getpid() % 100000}"
        self.hub = f"{self.tag}h"
        self.namespaces = [f"{self.tag}r{r}" for r in range(p)]
        self.delay_ms = delay_ms
        self.created: list[str] = []
        self.forwarder: subprocess.Popen | None = None
        self._old_term = None

    def address(self, rank: int) -> str:
        return f"{SUBNET}.{rank + 1}"

    def prefix(self, rank: int) -> list[str]:
        return ["ip", "netns", "exec", self.namespaces[rank]]

    def hub_port(self, rank: int) -> str:
        return f"{self.tag}v{rank}"

    def __enter__(self):
        self._old_term = signal.getsignal(signal.SIGTERM)
        signal.signal(signal.SIGTERM, _raise_interrupt)
        try:
            self._create()
        except BaseException:
            self.remove()
            raise
        return self

    def __exit__(self, *exc):
        self.remove()
        return False

    def _create(self):
        require_root()
        for ns in [self.hub, *self.namespaces]:
            if ns in list_namespaces():
                raise OptccError("testbed", f"network namespace {ns} already exists; remove it first")
        _sh("ip", "netns", "add", self.hub)
        self.created.append(self.hub)
        _sh("ip", "-n", self.hub, "link", "set", "lo", "up")
        if self.delay_ms is None:
            _sh("ip", "-n", self.hub, "link", "add", "br0", "type", "bridge")
            _sh("ip", "-n", self.hub, "link", "set", "br0", "up")
        for r, ns in enumerate(self.namespaces):
            _sh("ip", "netns", "add", ns)
            self.created.append(ns)
            if self.delay_ms is None:
                # both veth ends are created inside namespaces: nothing appears on the host
                _sh("ip", "-n", self.hub, "link", "add", self.hub_port(r), "type", "veth",
                    "peer", "name", "eth0", "netns", ns)
                _sh("ip", "-n", self.hub, "link", "set", self.hub_port(r), "master", "br0", "up")
            else:
                _sh("ip", "-n", ns, "tuntap", "add", "dev", "eth0", "mode", "tap")
                _sh("ip", "-n", ns, "link", "set", "eth0", "address", self.mac(r), "mtu", str(TAP_MTU),
                    "txqueuelen", "10000")
                _sh("ip", "netns", "exec", ns, "sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1",
                    check=False)
            _sh("ip", "-n", ns, "link", "set", "lo", "up")
            # per-namespace sysctl: no TCP slow-start restart between a pair's successive flows
            _sh("ip", "netns", "exec", ns, "sysctl", "-q", "-w", "net.ipv4.tcp_slow_start_after_idle=0",
                check=False)
            # small socket buffers: at most TCP_BUFFER bytes of one connection wait in a tbf queue,
            # so a peer's small control message is not delayed behind megabytes of bulk data
            for key in ("net.ipv4.tcp_wmem", "net.ipv4.tcp_rmem"):
                _sh("ip", "netns", "exec", ns, "sysctl", "-q", "-w",
                    f"{key}=4096 {TCP_BUFFER} {TCP_BUFFER}", check=False)
            _sh("ip", "-n", ns, "addr", "add", f"{self.address(r)}/24", "dev", "eth0")
            _sh("ip", "-n", ns, "link", "set", "eth0", "up")
        if self.delay_ms is not None:
            self._start_forwarder()

    def mac(self, rank: int) -> str:
        from gpu_runner.tap_forwarder import mac_of
        return ":".join(f"{b:02x}" for b in mac_of(rank, sum(self.tag.encode())))

    def _start_forwarder(self) -> None:
        cfg = {"namespaces": self.namespaces, "ifname": "eth0", "delay_ms": self.delay_ms,
               "macs": [self.mac(r) for r in range(self.p)]}
        self.forwarder = subprocess.Popen(
            ["ip", "netns", "exec", self.hub, sys.executable, "-m", "gpu_runner.tap_forwarder", json.dumps(cfg)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True)
        line = self._forwarder_line(FORWARDER_START_S)
        if line != "ready":
            raise OptccError("testbed", f"the TAP forwarder did not start: {line or self._forwarder_error()}")

    def _forwarder_line(self, timeout_s: float) -> str:
        ready, _, _ = select.select([self.forwarder.stdout], [], [], timeout_s)
        return self.forwarder.stdout.readline().strip() if ready else ""

    def _forwarder_error(self) -> str:
        if self.forwarder.poll() is None:
            return "no answer"
        return (self.forwarder.stderr.read().strip().splitlines() or ["exited"])[-1]

    def forwarder_command(self, line: str, timeout_s: float = 10.0) -> str:
        if self.forwarder is None or self.forwarder.poll() is not None:
            raise OptccError("testbed", "the TAP forwarder is not running: " +
                             (self._forwarder_error() if self.forwarder else "never started"))
        self.forwarder.stdin.write(line + "\n")
        self.forwarder.stdin.flush()
        answer = self._forwarder_line(timeout_s)
        if not answer or answer.startswith('{"error"'):
            raise OptccError("testbed", f"TAP forwarder: {answer or 'no answer to ' + line.split()[0]}")
        return answer

    def forwarder_stats(self) -> dict:
        return json.loads(self.forwarder_command("stats"))

    def _stop_forwarder(self) -> None:
        fw, self.forwarder = self.forwarder, None
        if fw is None:
            return
        try:
            fw.stdin.close()               # EOF: the forwarder exits by itself
        except OSError:
            pass
        try:
            fw.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(fw.pid, signal.SIGKILL)
            fw.wait(timeout=10)
        for stream in (fw.stdout, fw.stderr):
            stream.close()

    def shape(self, rates_mbit: list[float]) -> None:
        """Rate-limit rank r's link to rates_mbit[r] in both directions (tbf)."""
        if len(rates_mbit) != self.p:
            raise ValueError("one rate per rank")
        for r, rate in enumerate(rates_mbit):
            ports = [(self.namespaces[r], "eth0")]
            if self.delay_ms is None:
                ports.append((self.hub, self.hub_port(r)))
            for ns, dev in ports:
                _sh("ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", dev,
                    "root", "tbf", *tbf_args(rate))
        if self.delay_ms is not None:
            # the receive direction: paced by the forwarder; socket buffers cover the delay
            self.forwarder_command("rates " + " ".join(str(r * 1e6 / 8) for r in rates_mbit))
            buf = tcp_buffer_for(max(rates_mbit), self.delay_ms)
            for ns in self.namespaces:
                for key in ("net.ipv4.tcp_wmem", "net.ipv4.tcp_rmem"):
                    _sh("ip", "netns", "exec", ns, "sysctl", "-q", "-w", f"{key}=4096 {buf} {buf}", check=False)

    def dropped_packets(self) -> int:
        """Packets dropped by all our tbf qdiscs so far (should stay 0)."""
        total = 0
        cmds = [(ns, "eth0") for ns in self.namespaces] + [(self.hub, self.hub_port(r)) for r in range(self.p)]
        for ns, dev in cmds:
            out = _sh("ip", "netns", "exec", ns, "tc", "-s", "qdisc", "show", "dev", dev, check=False).stdout
            for word_list in (line.split() for line in out.splitlines()):
                if "dropped" in word_list:
                    total += int(word_list[word_list.index("dropped") + 1].rstrip(","))
        return total

    def remove(self) -> None:
        """Stop the forwarder, kill anything left in our namespaces (our own workers), delete them."""
        self._stop_forwarder()
        for ns in reversed(self.created):
            pids = _sh("ip", "netns", "pids", ns, check=False).stdout.split()
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
            _sh("ip", "netns", "del", ns, check=False)
        self.created = []
        if self._old_term is not None:
            signal.signal(signal.SIGTERM, self._old_term)
            self._old_term = None


def tcp_buffer_for(rate_mbit: float, delay_ms: float) -> int:
    """Socket buffer with a delay (derived): 4× the bandwidth-delay product of a round trip
    (2·D plus one jumbo frame's serialisation each way), at least TCP_BUFFER; TCP advertises about
    half its receive buffer, so 2× would only just fill the pipe."""
    rate_bps = rate_mbit * 1e6 / 8
    rtt = 2 * delay_ms / 1000 + 2 * TAP_MTU / rate_bps
    return max(TCP_BUFFER, int(4 * rate_bps * rtt))


def remove_stale(prefix: str) -> list[str]:
    """Delete leftover namespaces whose name starts with `prefix` (a killed run's), after killing
    what runs in them; returns their names."""
    gone = []
    for ns in list_namespaces():
        if ns.startswith(prefix):
            for pid in _sh("ip", "netns", "pids", ns, check=False).stdout.split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
            _sh("ip", "netns", "del", ns, check=False)
            gone.append(ns)
    return gone


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def list_namespaces() -> list[str]:
    out = _sh("ip", "netns", "list", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def measure(tb: Testbed, worker_args: list, timeout_s: float, per_node: int = 1) -> dict:
    """Run the workers inside the namespaces (rank 0's address hosts the rendezvous); rank 0's JSON.
    `per_node` ranks share each namespace (a node: its one shaped link is their NIC), ranks
    k·per_node .. k·per_node + per_node − 1 in namespace k, with LOCAL_RANK and LOCAL_WORLD_SIZE
    set as torchrun sets them on that node. Each rank's OPTCC_HOSTNAME is its namespace's name
    (the namespaces share the machine's hostname).
    Workers run at nice −10 (WORKER_NICE): they emulate dedicated hosts, so on a shared machine
    they should not queue behind unrelated processes (the forwarder, the network, runs at −20)."""
    from gpu_runner.launch import launch
    res = launch(tb.p * per_node, worker_args, timeout_s, master_addr=tb.address(0), master_port=29400,
                 prefix=lambda r: [*tb.prefix(r // per_node), "nice", "-n", str(WORKER_NICE), "env",
                                   f"OPTCC_HOSTNAME={tb.namespaces[r // per_node]}"],
                 env_extra=lambda r: {"GLOO_SOCKET_IFNAME": "eth0", "LOCAL_RANK": str(r % per_node),
                                      "LOCAL_WORLD_SIZE": str(per_node)},
                 wall_limit_s=timeout_s * 10)
    if not res.ok:
        raise OptccError("testbed", "a run failed: " + res.describe_failure())
    return res.result


def run_testbed(p: int, straggler: int, ell: Fraction, rate_mbit: float, size: int, segments: int,
                iters: int = 2, warmup: int = 1, timeout_s: float = 120.0, plot: str | None = None,
                with_ring: bool = True, log=None, delay_ms: float | None = None, runner: str = "streaming") -> dict:
    """Measure torch all_reduce (fault-free, straggler), OptCC (straggler), optionally our ring;
    OptCC and our ring run on the executor `runner` ('streaming' or 'step')."""
    from bounds.closed_form import fault_free_optimum, lower_bound
    from gpu_runner.launch import prepare_schedule, worker_certificate
    from optcc.algorithms import build_schedule
    from optcc.cluster import Cluster
    from optcc.timing import slot_time, units_to_seconds

    require_root()
    if not 0 <= straggler < p:
        raise OptccError("straggler", f"rank {straggler} is out of range 0..{p - 1}")
    bandwidth = Fraction(str(rate_mbit)) * 10**6 / 8        # bytes/s of a healthy link
    cluster = Cluster.build(p, stragglers={straggler: ell}, bandwidth=bandwidth)
    healthy_rates = [rate_mbit] * p
    straggler_rates = list(healthy_rates)
    straggler_rates[straggler] = rate_mbit / float(ell)
    log = log or (lambda msg: None)
    lb_s = units_to_seconds(cluster, lower_bound(cluster), size)
    t0_s = units_to_seconds(cluster, fault_free_optimum(p), size)
    common = ["--mode", "run", "--size", str(size), "--dtype", "float32", "--iters", str(iters),
              "--warmup", str(warmup), "--backend", "gloo"]
    runs = {}
    with tempfile.TemporaryDirectory(prefix="optcc-testbed-") as tmp:
        schedules = {}
        for algo in (["optcc", "ring"] if with_ring else ["optcc"]):
            s = build_schedule(algo, cluster, segments if algo == "optcc" else 1)
            path = os.path.join(tmp, f"{algo}.json")
            s.save(path)
            s, _ = prepare_schedule(path, p)
            cert_dir = os.path.join(tmp, algo)
            os.mkdir(cert_dir)
            schedules[algo] = (path, s, worker_certificate(s, cert_dir))
        with Testbed(p, delay_ms=delay_ms) as tb:
            plan = [("torch fault-free", healthy_rates, ["--algo", "torch"]),
                    ("torch straggler", straggler_rates, ["--algo", "torch"]),
                    ("optcc straggler", straggler_rates,
                     ["--schedule", schedules["optcc"][0], "--certificate", schedules["optcc"][2], "--runner", runner])]
            if with_ring:
                plan.append(("ring (ours) straggler", straggler_rates,
                             ["--schedule", schedules["ring"][0], "--certificate", schedules["ring"][2],
                              "--runner", runner]))
            for name, rates, args in plan:
                tb.shape(rates)
                log(f"measuring {name} ...")
                before = tb.dropped_packets()
                out = measure(tb, args + common, timeout_s)
                drops = tb.dropped_packets() - before
                runs[name] = {"seconds": out["seconds"], "correct": out["correct"], "dropped_packets": drops}
                log(f"  {name}: {out['seconds']:.3f} s, correct={out['correct']}, tbf drops {drops}")
    ff = runs["torch fault-free"]["seconds"]
    rows = []
    for name, r in runs.items():
        rows.append({"name": name, "seconds": r["seconds"], "correct": r["correct"],
                     "dropped_packets": r["dropped_packets"],
                     "ratio_to_fault_free": r["seconds"] / ff, "ratio_to_lower_bound": r["seconds"] / lb_s})
    optcc_s = runs["optcc straggler"]["seconds"]
    torch_s = runs["torch straggler"]["seconds"]
    result = {
        "p": p, "straggler": straggler, "ell": float(ell), "rate_mbit": rate_mbit, "delay_ms": delay_ms,
        "straggler_rate_mbit": straggler_rates[straggler], "size": size, "segments": segments,
        "iters": iters, "runner": runner, "lower_bound_seconds": lb_s, "t0_seconds": t0_s,
        "optcc_schedule_seconds": units_to_seconds(cluster, slot_time(schedules["optcc"][1]), size),
        "rows": rows,
        "speedup_optcc_vs_torch": torch_s / optcc_s,
        "optcc_over_lower_bound": optcc_s / lb_s,
        "targets": {"speedup_ge_1.5": torch_s / optcc_s >= 1.5, "within_15pct_of_bound": optcc_s / lb_s <= 1.15},
    }
    if plot:
        write_chart(result, plot)
        result["plot"] = plot
    return result


def write_chart(result: dict, path: str) -> None:
    """Bar chart of the measured times with the lower bound as a line (matplotlib, Agg)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = [r["name"] for r in result["rows"]]
    secs = [r["seconds"] for r in result["rows"]]
    fig, ax = plt.subplots(figsize=(7, 4))
    colors = ["#7f7f7f", "#d62728", "#2ca02c", "#1f77b4"][:len(names)]
    bars = ax.bar(names, secs, color=colors)
    for b, s in zip(bars, secs):
        ax.text(b.get_x() + b.get_width() / 2, s, f"{s:.2f} s", ha="center", va="bottom", fontsize=9)
    ax.axhline(result["lower_bound_seconds"], color="k", linestyle="--", linewidth=1,
               label=f"lower bound {result['lower_bound_seconds']:.2f} s")
    ax.set_ylabel("AllReduce time (s)")
    ax.set_title(f"p = {result['p']}, straggler {result['straggler']} at ℓ = {result['ell']:g}, "
                 f"{result['rate_mbit']:g} Mbit/s links, {result['size'] / 2**20:g} MiB")
    ax.legend()
    plt.xticks(rotation=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
