"""`optcc probe`: measure each rank's NIC send and receive bandwidth and estimate its slowdown ℓ.

Exchange pattern (derived): in round j = 1..p−1 every rank r sends `size` bytes to r+j and
receives from r−j (mod p) at the same time, so each NIC carries exactly one outgoing and one
incoming stream. The receiver times its stream from a common barrier, so the flow s→d runs at
min(send_s, recv_d). Over the p−1 rounds each rank meets every other rank once as receiver and
once as sender; its send rate is the MAXIMUM over receivers of its flows' rates (equivalently the
minimum time), its receive rate the maximum over senders: a healthy rank paired with the slow
one is not blamed for it, as long as the rank has one partner at least as fast as itself (so
p ≥ 3: with two ranks either could be the slow one). The
pattern is repeated `repeats` times and the best repetition counts: the errors are one-sided (a
busy CPU, a late wake-up only ever slow a flow down), so the maximum is the estimate and the
spread (max − min)/max over the repetitions says how noisy the machine was.
Each flow is timed at two sizes, S/4 and S, which gives the per-flow cost c that does not grow
with the size (barrier skew, gloo's receive-ready notification, one round trip of delay); its
rate is S / (T(S) − c) (derived: T(x) = c + x / rate; see flow_rates).

ℓ_r = B / min(send_r, recv_r), with B the healthy rate: `bandwidth` if given, else the fastest
rank's min(send, recv) (the errors being one-sided, as above; on the testbed the median of the
healthy ranks read up to 10% low on a loaded machine).

Which ranks are stragglers (derived; see decide): a rank is named slow only when its slowdown is
beyond the measured spread. The spread s is the largest (max − min)/max over the repetitions of
any rank's send or receive rate: how far a rate read low here. A best rate can then be up to a
factor 1 − s below the true one, so ℓ_low = ℓ_r · (1 − s) is the smallest slowdown the samples
support; rank r is a straggler (ℓ_r in the cluster JSON) iff ℓ_low ≥ `min_ell`, else it gets
ℓ = 1. With one repetition there is no spread, so no rank is named (use --repeats ≥ 2).

Runs as `python -m gpu_runner.probe` (or `python -m gpu_runner probe`) on every rank, under
torchrun, gpu_runner.launch or the testbed; rank 0 writes the result (--result FILE) and/or prints it (--json).
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import time
from datetime import timedelta
from fractions import Fraction

from gpu_runner.watchdog import Watchdog, run_rank


def host_name() -> str:
    """This rank's host: $OPTCC_HOSTNAME if set (tests and the testbed name hosts), else the hostname."""
    return os.environ.get("OPTCC_HOSTNAME") or socket.gethostname()


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
             min_ell: float = 1.1, fixed_cost_s: float = 0.0) -> dict:
    """From rates[rep][src][dst] (bytes/s of receiver-timed flows; the diagonal is ignored) to
    per-rank send/receive rates, ℓ estimates and a cluster JSON (Cluster.to_json format) whose
    `overhead` is the measured per-flow fixed cost (derived: the intercept c of T(x) = c + x/rate
    is paid by every message whatever its size, the event model's o; to the nanosecond)."""
    from optcc.cluster import Cluster
    p = len(hosts)
    send = [[] for _ in range(p)]
    recv = [[] for _ in range(p)]
    for rep in rates:
        for r in range(p):
            send[r].append(max(rep[r][d] for d in range(p) if d != r))
            recv[r].append(max(rep[s][r] for s in range(p) if s != r))
    send_best = [max(x) for x in send]
    recv_best = [max(x) for x in recv]
    nic = [min(a, b) for a, b in zip(send_best, recv_best)]
    healthy_rate = float(bandwidth) if bandwidth else max(nic)
    ranks = []
    for r in range(p):
        ranks.append({"rank": r, "host": hosts[r], "send_bytes_per_s": send_best[r],
                      "recv_bytes_per_s": recv_best[r], "ell": max(1.0, healthy_rate / nic[r]),
                      "send_spread": _spread(send[r]), "recv_spread": _spread(recv[r])})
    verdict = decide(ranks, len(rates), min_ell)
    stragglers = {r["rank"]: Fraction(str(round(r["ell"], 2))) for r in ranks if r["straggler"]}
    overhead = Fraction(round(max(fixed_cost_s, 0.0) * 1e9), 10**9)
    cluster = Cluster.build(p, stragglers=stragglers, bandwidth=Fraction(round(healthy_rate)), overhead=overhead)
    return {"ranks": ranks, "cluster": cluster.to_json(), "size": size, "repeats": len(rates),
            "fixed_cost_s": fixed_cost_s,
            "healthy_bytes_per_s": healthy_rate, "bandwidth_given": bool(bandwidth), "min_ell": min_ell,
            **verdict}


