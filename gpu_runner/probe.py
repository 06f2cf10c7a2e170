"""`optcc probe`: measure each host's NIC send and receive bandwidth and estimate its slowdown ℓ.

Nodes (derived; nodes_of): the ranks are grouped by host name ($OPTCC_HOSTNAME, else the
hostname), each host a node of g ranks (the same g on every host, else an error naming the
hosts). All ranks on one host (a local run: no NIC between them) count as one node each, g = 1.

Exchange pattern (derived; exchange_plan): in round j = 1..N−1 (N nodes) local rank i of node n
sends `size` bytes to local rank i of node n+j and receives from local rank i of node n−j (mod N),
all at the same time: every node's NIC carries its g ranks' outgoing streams to one node and
their incoming streams from one node, so a host's NIC is what is measured, not the rate between
two ranks of one host. Each receiver times its stream from a common barrier; a node-to-node flow
takes the longest of its g streams (node_times), and runs at min(send_s, recv_d). Over the N−1
rounds each node meets every other node once as receiver and once as sender; its send rate is the
MAXIMUM over receivers of its flows' rates (equivalently the minimum time), its receive rate the
maximum over senders: a healthy node paired with the slow one is not blamed for it, as long as
it has one partner at least as fast as itself (so N ≥ 3: with two nodes either could be the slow
one, and the probe says it cannot tell). The pattern is repeated `repeats` times and the best
repetition counts: the errors are one-sided (a busy CPU, a late wake-up only ever slow a flow
down), so the maximum is the estimate and the spread (max − min)/max over the repetitions says how
noisy the machine was.
Each flow is timed at two sizes, S/4 and S, which gives the per-flow cost c that does not grow
with the size (barrier skew, gloo's receive-ready notification, one round trip of delay); its
rate is S / (T(S) − c) (derived: T(x) = c + x / rate; see flow_rates). That is one rank's share
of its host's NIC; the NIC's rate is g times it.

ℓ_n = B / min(send_n, recv_n), with B the healthy per-rank rate: `bandwidth` if given, else the
fastest node's min(send, recv) (the errors being one-sided, as above; on the testbed the median
of the healthy ranks read up to 10% low on a loaded machine). Every rank of node n gets ℓ_n.

Which nodes are stragglers (derived; see decide): a node is named slow only when its slowdown is
beyond the measured spread. The spread s is the largest (max − min)/max over the repetitions of
any node's send or receive rate: how far a rate read low here. A best rate can then be up to a
factor 1 − s below the true one, so ℓ_low = ℓ_n · (1 − s) is the smallest slowdown the samples
support; node n is a straggler (ℓ_n in the cluster JSON) iff ℓ_low ≥ `min_ell`, else it gets
ℓ = 1. With one repetition there is no spread, so no node is named (use --repeats ≥ 2).

The cluster JSON has p ranks, g per server (server s = node s), B, the measured overhead c, the
stragglers' ranks and, where the hosts are real (more than one), each slow server's host name
(`hosts`), so that a run puts that host's processes on those ranks (optcc.hosts).

Runs as `python -m gpu_runner.probe` (or `python -m gpu_runner probe`) on every rank, under
torchrun, gpu_runner.launch or the testbed; rank 0 writes the result (--result FILE) and the
cluster (--out FILE) and prints `report(result, --json)`, which `optcc probe` prints too.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from datetime import timedelta
from fractions import Fraction

from gpu_runner.hosts import host_name
from gpu_runner.watchdog import Watchdog, run_rank
from optcc.errors import OptccError


def nodes_of(hosts: list[str]) -> list[list[int]]:
    """The ranks of each node (module docstring): ranks grouped by host name in order of first
    appearance, the same number g on every host; all ranks on one host: one node per rank."""
    groups: dict[str, list[int]] = {}
    for r, h in enumerate(hosts):
        groups.setdefault(h, []).append(r)
    if len(groups) == 1:
        return [[r] for r in range(len(hosts))]
    if len({len(rs) for rs in groups.values()}) != 1:
        shown = ", ".join(f"{h}: {len(rs)}" for h, rs in groups.items())
        raise OptccError("hosts", f"the probe needs the same number of ranks on every host (got {shown})")
    return list(groups.values())


def exchange_plan(nodes: list[list[int]]) -> list[list[tuple[int, int]]]:
    """plan[j − 1][rank] = (dst, src) of round j = 1..N−1: local rank i of node n sends to local
    rank i of node n+j and receives from local rank i of node n−j (mod N), all ranks at once."""
    n_nodes, p = len(nodes), sum(len(rs) for rs in nodes)
    plan = []
    for j in range(1, n_nodes):
        pairs = [(0, 0)] * p
        for n, ranks in enumerate(nodes):
            for i, r in enumerate(ranks):
                pairs[r] = (nodes[(n + j) % n_nodes][i], nodes[(n - j) % n_nodes][i])
        plan.append(pairs)
    return plan


def node_times(t: list, nodes: list[list[int]]) -> list:
    """times[rep][src node][dst node] from the ranks' receive times t[rep][src rank][dst rank]:
    the longest of the g streams local rank i → local rank i (they ran at once through the
    nodes' NICs; the flow is done when its last stream is). The diagonal stays 0."""
    n_nodes = len(nodes)
    return [[[0.0 if a == b else max(rep[nodes[a][i]][nodes[b][i]] for i in range(len(nodes[a])))
              for b in range(n_nodes)] for a in range(n_nodes)] for rep in t]


def flow_rates(t_small, t_full, size: int) -> list:
    """rates[rep][src][dst] = size / (t_full − c) from flows timed at size//4 and size bytes, with
    c the fixed per-flow cost: the median over all flows of each flow's intercept
    t_small − (t_full − t_small)·(size//4)/(size − size//4) (derived: T(x) = c + x / rate). One c
    for all flows, so a flow's noise does not enter its own rate twice; kept within
    [0, min t_full / 2] so that noise cannot make it absurd. The diagonal stays 0."""
    p = len(t_full[0])
    flows = [(k, s, d) for k in range(len(t_full)) for s in range(p) for d in range(p) if s != d]
    c = fixed_cost(t_small, t_full, size)
    rates = [[[0.0] * p for _ in range(p)] for _ in t_full]
    for k, s, d in flows:
        rates[k][s][d] = size / (t_full[k][s][d] - c)
    return rates


def fixed_cost(t_small, t_full, size: int) -> float:
    """c of flow_rates: the median intercept over all timed flows, within [0, min t_full / 2]. On
    the testbed it is one rendezvous round trip (gloo sends only after the receiver's "ready"
    notice, and both ends post at once here) plus the stack's own per-message time."""
    small = size // 4
    p = len(t_full[0])
    flows = [(k, s, d) for k in range(len(t_full)) for s in range(p) for d in range(p) if s != d]
    c = statistics.median(t_small[k][s][d] - (t_full[k][s][d] - t_small[k][s][d]) * small / (size - small)
                          for k, s, d in flows)
    return min(max(c, 0.0), min(t_full[k][s][d] for k, s, d in flows) / 2)


def estimate(rates: list[list[list[float]]], size: int, hosts: list[str], bandwidth: float | None = None,
             min_ell: float = 1.1, fixed_cost_s: float = 0.0, ranks_of: list[list[int]] | None = None,
             name_hosts: bool = False) -> dict:
    """From rates[rep][src][dst] between nodes (bytes/s of one rank's stream in receiver-timed
    flows; the diagonal is ignored), node k on host hosts[k] holding the ranks ranks_of[k]
    (default: node k is rank k), to per-node and per-rank rates, ℓ estimates and a cluster JSON
    (Cluster.to_json format: g = ranks per node, server k = node k) whose `overhead` is the
    measured per-flow fixed cost (derived: the intercept c of T(x) = c + x/rate is paid by every
    message whatever its size, the event model's o; to the nanosecond). `name_hosts`: the cluster
    names each slow server's host (`hosts`), for placing the processes of a later run."""
    from optcc.cluster import Cluster
    n = len(hosts)
    ranks_of = ranks_of or [[k] for k in range(n)]
    g = len(ranks_of[0])
    send: list[list[float]] = [[] for _ in range(n)]
    recv: list[list[float]] = [[] for _ in range(n)]
    for rep in rates:
        for k in range(n):
            send[k].append(max(rep[k][d] for d in range(n) if d != k))
            recv[k].append(max(rep[s][k] for s in range(n) if s != k))
    send_best = [max(x) for x in send]
    recv_best = [max(x) for x in recv]
    nic = [min(a, b) for a, b in zip(send_best, recv_best)]
    healthy_rate = float(bandwidth) if bandwidth else max(nic)
    nodes = []
    for k in range(n):
        who = ", ".join(map(str, ranks_of[k]))
        nodes.append({"node": k, "host": hosts[k], "ranks": list(ranks_of[k]),
                      "name": f"{hosts[k]} (rank{'s' if g > 1 else ''} {who})" if name_hosts else
                      (who if g == 1 else f"ranks {who}"),
                      "send_bytes_per_s": g * send_best[k], "recv_bytes_per_s": g * recv_best[k],
                      "ell": max(1.0, healthy_rate / nic[k]), "send_spread": _spread(send[k]),
                      "recv_spread": _spread(recv[k])})
    verdict = decide(nodes, len(rates), min_ell)
    shared = ("ell", "send_spread", "recv_spread", "ell_low", "straggler", "decision")
    ranks = sorted(({"rank": r, "host": hosts[k], "node": k, "send_bytes_per_s": send_best[k],
                     "recv_bytes_per_s": recv_best[k], **{key: nodes[k][key] for key in shared}}
                    for k in range(n) for r in ranks_of[k]), key=lambda e: e["rank"])
    slow = [node for node in nodes if node["straggler"]]
    stragglers = {node["node"] * g + i: Fraction(str(round(node["ell"], 2))) for node in slow for i in range(g)}
    overhead = Fraction(round(max(fixed_cost_s, 0.0) * 1e9), 10**9)
    cluster = Cluster.build(n * g, g, stragglers=stragglers, bandwidth=Fraction(round(healthy_rate)),
                            overhead=overhead, hosts=[(node["node"], node["host"]) for node in slow] if name_hosts else [])
    return {"ranks": ranks, "nodes": nodes, "g": g, "cluster": cluster.to_json(), "size": size, "repeats": len(rates),
            "fixed_cost_s": fixed_cost_s,
            "healthy_bytes_per_s": healthy_rate, "bandwidth_given": bool(bandwidth), "min_ell": min_ell,
            **verdict}


def analyse(t_small: list, t_full: list, size: int, hosts: list[str], bandwidth: float | None = None,
            min_ell: float = 1.1) -> dict:
    """What rank 0 makes of the ranks' receive times t[rep][src][dst] at S/4 and S = `size`
    bytes, hosts[r] being rank r's host: nodes (nodes_of), node-to-node times (node_times), the
    fixed cost, the rates and `estimate`, hosts named where they are real (more than one)."""
    nodes = nodes_of(hosts)
    ts, tf = node_times(t_small, nodes), node_times(t_full, nodes)
    one_host = len(set(hosts)) == 1
    res = estimate(flow_rates(ts, tf, size), size, [hosts[rs[0]] for rs in nodes], bandwidth, min_ell,
                   fixed_cost(ts, tf, size), ranks_of=nodes, name_hosts=not one_host)
    res["one_host"] = one_host
    return res


def decide(ranks: list[dict], repeats: int, min_ell: float) -> dict:
    """Mark each node's (or rank's) `straggler`, `ell_low` and `decision` (rule of the module
    docstring: straggler iff ℓ · (1 − spread) ≥ min_ell, spread = the largest send/recv spread
    of any node; none from one repetition, nor among two nodes). Entries are named in the
    decision by their `name`, else their `rank`. Returns {"spread": s, "decision": one line,
    "smallest_named_ell": the smallest ℓ this run would have named, None where none}."""
    spread = max((max(r["send_spread"], r["recv_spread"]) for r in ranks), default=0.0)
    undecided = ("one repetition, no spread" if repeats < 2 else
                 "two nodes: either could be the slow one" if len(ranks) < 3 else None)
    for r in ranks:
        r["ell_low"] = r["ell"] * (1 - spread)
        if undecided:
            r["straggler"], r["decision"] = False, f"undecided: {undecided}"
        elif r["ell_low"] >= min_ell:
            r["straggler"], r["decision"] = True, f"slow: ℓ·(1 − spread) = {r['ell_low']:.3f} ≥ {min_ell:g}"
        elif r["ell"] >= min_ell:
            r["straggler"], r["decision"] = False, f"within the spread: ℓ·(1 − spread) = {r['ell_low']:.3f} < {min_ell:g}"
        else:
            r["straggler"], r["decision"] = False, f"healthy: ℓ < {min_ell:g}"
    named = [str(r.get("name", r.get("rank"))) for r in ranks if r["straggler"]]
    # the smallest slowdown this run names for sure: ℓ·(1 − s) ≥ min_ell ⇔ ℓ ≥ min_ell/(1 − s)
    smallest = min_ell / (1 - spread) if spread < 1 else float("inf")
    if repeats < 2:
        line = "no straggler named: one repetition measures no spread (use --repeats 2 or more)"
        smallest = float("inf")
    elif len(ranks) < 3:
        line = ("cannot tell: with two nodes each flow joins the same two NICs, so either could be the slow "
                "one (measure 3 hosts or more)")
        smallest = float("inf")
    elif named:
        line = (f"stragglers {', '.join(named)}: ℓ·(1 − spread) ≥ {min_ell:g} "
                f"at spread {spread:.1%}")
    else:
        line = (f"no straggler: no rank's ℓ·(1 − spread) reaches {min_ell:g} at spread {spread:.1%}; a rank "
                f"as slow as ℓ = {smallest:.2f} would have been named, below that this run cannot tell")
    return {"spread": spread, "decision": line, "smallest_named_ell": smallest if smallest != float("inf") else None}


def summary_lines(res: dict) -> list[str]:
    """The table of `report` (the JSON holds the same): the setting, one row per node, the rule,
    the decision, the overhead and the cluster written."""
    from optcc.cluster import Cluster
    from optcc.text_table import table_lines
    shaped = res.get("testbed", {}).get("shaped_ell")
    nodes, g = res["nodes"], res["g"]
    headers = ["node", "host", "ranks", "send MB/s", "±", "recv MB/s", "±", "ell", "ell·(1−s)", "slow"] + (
        ["shaped ell"] if shaped else [])
    rows = [[n["node"], n["host"], ",".join(map(str, n["ranks"])), f"{n['send_bytes_per_s'] / 1e6:.3f}",
             f"{n['send_spread']:.1%}", f"{n['recv_bytes_per_s'] / 1e6:.3f}", f"{n['recv_spread']:.1%}",
             f"{n['ell']:.3f}", f"{n['ell_low']:.3f}", "yes" if n["straggler"] else "no"]
            + ([f"{shaped[n['node']]:g}"] if shaped else []) for n in nodes]
    p = len(res["ranks"])
    if res.get("one_host"):
        layout = f"{p} ranks on one host ({nodes[0]['host']}): each rank is a node (no NIC between them)"
    else:
        layout = (f"{p} ranks on {len(nodes)} hosts, g = {g} per host"
                  + (", all ranks of a host sending at once (its NIC is measured)" if g > 1 else ""))
    b_from = "given" if res["bandwidth_given"] else ("fastest host" if g == 1 else f"fastest host's NIC / {g}")
    cluster = Cluster.from_json(res["cluster"])
    lines = [f"# {layout}; {res['repeats']} repetitions of {len(nodes) - 1} rounds, {res['size']} bytes per "
             f"stream; healthy B = {res['healthy_bytes_per_s'] / 1e6:.3f} MB/s per rank ({b_from})",
             *table_lines(headers, rows),
             f"# best of the repetitions; send/recv = the host's NIC (its {g} rank{'s' if g > 1 else ''}' streams); "
             f"± = spread (max − min) / max over them; spread s = {res['spread']:.1%} (the largest ±); "
             f"slow iff ℓ·(1 − s) ≥ {res['min_ell']:g}, else ℓ = 1 is written",
             f"# {res['decision']}",
             f"# per-message overhead o = {res.get('fixed_cost_s', 0.0) * 1e6:.1f} us (the common intercept of "
             f"the flows' times at S/4 and S), written as the cluster's overhead",
             f"# cluster: {cluster.describe()}, B = {float(cluster.bandwidth) / 1e6:.3f} MB/s"]
    if res.get("cluster_file"):
        lines.append(f"wrote {res['cluster_file']}")
    return lines


def report(res: dict, as_json: bool) -> str:
    """What `optcc probe` and `python -m gpu_runner.probe` print: the result as JSON, or its table."""
    from optcc.jsonout import dumps
    return dumps(res, indent=2) if as_json else "\n".join(summary_lines(res))


def _spread(xs: list[float]) -> float:
    return (max(xs) - min(xs)) / max(xs) if len(xs) > 1 else 0.0


def worker_args(size: int, repeats: int, bandwidth: float | None, min_ell: float, extra=()) -> list[str]:
    args = ["--size", str(size), "--repeats", str(repeats), "--min-ell", str(min_ell), *extra]
    return args + (["--bandwidth", str(bandwidth)] if bandwidth else [])


def probe_local(nproc: int, size: int, repeats: int, timeout_s: float, bandwidth: float | None = None,
                min_ell: float = 1.1, extra=()) -> dict:
    """The probe on `nproc` local processes (gpu_runner.launch); rank 0's result."""
    from gpu_runner.launch import launch
    res = launch(nproc, ["probe", *worker_args(size, repeats, bandwidth, min_ell, extra)], timeout_s)
    if not res.ok:
        raise OptccError("probe", "the probe failed: " + res.describe_failure())
    return res.result


def probe_testbed(p: int, stragglers: dict, rate_mbit: float, size: int, repeats: int, timeout_s: float,
                  delay_ms: float | None = None, bandwidth: float | None = None, min_ell: float = 1.1,
                  extra=(), per_node: int = 1, tag: str | None = None) -> dict:
    """The probe on the shaped testbed (root): p ranks, `per_node` in each namespace (node), node
    k's link at rate_mbit / ℓ_k both ways (`stragglers`: node -> ℓ; node = rank when per_node = 1)."""
    from gpu_runner.testbed import Testbed, measure, require_root
    require_root()
    if per_node < 1 or p % per_node or p // per_node < 2:
        raise OptccError("per_node", f"{p} ranks do not make 2 or more nodes of {per_node}")
    n = p // per_node
    rates = [rate_mbit / float(stragglers.get(k, 1)) for k in range(n)]
    with Testbed(n, tag=tag, delay_ms=delay_ms) as tb:
        tb.shape(rates)
        try:
            res = measure(tb, ["probe", *worker_args(size, repeats, bandwidth, min_ell, extra)], timeout_s,
                          per_node=per_node)
        except OptccError as e:
            raise OptccError("probe", "the probe failed: " + e.message.removeprefix("a run failed: ")) from None
    res["testbed"] = {"rate_mbit": rate_mbit, "delay_ms": delay_ms, "ranks_per_node": per_node,
                      "shaped_ell": [float(stragglers.get(k, 1)) for k in range(n)]}
    return res


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m gpu_runner.probe",
                                 description="Measure each rank's send/receive bandwidth (torchrun or optcc probe).")
    ap.add_argument("--size", type=int, default=1 << 20, help="bytes per timed stream (default 1 MiB)")
    ap.add_argument("--repeats", type=int, default=3, help="times the p−1 rounds are repeated (default 3)")
    ap.add_argument("--bandwidth", type=float, help="healthy rate in bytes/s (default: the fastest rank's)")
    ap.add_argument("--min-ell", type=float, default=1.1, help="ℓ below this counts as healthy (default 1.1)")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for a peer (default 60)")
    ap.add_argument("--result", metavar="FILE", help="rank 0 writes the JSON result here")
    ap.add_argument("--out", metavar="FILE", help="rank 0 writes the cluster JSON here")
    ap.add_argument("--json", action="store_true", help="rank 0 prints the JSON result")
    ap.add_argument("--inject-fault", help=argparse.SUPPRESS)      # tests: die:RANK or hang:RANK
    return ap


