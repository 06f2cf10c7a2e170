"""optcc_rails' NVLink plan as the loop it was first written as (one task at a time, Python ints):
the reference that optcc.algorithms.rails.layout's numpy passes are held to, task by task, in
tests/optcc/test_rails_layout.py."""
from __future__ import annotations


def plan_loop(fts, lws, mults, dfs, dhs, nic, proportional, steps):
    """(lead D, end, tasks) of rails r with first-touch / last-write matrices fts[r], lws[r]
    (q × P_r, on rail r's grid, × mults[r] on the plan's), full / half-rate task durations
    dfs[r], dhs[r] per piece, NIC part `nic`. tasks: (server, rail, piece, start, half rate,
    add) per server, its reduce-scatters by (first touch, rail, piece), then its all-gathers by
    (release, rail, piece)."""
    R = range(len(fts))
    q = fts[0].shape[0]
    ft = [{(r, pi): int(fts[r][s, pi]) * mults[r] for r in R for pi in range(fts[r].shape[1])} for s in range(q)]
    lw = [{(r, pi): int(lws[r][s, pi]) * mults[r] for r in R for pi in range(lws[r].shape[1])} for s in range(q)]
    df = [[int(x) for x in d] for d in dfs]
    dh = [[int(x) for x in d] for d in dhs]
    order = [sorted(ft[s], key=lambda key: (ft[s][key], key)) for s in range(q)]

    def reduce_scatter(D, s):
        """Per task (key, start, half rate) and the streams' free times at the end."""
        first_ag = D + min(lw[s].values())
        free, out = [0] * len(fts), []
        for key in order[s]:
            r, pi = key
            st = free[r]
            both = st + df[r][pi] > first_ag
            free[r] = st + (dh[r][pi] if both else df[r][pi])
            out.append((key, st, both))
        return out, free

    D = 0                                       # every reduce-scatter at the half rate
    for s in range(q):
        free = [0] * len(fts)
        for key in order[s]:
            free[key[0]] += dh[key[0]][key[1]]
            D = max(D, free[key[0]] - ft[s][key])
    if proportional and 50 * D > nic:           # bisect: the latest finish − first touch ≤ D
        lo, hi = 0, D
        for _ in range(steps):
            mid = (lo + hi) // 2
            need = max(st + (dh[k[0]][k[1]] if both else df[k[0]][k[1]]) - ft[s][k]
                       for s in range(q) for k, st, both in reduce_scatter(mid, s)[0])
            lo, hi = (lo, mid) if need <= mid else (mid, hi)
        D = hi
    end, tasks = D + nic, []
    for s in range(q):
        rs, free = reduce_scatter(D, s)
        tasks += [(s, r, pi, st, int(both), 1) for (r, pi), st, both in rs]
        last_rs = max(free)
        free = [0] * len(fts)
        for rel, (r, pi) in sorted((D + lw[s][key], key) for key in lw[s]):
            st = max(rel, free[r])
            both = st < last_rs
            free[r] = st + (dh[r][pi] if both else df[r][pi])
            tasks.append((s, r, pi, st, int(both), 0))
            end = max(end, free[r])
    return D, end, tasks