def decide(ranks: list[dict], repeats: int, min_ell: float) -> dict:
    """Mark each rank's `straggler`, `ell_low` and `decision` (rule of the module docstring:
    straggler iff ℓ · (1 − spread) ≥ min_ell, spread = the largest send/recv spread of any rank;
    no straggler from one repetition). Returns {"spread": s, "decision": one line}."""
    spread = max((max(r["send_spread"], r["recv_spread"]) for r in ranks), default=0.0)
    for r in ranks:
        r["ell_low"] = r["ell"] * (1 - spread)
        if repeats < 2:
            r["straggler"], r["decision"] = False, "undecided: one repetition, no spread"
        elif r["ell_low"] >= min_ell:
            r["straggler"], r["decision"] = True, f"slow: ℓ·(1 − spread) = {r['ell_low']:.3f} ≥ {min_ell:g}"
        elif r["ell"] >= min_ell:
            r["straggler"], r["decision"] = False, f"within the spread: ℓ·(1 − spread) = {r['ell_low']:.3f} < {min_ell:g}"
        else:
            r["straggler"], r["decision"] = False, f"healthy: ℓ < {min_ell:g}"
    named = [r["rank"] for r in ranks if r["straggler"]]
    # the smallest slowdown this run names for sure: ℓ·(1 − s) ≥ min_ell ⇔ ℓ ≥ min_ell/(1 − s)
    smallest = min_ell / (1 - spread) if spread < 1 else float("inf")
    if repeats < 2:
        line = "no straggler named: one repetition measures no spread (use --repeats 2 or more)"
        smallest = float("inf")
    elif named:
        line = (f"stragglers {', '.join(map(str, named))}: ℓ·(1 − spread) ≥ {min_ell:g} "
                f"at spread {spread:.1%}")
    else:
        line = (f"no straggler: no rank's ℓ·(1 − spread) reaches {min_ell:g} at spread {spread:.1%}; a rank "
                f"as slow as ℓ = {smallest:.2f} would have been named, below that this run cannot tell")
    return {"spread": spread, "decision": line, "smallest_named_ell": smallest if smallest != float("inf") else None}


def summary_lines(res: dict) -> list[str]:
    """What `optcc probe` and `python -m gpu_runner.probe` print without --json (the JSON holds
    the same): the setting, one row per rank, the rule, the decision, the overhead written."""
    from optcc.text_table import table_lines
    shaped = res.get("testbed", {}).get("shaped_ell")
    headers = ["rank", "host", "send MB/s", "±", "recv MB/s", "±", "ell", "ell·(1−s)", "slow"] + (
        ["shaped ell"] if shaped else [])
    rows = [[r["rank"], r["host"], f"{r['send_bytes_per_s'] / 1e6:.3f}", f"{r['send_spread']:.1%}",
             f"{r['recv_bytes_per_s'] / 1e6:.3f}", f"{r['recv_spread']:.1%}", f"{r['ell']:.3f}",
             f"{r['ell_low']:.3f}", "yes" if r["straggler"] else "no"]
            + ([f"{shaped[r['rank']]:g}"] if shaped else []) for r in res["ranks"]]
    return [f"# {len(res['ranks'])} ranks, {res['repeats']} repetitions of {len(res['ranks']) - 1} rounds, "
            f"{res['size']} bytes per stream; healthy B = {res['healthy_bytes_per_s'] / 1e6:.3f} MB/s "
            f"({'given' if res['bandwidth_given'] else 'fastest rank'})",
            *table_lines(headers, rows),
            f"# best of the repetitions; ± = spread (max − min) / max over them; spread s = {res['spread']:.1%} "
            f"(the largest ±); slow iff ℓ·(1 − s) ≥ {res['min_ell']:g}, else ℓ = 1 is written",
            f"# {res['decision']}",
            f"# per-message overhead o = {res.get('fixed_cost_s', 0.0) * 1e6:.1f} us (the common intercept of "
            f"the flows' times at S/4 and S), written as the cluster's overhead"]