def main(argv=None) -> int:
    return run_rank("optcc-probe", _main, build_parser().parse_args(argv))


def _main(args, rank: int) -> int:
    import torch
    import torch.distributed as dist
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world < 2:
        raise ValueError("the probe needs at least 2 ranks")
    watchdog = Watchdog(rank, args.timeout, label="optcc-probe")
    watchdog.phase("the process group to form (rendezvous with every rank)")
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.timeout))
    hosts: list = [None] * world
    dist.all_gather_object(hosts, host_name())
    watchdog.beat()
    plan = exchange_plan(nodes_of(hosts))        # the same on every rank, or the same error on every rank
    sync = torch.zeros(1)
    out_buf = torch.ones(args.size, dtype=torch.uint8)
    in_buf = torch.empty(args.size, dtype=torch.uint8)
    times = torch.zeros(2, args.repeats, world, world, dtype=torch.float64)   # [small/full, rep, src, dst]

    def timed(j: int, nbytes: int) -> float:
        dst, src = plan[j - 1][rank]
        watchdog.waiting(f"the barrier before round {j}")
        dist.all_reduce(sync)
        watchdog.beat()
        if args.inject_fault:
            _inject(args.inject_fault, rank, watchdog)
        t0 = time.perf_counter()
        send = dist.isend(out_buf[:nbytes], dst)
        recv = dist.irecv(in_buf[:nbytes], src)
        watchdog.waiting(lambda: f"{nbytes} bytes from rank {src} (round {j})")
        recv.wait()
        took = time.perf_counter() - t0
        watchdog.waiting(lambda: f"the send of {nbytes} bytes to rank {dst} (round {j})")
        send.wait()
        watchdog.beat()
        return took

    for rep in range(-1, args.repeats):          # rep −1: warm-up (connections, TCP windows)
        for j in range(1, len(plan) + 1):
            src = plan[j - 1][rank][1]
            t_small = timed(j, args.size // 4)
            t_full = timed(j, args.size)
            if rep >= 0:
                times[0, rep, src, rank] = t_small
                times[1, rep, src, rank] = t_full
    watchdog.waiting("gathering the timings")
    dist.all_reduce(times)                       # each rank filled its own column
    watchdog.beat()
    if rank == 0:
        t_small, t_full = times.tolist()
        res = analyse(t_small, t_full, args.size, hosts, args.bandwidth, args.min_ell)
        _write(args, res)
    watchdog.phase("shutdown")
    dist.barrier()
    watchdog.disable()
    dist.destroy_process_group()
    return 0


def _write(args, res: dict) -> None:
    from optcc.jsonout import dumps
    if args.out:
        res["cluster_file"] = args.out
    for path, obj in ((args.result, res), (args.out, res["cluster"])):
        if path:
            tmp = path + ".tmp"
            with open(tmp, "w") as fh:
                fh.write(dumps(obj, indent=2) + "\n")
            os.replace(tmp, path)
    print(report(res, args.json), flush=True)


def _inject(spec: str, rank: int, watchdog) -> None:
    kind, who = spec.split(":")
    if int(who) != rank:
        return
    if kind == "die":
        os._exit(17)
    watchdog.disable()
    time.sleep(3600)


if __name__ == "__main__":
    sys.exit(main())
