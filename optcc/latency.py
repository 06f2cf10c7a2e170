"""The three latency parameters of the time model and the named presets (with their sources).

A flow pays (docs/latency.md, after ../shared/LATENCY.md):
  overhead o     per message, holds both of its ports (posting work, handshakes);
  issue delay Li data ready -> flow starts, holds no port (a software/protocol delay);
  latency L      last byte sent -> landed, holds no port (links, switches).
All three are exact Fractions in seconds. `alpha` (the project's old α) is the overhead o.

Presets (each value with its source; "derived" = our reading, explained in docs/latency.md):
- alpha: o = 5 µs, Li = L = 0. The project's α since issue 7 (paper_checks.settings, "a few
  µs": one RDMA write ≈ 2 µs plus NCCL's proxy step); what a step-synchronous runner pays.
- simai: o = 0, Li = 2 µs, L = 2 µs. SimAI's ns-3 frontend (aliyun/SimAI,
  astra-sim-alibabacloud/astra-sim/network_frontend/ns3/entry.h, SendFlow) schedules each flow
  `send_lat · 1000` ns-3 ticks (ns) after it is posted, send_lat = AS_SEND_LAT in µs, holding no
  NIC. SimAI's docs/Tutorial.md sets AS_SEND_LAT=2 for its ring runs: "RING VS NVLS", the "RING
  topo file && RUN" line (AS_SEND_LAT=2 AS_PXN_ENABLE=1), and "Spectrum-X architecture VS DCN+
  architecture", both RUN lines (DCN+ and HPN7.0/Spectrum-X); the 3 of its "SimAI-NS3 Simulation"
  quick-start line is an NVLS run (AS_NVLS_ENABLE=1), so Li = 2 µs. Without AS_SEND_LAT the
  frontend's default before SimAI 1.7 was send_lat = 6000, i.e. 6 ms (../shared/LATENCY.md).
  L: 0.5 µs per link in SimAI's topology generator (the Tutorial's `-l 0.0005ms` NIC latency),
  four links NIC-leaf-spine-leaf-NIC = 2 µs (derived; a same-rail path has two links, 1 µs).
- nccl: o = 0, Li = 0, L = 14 µs. NCCL's cost model (NVIDIA/nccl src/graph/tuning.cc,
  hwLat[NET][Ring][Simple] = 14.0 µs per ring step in recent releases, 9.6 in older ones;
  ring latency = baseLat + nsteps · hwLat), charged once per step, never per slice.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from optcc.errors import OptccError
from optcc.exact import parse_fraction

if TYPE_CHECKING:
    from optcc.cluster import Cluster

MICRO = Fraction(1, 10**6)
FIELDS = ("overhead", "issue_delay", "latency")


@dataclass(frozen=True)
class Preset:
    name: str
    overhead: Fraction
    issue_delay: Fraction
    latency: Fraction
    source: str

    def values(self) -> dict[str, Fraction]:
        return {"overhead": self.overhead, "issue_delay": self.issue_delay, "latency": self.latency}


PRESETS = {
    "alpha": Preset("alpha", 5 * MICRO, Fraction(0), Fraction(0),
                    "the project's α (issue 7): o = 5 µs per message, holding both ports"),
    "simai": Preset("simai", Fraction(0), 2 * MICRO, 2 * MICRO,
                    "SimAI ns-3 frontend: send latency AS_SEND_LAT = 2 µs (Li; its Tutorial's ring/PXN, "
                    "DCN+ and Spectrum-X runs), 4 links × 0.5 µs (L)"),
    "nccl": Preset("nccl", Fraction(0), Fraction(0), 14 * MICRO,
                   "NCCL tuning.cc: per-step network latency of the Simple ring protocol, 14 µs (L)"),
}
PRESET_NAMES = tuple(PRESETS)


def check_latency(value: object, field: str) -> Fraction:
    """A latency in seconds: a finite exact number ≥ 0 (OptccError naming `field` otherwise)."""
    x = parse_fraction(value, field)
    if x < 0:
        raise OptccError(field, f"latency must be ≥ 0 seconds, got {x}")
    return x


def resolve(name: str | None = None, overhead: object = None, issue_delay: object = None, latency: object = None,
            field_prefix: str = "") -> dict[str, Any]:
    """The three parameters (seconds) and a model name: the preset `name` (or all zero), with
    any explicit value overriding it. The name is the preset's if nothing changed it, "custom"
    if an explicit value did, "" without a preset."""
    if name is not None and name not in PRESETS:
        raise OptccError(field_prefix + "latency_model",
                         f"unknown latency model {name!r} (known: {', '.join(PRESET_NAMES)})")
    base = PRESETS[name].values() if name else dict.fromkeys(FIELDS, Fraction(0))
    given = {"overhead": overhead, "issue_delay": issue_delay, "latency": latency}
    out: dict[str, Any] = dict(base)
    for key, value in given.items():
        if value is not None:
            out[key] = check_latency(value, field_prefix + key)
    changed = any(out[key] != base[key] for key in FIELDS)
    out["latency_model"] = "" if not name else ("custom" if changed else name)
    return out


def model_name(cluster: Cluster) -> str:
    """The cluster's latency model name: its stated one, else the preset with its exact values,
    else "none" when all three are 0, else "custom"."""
    if cluster.latency_model:
        return cluster.latency_model
    values = {"overhead": cluster.overhead, "issue_delay": cluster.issue_delay, "latency": cluster.latency}
    for preset in PRESETS.values():
        if preset.values() == values:
            return preset.name
    return "none" if not any(values.values()) else "custom"


def describe_json(cluster: Cluster) -> dict[str, str | float]:
    """{name, overhead, issue_delay, latency} in seconds (floats), as `optcc time --json` prints."""
    return {"name": model_name(cluster), "overhead": float(cluster.overhead),
            "issue_delay": float(cluster.issue_delay), "latency": float(cluster.latency)}


def units(cluster: Cluster, n_bytes: int) -> tuple[Fraction, Fraction, Fraction]:
    """(o, Li, L) in units of n/B for an n-byte AllReduce: seconds · B / n."""
    scale = cluster.bandwidth / n_bytes
    return cluster.overhead * scale, cluster.issue_delay * scale, cluster.latency * scale