def _spread(xs: list[float]) -> float:
    return (max(xs) - min(xs)) / max(xs) if len(xs) > 1 else 0.0


def worker_args(size: int, repeats: int, bandwidth: float | None, min_ell: float, extra=()) -> list[str]:
    args = ["--size", str(size), "--repeats", str(repeats), "--min-ell", str(min_ell), *extra]
    return args + (["--bandwidth", str(bandwidth)] if bandwidth else [])


def probe_local(nproc: int, size: int, repeats: int, timeout_s: float, bandwidth: float | None = None,
                min_ell: float = 1.1, extra=()) -> dict:
    """The probe on `nproc` local processes (gpu_runner.launch); rank 0's result."""
    from gpu_runner.launch import launch
    from optcc.errors import OptccError
    res = launch(nproc, ["probe", *worker_args(size, repeats, bandwidth, min_ell, extra)], timeout_s)
    if not res.ok:
        raise OptccError("probe", "the probe failed: " + res.describe_failure())
    return res.result


def probe_testbed(p: int, stragglers: dict, rate_mbit: float, size: int, repeats: int, timeout_s: float,
                  delay_ms: float | None = None, bandwidth: float | None = None, min_ell: float = 1.1,
                  extra=()) -> dict:
    """The probe on the shaped testbed (root): rank r's link at rate_mbit / ℓ_r both ways."""
    from gpu_runner.testbed import Testbed, measure, require_root
    from optcc.errors import OptccError
    require_root()
    rates = [rate_mbit / float(stragglers.get(r, 1)) for r in range(p)]
    with Testbed(p, delay_ms=delay_ms) as tb:
        tb.shape(rates)
        try:
            res = measure(tb, ["probe", *worker_args(size, repeats, bandwidth, min_ell, extra)], timeout_s)
        except OptccError as e:
            raise OptccError("probe", "the probe failed: " + e.message.removeprefix("a run failed: ")) from None
    res["testbed"] = {"rate_mbit": rate_mbit, "delay_ms": delay_ms,
                      "shaped_ell": [float(stragglers.get(r, 1)) for r in range(p)]}
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
    hosts = [None] * world
    dist.all_gather_object(hosts, host_name())
    watchdog.beat()
    sync = torch.zeros(1)
    out_buf = torch.ones(args.size, dtype=torch.uint8)
    in_buf = torch.empty(args.size, dtype=torch.uint8)
    times = torch.zeros(2, args.repeats, world, world, dtype=torch.float64)   # [small/full, rep, src, dst]

    def timed(j: int, nbytes: int) -> float:
        dst, src = (rank + j) % world, (rank - j) % world
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
        for j in range(1, world):
            t_small = timed(j, args.size // 4)
            t_full = timed(j, args.size)
            if rep >= 0:
                times[0, rep, (rank - j) % world, rank] = t_small
                times[1, rep, (rank - j) % world, rank] = t_full
    watchdog.waiting("gathering the timings")
    dist.all_reduce(times)                       # each rank filled its own column
    watchdog.beat()
    if rank == 0:
        t_small, t_full = times.tolist()
        res = estimate(flow_rates(t_small, t_full, args.size), args.size, hosts, args.bandwidth, args.min_ell,
                       fixed_cost(t_small, t_full, args.size))
        _write(args, res)
    watchdog.phase("shutdown")
    dist.barrier()
    watchdog.disable()
    dist.destroy_process_group()
    return 0


def _write(args, res: dict) -> None:
    for path, obj in ((args.result, res), (args.out, res["cluster"])):
        if path:
            tmp = path + ".tmp"
            with open(tmp, "w") as fh:
                json.dump(obj, fh, indent=2)
            os.replace(tmp, path)
    if args.json:
        print(json.dumps(res))
    elif not args.result:              # a person under torchrun: the table optcc probe prints
        print("\n".join(summary_lines(res)), flush=True)


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
