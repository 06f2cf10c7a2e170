"""Cluster: p GPUs, g per server, NIC bandwidth B, per-GPU slowdown ℓ_i, NVLink, latencies.

Latencies (seconds, optcc.latency): overhead o (JSON key `overhead`; files that wrote its old
name `alpha` are still read), issue delay Li and wire latency L.

Units (used across the project): a time is in units of n/B, where n is the AllReduce size in
bytes and B the healthy NIC bandwidth. A flow of a piece of size s (a fraction of n) between
two GPUs on the NIC takes s·max(ℓ_src, ℓ_dst)/rate; on NVLink it takes s·B/B_nvlink/rate.
Slowdowns are exact Fractions so that proofs and timings are exact.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from fractions import Fraction
from functools import cached_property
from typing import Any
from collections.abc import Iterable, Mapping

from optcc.errors import OptccError
from optcc.exact import fraction_to_json, parse_fraction
from optcc.latency import PRESET_NAMES
from optcc.latency import resolve as resolve_latency
from optcc.failures import apply_failed_nics

DEFAULT_BANDWIDTH = Fraction(50 * 10**9)          # bytes/s: one 400 Gb/s NIC (issue #2)
DEFAULT_NVLINK_BANDWIDTH = Fraction(450 * 10**9)  # bytes/s: H100-class NVLink per GPU (issue #2)
MAX_P = 1 << 16      # derived: a bound on input size (per-GPU tuples stay small); work limits
                     # for schedules are in optcc.algorithms.check_work


@dataclass(frozen=True)
class Cluster:
    """An immutable cluster description; build it with `Cluster.build` or `Cluster.from_json`."""

    p: int
    g: int = 1
    slowdown: tuple[Fraction, ...] = field(default=())
    bandwidth: Fraction = DEFAULT_BANDWIDTH
    nvlink_bandwidth: Fraction = DEFAULT_NVLINK_BANDWIDTH
    overhead: Fraction = Fraction(0)       # o: per-message work at both ends, holds both ports
    issue_delay: Fraction = Fraction(0)
    latency: Fraction = Fraction(0)
    latency_model: str = ""                # preset name, "custom", or "" (none stated)
    hosts: tuple[tuple[int, str], ...] = field(default=())   # (server, host name): optcc.hosts
    failed_nics: tuple[tuple[int, int], ...] = ()   # (server, NICs lost); ℓ via optcc.failures
    pxn: bool = True                                # lost NICs pooled over NVLink (optcc.failures)

    # ---- construction -------------------------------------------------------------------
    @classmethod
    def build(
        cls,
        p: object,
        g: object = 1,
        stragglers: Mapping[int, object] | Iterable[tuple[int, object]] | None = None,
        bandwidth: object = DEFAULT_BANDWIDTH,
        nvlink_bandwidth: object = DEFAULT_NVLINK_BANDWIDTH,
        overhead: object = None,
        field_prefix: str = "",
        hosts: Iterable[tuple[int, str]] = (),
        issue_delay: object = None,
        latency: object = None,
        latency_model: str | None = None,
        failed_nics: Iterable[Any] | None = None,
        pxn: bool = True,
    ) -> Cluster:
        """Validate everything and return a Cluster. `stragglers` maps rank -> ℓ (≥ 1);
        `failed_nics` lists (server, NICs lost), mapped to ℓ by optcc.failures.

        The preset `latency_model` supplies o, Li, L that explicit `overhead`, `issue_delay`,
        `latency` override (optcc.latency); none of them given: all zero."""
        pre = field_prefix
        p = _positive_int(p, pre + "p")
        if p < 2:
            raise OptccError(pre + "p", f"an AllReduce needs at least 2 GPUs, got p = {p}")
        if p > MAX_P:
            raise OptccError(pre + "p", f"at most {MAX_P} GPUs are supported, got p = {p}")
        g = _positive_int(g, pre + "g")
        if p % g != 0:
            raise OptccError(pre + "g", f"g = {g} GPUs per server does not divide p = {p}")
        slowdown = [Fraction(1)] * p
        seen: set[int] = set()
        items = stragglers.items() if isinstance(stragglers, Mapping) else (stragglers or [])
        for i, (rank, ell) in enumerate(items):
            where = f"{pre}stragglers[{i}]"
            rank = _int(rank, where + ".rank")
            if not 0 <= rank < p:
                raise OptccError(where + ".rank", f"rank {rank} is out of range 0..{p - 1}")
            if rank in seen:
                raise OptccError(where + ".rank", f"rank {rank} is given twice")
            seen.add(rank)
            ell = parse_fraction(ell, where + ".ell")
            if ell < 1:
                raise OptccError(where + ".ell", f"slowdown ℓ must be ≥ 1, got {ell}")
            slowdown[rank] = ell
        if not isinstance(pxn, bool):
            raise OptccError(pre + "pxn", f"expected true or false, got {pxn!r}")
        failed = apply_failed_nics(p, g, failed_nics, slowdown, seen, pxn, pre)
        bandwidth = _positive_fraction(bandwidth, pre + "bandwidth")
        nvlink_bandwidth = _positive_fraction(nvlink_bandwidth, pre + "nvlink_bandwidth")
        lat = resolve_latency(latency_model, overhead, issue_delay, latency, field_prefix=pre)
        return cls(p, g, tuple(slowdown), bandwidth, nvlink_bandwidth, lat["overhead"],
                   lat["issue_delay"], lat["latency"], lat["latency_model"], tuple(hosts),
                   failed, pxn if failed else True)

    @classmethod
    def from_json(cls, data: object, field_prefix: str = "cluster.") -> Cluster:
        """Inverse of `to_json`. Unknown keys are refused so that typos do not pass silently."""
        if not isinstance(data, dict):
            raise OptccError(field_prefix.rstrip("."), "expected an object")
        known = {"p", "g", "stragglers", "bandwidth", "nvlink_bandwidth", "overhead", "alpha",
                 "issue_delay", "latency", "latency_model", "hosts", "failed_nics", "pxn"}
        for key in data:
            if key not in known:
                raise OptccError(field_prefix + key, f"unknown key (known: {', '.join(sorted(known))})")
        if "p" not in data:
            raise OptccError(field_prefix + "p", "missing")
        raw = data.get("stragglers", [])
        if not isinstance(raw, list):
            raise OptccError(field_prefix + "stragglers", "expected a list of {rank, ell}")
        from optcc.hosts import split_stragglers     # stragglers may be named by host
        p, g = _positive_int(data["p"], field_prefix + "p"), _positive_int(data.get("g", 1), field_prefix + "g")
        pairs, hosts = split_stragglers(raw, data.get("hosts"), p, g, field_prefix)
        failed = data.get("failed_nics", [])
        if not isinstance(failed, list):
            raise OptccError(field_prefix + "failed_nics", "expected a list of {server, count}")
        lost = []
        for i, f in enumerate(failed):
            if not isinstance(f, dict) or set(f) != {"server", "count"}:
                raise OptccError(f"{field_prefix}failed_nics[{i}]", "expected an object {\"server\": S, \"count\": C}")
            lost.append((f["server"], f["count"]))
        cluster = cls.build(
            p, g, pairs,
            data.get("bandwidth", DEFAULT_BANDWIDTH),
            data.get("nvlink_bandwidth", DEFAULT_NVLINK_BANDWIDTH),
            _json_overhead(data, field_prefix), field_prefix=field_prefix, hosts=hosts,
            issue_delay=data.get("issue_delay", 0), latency=data.get("latency", 0),
            failed_nics=lost, pxn=data.get("pxn", True),
        )
        name = data.get("latency_model", "")
        if name not in ("", "custom", *PRESET_NAMES):   # the values are stated; the name is a label
            raise OptccError(field_prefix + "latency_model",
                             f"unknown latency model {name!r} (known: {', '.join(PRESET_NAMES)}, custom)")
        return replace(cluster, latency_model=name)

    def to_json(self) -> dict[str, Any]:
        out = {
            "p": self.p,
            "g": self.g,
            "stragglers": [{"rank": r, "ell": fraction_to_json(l)} for r, l in self._explicit_stragglers()],
            "bandwidth": fraction_to_json(self.bandwidth),
            "nvlink_bandwidth": fraction_to_json(self.nvlink_bandwidth),
            "overhead": fraction_to_json(self.overhead),
            **self._latency_json(),
        }
        if self.failed_nics:                 # only then, so older clusters keep their JSON
            out["failed_nics"] = [{"server": s, "count": c} for s, c in self.failed_nics]
            if not self.pxn:
                out["pxn"] = False
        if self.hosts:
            out["hosts"] = [{"server": k, "host": h} for k, h in self.hosts]
        return out

    def _explicit_stragglers(self) -> list[tuple[int, Fraction]]:
        """(rank, ℓ) of slow GPUs not on a server described by failed_nics."""
        lost = {s for s, _ in self.failed_nics}
        return [(r, l) for r, l in self.stragglers.items() if r // self.g not in lost]

    def _latency_json(self) -> dict[str, int | str]:
        """Li, L and the model name, written only when set (older files and hashes unchanged)."""
        out: dict[str, int | str] = {}
        if self.issue_delay:
            out["issue_delay"] = fraction_to_json(self.issue_delay)
        if self.latency:
            out["latency"] = fraction_to_json(self.latency)
        if self.latency_model:
            out["latency_model"] = self.latency_model
        return out

    def with_latency(self, overhead: object, issue_delay: object, latency: object, latency_model: str = "") -> Cluster:
        """The same cluster under other latency parameters (seconds; validated)."""
        lat = resolve_latency(None, overhead, issue_delay, latency)
        return replace(self, overhead=lat["overhead"], issue_delay=lat["issue_delay"],
                       latency=lat["latency"], latency_model=latency_model)

    # ---- derived views ------------------------------------------------------------------
    @property
    def stragglers(self) -> dict[int, Fraction]:
        """rank -> ℓ for every GPU slower than B, in rank order (a fresh dict each call)."""
        return dict(self._straggler_items)

    @cached_property
    def _straggler_items(self) -> tuple[tuple[int, Fraction], ...]:
        # computed once: the cluster is immutable, and the registry's choice reads it per call
        return tuple((r, l) for r, l in enumerate(self.slowdown) if l != 1)

    @cached_property
    def min_slowdown(self) -> Fraction:
        """min(slowdown): ℓ of the fastest GPU (computed once; the cluster is immutable)."""
        return min(self.slowdown)

    @property
    def healthy(self) -> list[int]:
        return [r for r, l in enumerate(self.slowdown) if l == 1]

    @property
    def servers(self) -> int:
        return self.p // self.g

    def server_of(self, rank: int) -> int:
        return rank // self.g

    @property
    def nvlink_speedup(self) -> Fraction:
        """B_nvlink / B: how many times faster NVLink moves a byte than a healthy NIC."""
        return self.nvlink_bandwidth / self.bandwidth

    def nic_time(self, src: int, dst: int, size: Fraction, rate: Fraction = Fraction(1)) -> Fraction:
        """Duration (units of n/B) of a NIC flow: the slower end sets the speed (paper's model)."""
        return size * max(self.slowdown[src], self.slowdown[dst]) / rate

    def nvlink_time(self, size: Fraction, rate: Fraction = Fraction(1)) -> Fraction:
        return size / (self.nvlink_speedup * rate)

    def describe(self) -> str:
        parts = [f"p={self.p}"]
        if self.g != 1:
            parts.append(f"g={self.g}")
        for s, c in self.failed_nics:
            ells = sorted(set(self.slowdown[s * self.g:(s + 1) * self.g]), reverse=True)
            how = "PXN" if self.pxn else "no PXN"
            parts.append(f"server {s} lost {c}/{self.g} NICs ({how}: ℓ={','.join(map(str, ells))})")
        for r, l in self._explicit_stragglers():
            parts.append(f"straggler {r}:ℓ={l}")
        parts.extend(f"server {k} on host {h}" for k, h in self.hosts)
        return ", ".join(parts)


def parse_straggler(text: str, field: str = "stragglers") -> tuple[int, Fraction]:
    """Parse 'RANK:ELL' (ELL a decimal or an exact fraction like 8/7)."""
    if not isinstance(text, str) or text.count(":") != 1:
        raise OptccError(field, f"expected RANK:ELL such as 0:2 or 0:8/7, got {text!r}")
    rank_text, ell_text = text.split(":")
    try:
        rank = int(rank_text)
    except ValueError:
        raise OptccError(field, f"rank must be an integer in {text!r}") from None
    return rank, parse_fraction(ell_text, field)


def _int(value: object, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, str) and re.fullmatch(r"\s*-?\d{1,18}\s*", value):
            return int(value)
        raise OptccError(field, f"expected an integer, got {value!r}"[:200])
    return value


def _positive_int(value: object, field: str) -> int:
    value = _int(value, field)
    if value < 1:
        raise OptccError(field, f"expected a positive integer, got {value}")
    return value


def _positive_fraction(value: object, field: str) -> Fraction:
    x = parse_fraction(value, field)
    if x <= 0:
        raise OptccError(field, f"expected a positive number, got {x}")
    return x


def _json_overhead(data: dict[str, Any], field_prefix: str) -> object:
    """o from a cluster's JSON: `overhead`, or `alpha` (its name in files written before issue 21),
    validated under the key the file used; both at once must agree."""
    if "alpha" not in data:
        return data.get("overhead", 0)
    old = parse_fraction(data["alpha"], field_prefix + "alpha")
    if old < 0:
        raise OptccError(field_prefix + "alpha", f"latency must be ≥ 0 seconds, got {old}")
    if "overhead" in data and parse_fraction(data["overhead"], field_prefix + "overhead") != old:
        raise OptccError(field_prefix + "alpha", "`alpha` is the old name of `overhead`; the file gives both, "
                                                 "with different values")
    return old
