"""sha256 of every generated schedule over a grid (ring, OptCC single / multi / servers, the
baselines, LP schedules), written as JSON: run it before and after a change that must not
change any schedule, and compare the two files (they must be byte-identical).

Run: python benchmarks/schedule_hashes.py OUT.json [--without-stated]
--without-stated hashes each schedule without its stated slot time (the "slot_time" key), to
compare against schedules made before generators stated it, and checks on every schedule that
the stated time is the one it ends at (optcc.timing.slot_time); it prints every mismatch."""
import argparse
import hashlib
import json
from fractions import Fraction as F
from optcc.cluster import Cluster
from optcc.errors import OptccError

_parser = argparse.ArgumentParser(description="sha256 of every generated schedule over a grid, as JSON")
_parser.add_argument("out", metavar="OUT.json", help="where the hashes are written")
_parser.add_argument("--without-stated", action="store_true",
                     help="hash without the stated slot time, and check it is each schedule's end")
ARGS = _parser.parse_args()        # before any work: `--help` prints this, never writes a file
WITHOUT_STATED = ARGS.without_stated
MISMATCHES = []


def h(s, name=""):
    data = s.to_json()
    if WITHOUT_STATED:
        from optcc.timing import slot_time
        stated = data.pop("slot_time", None)
        if stated is not None and F(stated) != slot_time(s):
            MISMATCHES.append((name, stated, str(slot_time(s))))
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()

def grid():
    from optcc.algorithms import build_schedule
    from optcc.algorithms import baselines as BL
    ells = [F(1), F(8, 7), F(3, 2), F(2), F(3)]
    for p in (2, 3, 4, 5, 6, 7, 9):
        for ell in ells:
            c = Cluster.build(p, 1, {p - 1: ell} if ell != 1 else None)
            for k in (1, 2, 3, 5):
                for algo in ("ring", "optcc"):
                    yield f"{algo} p{p} l{ell} k{k}", lambda a=algo, c=c, k=k: build_schedule(a, c, k)
            yield f"r2ccl p{p} l{ell}", lambda c=c: BL.r2ccl_allreduce(c, 4, 8)
            yield f"pxn p{p} l{ell}", lambda c=c: BL.pxn_ring_allreduce(c, 2)
    for p in (4, 5, 6, 8, 9):
        for m in (2, 3):
            if m > p - 2:
                continue
            for e in ([F(3, 2), F(2)], [F(8, 7), F(3)], [F(2), F(2)], [F(5, 4), F(5, 4)]):
                st = {i: e[i % 2] for i in range(m)}
                c = Cluster.build(p, 1, st)
                for k in (1, 2, 3, 4):
                    yield f"multi p{p} {sorted(st.items())} k{k}", lambda c=c, k=k: build_schedule("optcc", c, k)
    for g in (2, 4):
        for q in (1, 2, 3, 4):
            for ell in ells:
                c = Cluster.build(q * g, g, {r: ell for r in range(g)} if ell != 1 else None)
                for k in (1, 2, 3):
                    for algo in ("ring", "optcc"):
                        yield f"{algo} g{g} q{q} l{ell} k{k}", lambda a=algo, c=c, k=k: build_schedule(a, c, k)
                yield f"hier g{g} q{q} l{ell}", lambda c=c: BL.hierarchical_ring_allreduce(c)
                yield f"r2ccls g{g} q{q} l{ell}", lambda c=c: BL.r2ccl_server_allreduce(c, 4, 8)
    from lp_models.to_schedule import lp_schedule
    for p in (3, 4, 6):
        c = Cluster.build(p, 1, {0: F(3, 2)})
        for cap in ("shared", "exclusive"):
            yield f"lp p{p} {cap}", lambda c=c, cap=cap: lp_schedule(c, 4, cap)

out = {}
for name, make in grid():
    try:
        out[name] = h(make(), name)
    except OptccError as e:
        out[name] = f"error {e.message}"
with open(ARGS.out, "w") as fh:
    json.dump(out, fh, indent=0, sort_keys=True)
print(len(out), sum(1 for v in out.values() if v.startswith("error")))
if WITHOUT_STATED:
    print(f"{len(MISMATCHES)} stated slot times differ from the schedule's end", *MISMATCHES, sep="\n")
