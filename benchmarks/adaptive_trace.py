"""Step-time trace of a training job whose NIC degrades and is repaired (root: the shaped testbed).

4 nodes at --rate Mbit/s train the MLP of gpu_runner.adaptive_scenario; node 0's link runs at
rate/ℓ from step --degrade to step --restore. On one testbed, --rounds times, the runs alternate
(forward order, then backward, so a drift of the shared host's load meets every hook alike):
`default` (DDP's all-reduce) and `adaptive` (OptccHookState.adaptive with the probe's cluster)
through the whole scenario, and `static k=K` (the OptCC schedule for the degraded cluster at
each --static-k) with the links degraded throughout. Prints each step's median time per hook
over the rounds, then the phase medians over every round's steps (healthy: before the
degradation and from 3 steps after the repair; degraded: from 3 steps after the degradation to
the repair; static: every step but the first) and the ratios the issue targets: degraded
adaptive / best static ≤ 1.15, default / adaptive ≥ 1.3, healthy adaptive / default ≤ 1.1 (and
that ratio of the healthy means: a timed step costs more than an untimed one, and the median is
whichever kind is the majority).
--plot writes the trace (matplotlib). All ratios come from this one run.

    sudo python benchmarks/adaptive_trace.py --plot docs/figures/adaptive_trace.png
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def phases(n: int, degrade: int, restore: int, settle: int = 3) -> dict:
    """Step indices of each phase (the `settle` steps after a change are left out of both)."""
    return {"healthy": [s for s in range(1, n) if s < degrade or s >= restore + settle],
            "degraded": [s for s in range(degrade + settle, restore)]}


def run(args) -> dict:
    from fractions import Fraction

    from gpu_runner.adaptive_scenario import run_scenario, scenario_events, testbed_overhead
    from gpu_runner.testbed import Testbed, remove_stale
    from optcc.cluster import Cluster
    p = 4
    remove_stale(args.tag)
    events = scenario_events(p, args.rate, args.degrade, args.restore, args.ell)
    slow = events[args.degrade]
    out: dict = {"rate_mbit": args.rate, "ell": args.ell, "degrade": args.degrade, "restore": args.restore,
                 "steps": args.steps, "rounds": args.rounds, "runs": {}}
    with Testbed(p, tag=args.tag) as tb:
        tb.shape([args.rate] * p)
        probe = testbed_overhead(tb)
        out["probe_cluster"] = probe
        degraded = Cluster.from_json(probe)
        degraded = Cluster.build(p, stragglers={0: Fraction(str(args.ell))}, bandwidth=degraded.bandwidth,
                                 overhead=degraded.overhead)
        plan = [("default", dict(hook="default", steps=args.steps, events=events), [args.rate] * p),
                ("adaptive", dict(hook="adaptive", steps=args.steps, events=events, sample_bytes=args.sample_bytes,
                                      check_every=args.check_every),
                 [args.rate] * p)]
        plan += [(f"static k={k}", dict(hook="static", steps=args.static_steps, events={}, segments=k,
                                        cluster=degraded.to_json()), slow) for k in args.static_k]
        for rnd in range(args.rounds):
            for name, kw, rates in (plan if rnd % 2 == 0 else plan[::-1]):
                tb.shape(rates)
                kw = {"cluster": probe, **kw}
                out["runs"].setdefault(name, []).append(
                    run_scenario(tb, kw.pop("hook"), kw.pop("steps"), kw.pop("events"), width=args.width, **kw))
                print(f"# round {rnd}: {name} done", file=sys.stderr, flush=True)
    ph = phases(args.steps, args.degrade, args.restore)
    med = {name: {phase: statistics.median(r["step_seconds"][s] for r in rs for s in steps) for phase, steps in ph.items()}
           for name, rs in out["runs"].items() if not name.startswith("static")}
    static = {name: statistics.median(t for r in rs for t in r["step_seconds"][1:])
              for name, rs in out["runs"].items() if name.startswith("static")}
    best = min(static, key=static.get) if static else None
    mean = {name: statistics.fmean(r["step_seconds"][s] for r in out["runs"][name] for s in ph["healthy"])
            for name in ("default", "adaptive")}
    out["medians"], out["static_medians"], out["best_static"] = med, static, best
    out["step_medians"] = {name: [statistics.median(r["step_seconds"][s] for r in out["runs"][name])
                                  for s in range(args.steps)] for name in ("default", "adaptive")}
    ad, de = med["adaptive"], med["default"]
    out["ratios"] = {"healthy adaptive/default": ad["healthy"] / de["healthy"],
                     "healthy adaptive/default, means": mean["adaptive"] / mean["default"],
                     "degraded default/adaptive": de["degraded"] / ad["degraded"],
                     "degraded adaptive/best static": ad["degraded"] / static[best] if best else None,
                     "degraded default/best static": de["degraded"] / static[best] if best else None}
    return out


def report(out: dict) -> None:
    runs, sm = out["runs"], out["step_medians"]
    print(f"# 4 nodes at {out['rate_mbit']:g} Mbit/s, node 0 at 1/{out['ell']:g} from step {out['degrade']} "
          f"to step {out['restore']}; step seconds (rank 0), median of {out['rounds']} runs each")
    print(f"{'step':>4} {'link':>8} {'default':>8} {'adaptive':>8}  mode (each run)")
    for s in range(out["steps"]):
        link = "degraded" if out["degrade"] <= s < out["restore"] else "healthy"
        modes = "/".join(r["modes"][s] for r in runs["adaptive"])
        print(f"{s:>4} {link:>8} {sm['default'][s]:8.3f} {sm['adaptive'][s]:8.3f}  {modes}")
    for i, r in enumerate(runs["adaptive"]):
        for sw in r["switches"]:
            ells = ", ".join(f"{h} ℓ = {e:.2f}" for h, e in sw["ell"].items())
            how = ""
            if sw["to"] == "optcc":
                ks = ", ".join(f"k = {k} for {n} B" for n, k in sw["segments"].items())
                how = f"; {ks} at o = {sw['overhead_s'] * 1e3:.3g} ms ({sw['overhead_from']})"
            print(f"# run {i}: switch before step {sw['step']} to {sw['to']}: {ells}{how}")
    for name, m in out["medians"].items():
        print(f"# median {name}: healthy {m['healthy']:.3f} s, degraded {m['degraded']:.3f} s")
    for name, m in out["static_medians"].items():
        print(f"# median {name} (degraded throughout): {m:.3f} s")
    r = out["ratios"]
    print(f"# healthy adaptive/default = {r['healthy adaptive/default']:.3f} (target ≤ 1.1; of the means: "
          f"{r['healthy adaptive/default, means']:.3f})")
    print(f"# degraded default/adaptive = {r['degraded default/adaptive']:.3f} (target ≥ 1.3)")
    if r["degraded adaptive/best static"] is not None:
        print(f"# degraded adaptive/best static ({out['best_static']}) = {r['degraded adaptive/best static']:.3f} "
              f"(target ≤ 1.15)")
        print(f"# degraded default/best static ({out['best_static']}) = {r['degraded default/best static']:.3f}")


def plot(out: dict, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    runs, sm = out["runs"], out["step_medians"]
    steps = list(range(out["steps"]))
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.axvspan(out["degrade"] - 0.5, out["restore"] - 0.5, color="#f2dede", label=f"node 0's link at 1/{out['ell']:g}")
    each = f" (median of {out['rounds']} runs)" if out["rounds"] > 1 else ""
    ax.plot(steps, sm["default"], "o-", color="#7f7f7f", label="default DDP hook" + each)
    ax.plot(steps, sm["adaptive"], "s-", color="#2ca02c", label="OptccHookState.adaptive()" + each)
    if out["best_static"]:
        k = out["best_static"].split("=")[1]
        ax.axhline(out["static_medians"][out["best_static"]], color="#1f77b4", linestyle="--", linewidth=1,
                   label=f"static OptCC, k = {k} (best of {', '.join(n.split('=')[1] for n in out['static_medians'])}; "
                         "median, degraded)")
    for step in sorted({sw["step"] for r in runs["adaptive"] for sw in r["switches"]}):
        ax.axvline(step - 0.5, color="k", linewidth=0.8, linestyle=":")
    ax.set_xlabel("training step")
    ax.set_ylabel("step time (s, rank 0)")
    ax.set_title(f"4 nodes, {out['rate_mbit']:g} Mbit/s links: a NIC degrades and is repaired")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=float, default=40.0, help="healthy link rate, Mbit/s")
    ap.add_argument("--ell", type=float, default=2.0)
    ap.add_argument("--steps", type=int, default=24)
    ap.add_argument("--degrade", type=int, default=6)
    ap.add_argument("--restore", type=int, default=16)
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--static-k", type=int, nargs="*", default=[4, 8, 16, 32])
    ap.add_argument("--static-steps", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=2, help="runs of each hook, alternating order")
    ap.add_argument("--sample-bytes", type=int, help="the adaptive state's sample_bytes (default: its own)")
    ap.add_argument("--check-every", type=int, help="the adaptive state's check_every (default: its own)")
    ap.add_argument("--tag", default="o41bm")
    ap.add_argument("--json", metavar="FILE", help="write the whole result here")
    ap.add_argument("--plot", metavar="PNG")
    args = ap.parse_args(argv)
    out = run(args)
    report(out)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)
    if args.plot:
        plot(out, args.plot)
        print(f"# wrote {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
