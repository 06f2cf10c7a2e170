"""Cross-check of the event model's three port disciplines (optcc.timing.DISCIPLINES) against
SimGrid, an engine nobody here wrote (Debian's python3-simgrid; SimGrid's CM02 model: links shared
max-min, no TCP factors).

The replay: one SimGrid host per rank with its own up and down link (B/ℓ on the NIC; an NVLink
up and down link at B·s_nv for ranks of one server), a full route table (NIC: up_src, down_dst;
same server: NVLink's). One actor per flow: it waits for the writes it reads to land and sleeps Li,
waits for the flows it follows to end (its send port's earlier flows in slot order, every
discipline; its receive port's too under "exclusive"; the flow before it in an NVLink batch), and
under "step" for every flow of its two ranks that the schedule ends by its start to land; then it sleeps o (holding
nothing in SimGrid: the flows it follows already ended), sends its bytes (Comm.sendto: SimGrid
shares the links max-min) and lands L later (a sleep). Local ops wait for their reads. The
makespan, in units of n/B, against optcc.timing.event_time under the same discipline.

Flows below rate 1 (the rails' NVLink streams, one GPU to g − 1 others at once; some of their
NIC flows): the event model runs each at its stated rate for its whole duration, a share of the
port it keeps even where the port has room to spare. `cap` names the links whose such flows are
replayed so (a mailbox transfer with Comm.set_rate: the flow's rate times its link's speed, the
slower end's on a NIC); on the others SimGrid shares the links max-min. cap = ("nic", "nvlink")
is the event model; cap = ("nic",) is `event_time(..., nvlink="max-min")` (optcc.event_maxmin: a
work-conserving NVLink). The second part of the output compares both pairs on the rails (g = 8,
100 GB/s, where NVLink bounds them).

Run: python benchmarks/simgrid_disciplines.py   (prints one line per schedule and discipline and
the largest relative difference, then one line per rails case, about 10 minutes in all; skips
with its reason where SimGrid is not installed)
"""
from __future__ import annotations

import math
import sys
from fractions import Fraction

DEBIAN_SITE = "/usr/lib/python3/dist-packages"      # python3-simgrid's module (built for CPython 3.11)


def load_simgrid():
    """The simgrid module, or None with the reason (str)."""
    try:
        import simgrid
        return simgrid, ""
    except ImportError:
        pass
    sys.path.append(DEBIAN_SITE)
    try:
        import simgrid
        return simgrid, ""
    except ImportError as e:
        return None, f"SimGrid's Python module is not installed (apt-get install python3-simgrid): {e}"
    finally:
        if DEBIAN_SITE in sys.path:
            sys.path.remove(DEBIAN_SITE)


def replay(schedule, o: Fraction, li: Fraction, lat: Fraction, discipline: str, cap: tuple[str, ...] = ()) -> float:
    """SimGrid's makespan of `schedule` (units of n/B) under `discipline` (module docstring), in a
    forked process (SimGrid's Engine is one per process). `cap`: the links ("nic", "nvlink") whose
    flows below rate 1 run at their stated rate (module docstring)."""
    import os
    rd, wr = os.pipe()
    pid = os.fork()
    if pid == 0:                                    # the child: one Engine, its makespan as float.hex
        try:
            os.write(wr, _replay(schedule, o, li, lat, discipline, cap).hex().encode())
        finally:
            os._exit(0)
    os.close(wr)
    with os.fdopen(rd, "rb") as fh:
        out = fh.read().decode()
    os.waitpid(pid, 0)
    if not out:
        raise RuntimeError("SimGrid replay: the child process ended without a result")
    return float.fromhex(out)


