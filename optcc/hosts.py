"""Stragglers named by host: parse them from cluster JSON, and place processes on schedule ranks.

A cluster JSON straggler may be `{"host": NAME, "ell": L}` instead of `{"rank": R, "ell": L}`:
every GPU of that host's server runs at ℓ = L (g = 1: the host's one GPU). Host-named stragglers
take, in the order given, the lowest-numbered servers that no rank-named straggler uses, and the
cluster records `hosts` = ((server, NAME), ...) (JSON `"hosts": [{"server": S, "host": NAME}]`,
also accepted as input). A schedule built for the cluster carries them, so a run can put the
named host's processes on that server's schedule ranks (`place_processes`), whichever process
ranks the launcher (torchrun's dynamic rendezvous) gave them.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from optcc.errors import OptccError

if TYPE_CHECKING:
    from optcc.cluster import Cluster


def split_stragglers(raw: list[Any], hosts_raw: object, p: int, g: int,
                     prefix: str) -> tuple[list[tuple[Any, Any]], tuple[tuple[int, str], ...]]:
    """(rank -> ell pairs, hosts) from JSON stragglers (by rank or host) and an optional hosts list."""
    if p < 1 or g < 1 or p % g:
        return [(s.get("rank"), s.get("ell")) for s in raw if isinstance(s, dict)], ()
    pairs, by_host = [], []
    for i, s in enumerate(raw):
        where = f"{prefix}stragglers[{i}]"
        if isinstance(s, dict) and set(s) == {"rank", "ell"}:
            pairs.append((s["rank"], s["ell"]))
        elif isinstance(s, dict) and set(s) == {"host", "ell"}:
            by_host.append((_name(s["host"], where + ".host"), s["ell"], where))
        else:
            raise OptccError(where, "expected an object {\"rank\": R, \"ell\": L} or {\"host\": NAME, \"ell\": L}")
    hosts: dict[int, str] = {}
    if hosts_raw is not None:
        if not isinstance(hosts_raw, list):
            raise OptccError(prefix + "hosts", "expected a list of {\"server\": S, \"host\": NAME}")
        for i, h in enumerate(hosts_raw):
            where = f"{prefix}hosts[{i}]"
            if not isinstance(h, dict) or set(h) != {"server", "host"}:
                raise OptccError(where, "expected an object {\"server\": S, \"host\": NAME}")
            server = h["server"]
            if isinstance(server, bool) or not isinstance(server, int) or not 0 <= server < p // g:
                raise OptccError(where + ".server", f"expected a server number in 0..{p // g - 1}, got {server!r}")
            if server in hosts:
                raise OptccError(where + ".server", f"server {server} is named twice")
            hosts[server] = _name(h["host"], where + ".host")
    used = {r // g for r, _ in pairs if isinstance(r, int) and not isinstance(r, bool) and 0 <= r < p}
    server_of = {name: s for s, name in hosts.items()}
    for name, ell, where in by_host:
        s = server_of.get(name)
        if s is None:
            free = [s for s in range(p // g) if s not in used and s not in hosts]
            if not free:
                raise OptccError(where + ".host", f"no server left for host {name!r}: the cluster has {p // g}")
            s = server_of[name] = free[0]
            hosts[s] = name
        elif s in used:
            raise OptccError(where + ".host", f"host {name!r} is named twice")
        used.add(s)
        pairs.extend((s * g + j, ell) for j in range(g))
    if len(set(hosts.values())) != len(hosts):
        raise OptccError(prefix + "hosts", "a host name is given to two servers")
    return pairs, tuple(sorted(hosts.items()))


def _name(value: object, field: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise OptccError(field, f"expected a non-empty host name, got {value!r}")
    return value


def place_processes(cluster: Cluster, names: list[str], local_ranks: list[int | None],
                    local_world_sizes: list[int | None]) -> list[int]:
    """Schedule rank -> process rank, given every process's host name, LOCAL_RANK and
    LOCAL_WORLD_SIZE (None when unset), indexed by process rank. The named hosts' processes get
    their servers' ranks; the other hosts fill the other servers in order of their first process.
    Raises OptccError("hosts", why) when the processes do not match the cluster."""
    p, g = cluster.p, cluster.g
    if len(names) != p:
        raise OptccError("hosts", f"the schedule is for {p} ranks, {len(names)} processes joined")
    bad = sorted({w for w in local_world_sizes if w is not None and w != g})
    if bad:
        raise OptccError("hosts", f"LOCAL_WORLD_SIZE is {bad[0]} but the cluster has g = {g} GPUs per server")
    procs: dict[str, list[int]] = {}
    for r, name in enumerate(names):
        procs.setdefault(name, []).append(r)
    wrong = {h: len(rs) for h, rs in procs.items() if len(rs) != g}
    if wrong or len(procs) != p // g:
        shown = ", ".join(f"{h}: {len(rs)}" for h, rs in procs.items())
        raise OptccError("hosts", f"the cluster has {p // g} servers of g = {g} GPUs, the processes run on "
                                  f"{len(procs)} hosts ({shown})")
    named = dict(cluster.hosts)
    missing = [h for h in named.values() if h not in procs]
    if missing:
        raise OptccError("hosts", f"host {missing[0]!r} named by the cluster is not among the hosts of this run "
                                  f"({', '.join(procs)})")
    others = iter(h for h in procs if h not in named.values())
    order = [0] * p
    for s in range(p // g):
        host = named.get(s) or next(others)
        rs = sorted(procs[host], key=lambda r: (local_ranks[r] if local_ranks[r] is not None else r, r))
        for j, r in enumerate(rs):
            order[s * g + j] = r
    return order