def _replay(schedule, o: Fraction, li: Fraction, lat: Fraction, discipline: str, cap: tuple[str, ...]) -> float:
    sg, why = load_simgrid()
    if sg is None:
        raise RuntimeError(why)
    from optcc.timing import IntegerTimes, nvlink_batches
    c = schedule.cluster
    flows, ops = schedule.flows, schedule.local_ops
    grid = IntegerTimes(schedule)
    n_flows = len(flows)
    bw = 1e9                                        # B: bytes/s; n chosen so every piece is whole bytes
    n_bytes = math.lcm(*(x.denominator for x in schedule.pieces)) * 2**30    # times of seconds: above SimGrid's precision
    unit = n_bytes / bw                             # seconds per unit of n/B
    e = sg.Engine(["replay", "--cfg=network/model:CM02", "--cfg=network/crosstraffic:0",
                   "--cfg=contexts/factory:thread", "--log=root.thres:critical"])
    zone = sg.NetZone.create_full_zone("cluster")
    hosts = [zone.create_host(f"h{r}", 1e9) for r in range(c.p)]
    def link(name, rate):
        return zone.create_link(name, float(rate)).set_latency(0).seal()
    up = [link(f"up{r}", bw / float(c.slowdown[r])) for r in range(c.p)]
    down = [link(f"down{r}", bw / float(c.slowdown[r])) for r in range(c.p)]
    nv = float(c.nvlink_speedup) * bw
    nvup = [link(f"nvup{r}", nv) for r in range(c.p)]
    nvdown = [link(f"nvdown{r}", nv) for r in range(c.p)]
    for a in range(c.p):
        for b in range(c.p):
            if a != b:
                same = a // c.g == b // c.g and c.g > 1
                route = [nvup[a], nvdown[b]] if same else [up[a], down[b]]
                zone.add_route(hosts[a].netpoint, hosts[b].netpoint, None, None,
                               [sg.LinkInRoute(x) for x in route], False)
    zone.seal()
    for f in flows:
        assert (f.link == "nvlink") == (f.src // c.g == f.dst // c.g and c.g > 1), "NVLink iff one server"
    start = grid.starts
    end = grid.ends
    writes: dict = {}
    for i, f in enumerate(flows):
        writes.setdefault((f.dst, f.piece), []).append((end[i], i))
    for j, op in enumerate(ops):
        writes.setdefault((op.rank, op.piece), []).append((grid.op_times[j], n_flows + j))
    batch = nvlink_batches(schedule, grid)
    data, after, step = [], [], []
    for i, f in enumerate(flows):
        data.append([w for t, w in writes.get((f.src, f.piece), []) if t <= start[i]])
        ports = [(f.src, f.link, 0)] + ([(f.dst, f.link, 1)] if discipline == "exclusive" else [])
        follow = [j for j, g in enumerate(flows) if end[j] <= start[i]
                  and any(pt in ((g.src, g.link, 0), (g.dst, g.link, 1)) for pt in ports)]
        if batch.get(i, -1) >= 0:
            follow.append(batch[i])
        after.append(follow)
        step.append([j for j, g in enumerate(flows) if discipline == "step" and end[j] <= start[i]
                     and {g.src, g.dst} & {f.src, f.dst}])
    for j, op in enumerate(ops):
        data.append([w for t, w in writes.get((op.rank, op.piece), []) if t <= grid.op_times[j] and w < n_flows])
    nodes = n_flows + len(ops)
    landed_by = [0] * nodes
    ended_by = [0] * nodes
    for v in range(nodes):
        for u in data[v] + (step[v] if v < n_flows else []):
            landed_by[u] += 1
        for u in after[v] if v < n_flows else []:
            ended_by[u] += 1
    landed_sem = [sg.Semaphore(0) for _ in range(nodes)]
    ended_sem = [sg.Semaphore(0) for _ in range(nodes)]
    finish = [0.0]

    def done(sems, counts, v):
        for _ in range(counts[v]):
            sems[v].release()

    def run_flow(i):
        f = flows[i]
        for u in data[i]:
            landed_sem[u].acquire()
        t = sg.Engine.clock + float(li) * unit
        for u in after[i]:
            ended_sem[u].acquire()
        for u in step[i]:
            landed_sem[u].acquire()
        sg.this_actor.sleep_until(max(t, sg.Engine.clock))
        sg.this_actor.sleep_for(float(o) * unit)
        size = int(schedule.pieces[f.piece] * n_bytes)
        if f.link in cap and f.rate != 1:           # a mailbox transfer: Comm.sendto's cannot take a rate
            speed = nv if f.link == "nvlink" else bw / float(max(c.slowdown[f.src], c.slowdown[f.dst]))
            comm = sg.Mailbox.by_name(f"m{i}").put_init(i, size)
            comm.set_rate(speed * float(f.rate))
            comm.start()
            comm.wait()
        else:
            sg.Comm.sendto(hosts[f.src], hosts[f.dst], size)
        done(ended_sem, ended_by, i)
        sg.this_actor.sleep_for(float(lat) * unit)
        finish[0] = max(finish[0], sg.Engine.clock)
        done(landed_sem, landed_by, i)

    def run_op(v):
        for u in data[v]:
            landed_sem[u].acquire()
        finish[0] = max(finish[0], sg.Engine.clock)
        done(landed_sem, landed_by, v)

    for i in range(n_flows):
        sg.Actor.create(f"f{i}", hosts[flows[i].src], run_flow, i)
    def receive(i):
        sg.Mailbox.by_name(f"m{i}").get()

    for j in range(len(ops)):
        sg.Actor.create(f"op{j}", hosts[ops[j].rank], run_op, n_flows + j)
    for i in range(n_flows):
        if flows[i].link in cap and flows[i].rate != 1:
            sg.Actor.create(f"r{i}", hosts[flows[i].dst], receive, i)
    e.run()
    return finish[0] / unit


def cases():
    """Small schedules: the ring, the flat ring where NVLink bounds it (100 GB/s, g = 8), OptCC
    with one straggler and with two (simai latencies at 8 GiB)."""
    from fractions import Fraction as F
    from optcc.algorithms.baselines import flat_ring_allreduce
    from optcc.algorithms.registry import choose
    from optcc.cluster import Cluster
    out = []
    c = Cluster.build(8, bandwidth=50e9, latency_model="simai")
    out.append(("ring p=8", flat_ring_allreduce(c)))
    c = Cluster.build(16, 8, bandwidth=100e9, nvlink_bandwidth=450e9, latency_model="simai")
    out.append(("flat ring p=16 g=8 100 GB/s", flat_ring_allreduce(c)))
    c = Cluster.build(8, 1, {0: F(2)}, bandwidth=50e9, latency_model="simai")
    out.append(("optcc p=8 l=2 k=4", choose(c).build(c, 4)))
    c = Cluster.build(9, 1, {0: F(3), 1: F(3, 2)}, bandwidth=50e9, latency_model="simai")
    out.append(("optcc_multi p=9 k=3", choose(c).build(c, 3)))
    return out


def rails_cases():
    """OptCC's rails with one straggler, g = 8, where NVLink (450 GB/s) bounds them (100 GB/s NICs):
    q = 3, 4 and 5 servers, k = 2 (2,116 to 5,616 flows, simai at 8 GiB); at ℓ = 4 some NIC flows
    run below rate 1 too."""
    from fractions import Fraction as F
    from optcc.algorithms.registry import choose
    from optcc.cluster import Cluster
    out = []
    for p, ell in ((24, F(2)), (32, F(2)), (32, F(4)), (40, F(4, 3))):
        c = Cluster.build(p, 8, {0: ell}, bandwidth=100e9, nvlink_bandwidth=450e9, latency_model="simai")
        out.append((f"rails p={p} g=8 l={ell} k=2", choose(c).build(c, 2)))
    return out


def main() -> int:
    sg, why = load_simgrid()
    if sg is None:
        print(f"skipped: {why}")
        return 0
    from optcc.latency import units
    from optcc.timing import DISCIPLINES, event_time
    n = 8 * 2**30
    worst = 0.0
    for name, s in cases():
        o, li, lat = units(s.cluster, n)
        for d in DISCIPLINES:
            ours = float(event_time(s, o, None, li, lat, d))
            theirs = replay(s, o, li, lat, d)
            rel = abs(theirs - ours) / ours
            worst = max(worst, rel)
            print(f"{name:30s} {d:9s} ours {ours:.9f}  SimGrid {theirs:.9f}  rel. diff {rel:.2e}")
    print(f"largest relative difference: {worst:.2e}")
    print("rails, g = 8, 100 GB/s (exclusive): NVLink streams below rate 1 at their stated rate, and shared max-min")
    for name, s in rails_cases():
        o, li, lat = units(s.cluster, n)
        ours = float(event_time(s, o, None, li, lat, "exclusive"))
        ours_mm = float(event_time(s, o, None, li, lat, "exclusive", nvlink="max-min"))
        capped = replay(s, o, li, lat, "exclusive", cap=("nic", "nvlink"))
        free = replay(s, o, li, lat, "exclusive", cap=("nic",))
        print(f"{name:26s} stated: ours {ours:.9f} SimGrid capped {capped:.9f} (rel. diff "
              f"{abs(capped - ours) / ours:.2e});  NVLink max-min: ours {ours_mm:.9f} SimGrid {free:.9f} (rel. diff "
              f"{abs(free - ours_mm) / free:.2e});  stated/max-min {ours / ours_mm - 1:+.2%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
