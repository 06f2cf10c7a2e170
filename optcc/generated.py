"""A generated schedule: a proved construction named by its parameters, not its flows.

A file in FORMAT holds the construction ("ring" or "optcc", the generators `optcc prove-all`
proves for every size), its cluster, its segment count and `sources_sha256`, the digest of
the sources the proof is of (optcc.proof_sources). About 1 KB at any p; the flow list
(optcc-schedule/1) stays the form of small and hand-made schedules. What the file denotes is
the construction's enumeration on its parameters, which is exactly what `build_schedule`
makes; `materialize` builds it (within check_work), `rank_schedule` builds one rank's part alone
(optcc.algorithms.families.local, O(p·k)), and timing uses the index arrays.

A generated schedule is trusted only as far as the sources named still are: loading checks
the digest against the sources as they are now (field "sources_sha256"), and a verdict of
"proved" on it still needs the generator's proof re-checked (verifier.parametric.certificate.reprove).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from itertools import repeat
from fractions import Fraction
from typing import TYPE_CHECKING, Any, ClassVar

from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.files import read_json, write_text_atomic
from optcc.proof_sources import MIN_P, SOURCES, sources_digest

if TYPE_CHECKING:
    from optcc.algorithms.families.local import RankFlows
    from optcc.schedule import Schedule, ScheduleForm

FORMAT = "optcc-generated-schedule/1"
KEYS = ("format", "algo", "cluster", "segments", "sources_sha256")
MAX_RANK_SEGMENTS = 4096        # derived: k per rank, as check_work's MAX_SEGMENTS (O(p·k) per rank)


def generated_algos() -> tuple[str, ...]:
    """Constructions that have a generated form: the generators proved for every size."""
    return tuple(SOURCES)


def check_generator_range(algo: str, cluster: Cluster, field: str = "cluster") -> None:
    """The proof's range (verifier.parametric: g = 1, at most one straggler, p ≥ MIN_P), and for
    optcc a straggler (the record `optcc` serves a fault-free cluster with is another)."""
    why = _out_of_range(algo, cluster)
    if why:
        raise OptccError(field, why)


def _out_of_range(algo: str, cluster: Cluster) -> str | None:
    if cluster.g != 1 or len(cluster.stragglers) > 1 or cluster.p < MIN_P[algo]:
        return (f"the {algo} generator is proved for g = 1, p ≥ {MIN_P[algo]} and at most one straggler, "
                f"not {cluster.describe()}")
    if algo == "optcc" and not cluster.stragglers:
        return "single-straggler OptCC needs a straggler (a fault-free cluster is served by the ring)"
    return None


def generated_form_of(algo: str, cluster: Cluster) -> str | None:
    """The proved generator that builds what `algo` builds on this cluster (the serving record's
    `generator`), or None."""
    from optcc.algorithms.registry import served
    name = served(algo, cluster).generator
    if name is None or _out_of_range(name, cluster):
        return None
    return name


def why_not_generated(algo: str, cluster: Cluster) -> str:
    from optcc.algorithms.registry import served
    record = served(algo, cluster)
    name = record.generator
    if name is None:
        return (f"{algo} is served by {record.name} on {cluster.describe()}, which has no generated form "
                f"(only the generators proved for every size have one: {', '.join(SOURCES)})")
    return _out_of_range(name, cluster) or ""


@dataclass(frozen=True)
class GeneratedSchedule:
    """A ScheduleForm (optcc.schedule) named by its parameters: form "generated"."""

    form: ClassVar[str] = "generated"
    algo: str
    cluster: Cluster
    segments: int
    sources_sha256: str

    @classmethod
    def of(cls, algo: str, cluster: Cluster, segments: int) -> GeneratedSchedule:
        """The generated form of `algo` on (cluster, segments), naming the sources as they are now."""
        if not isinstance(algo, str) or algo not in SOURCES:
            raise OptccError("algo", f"{algo!r} has no generated form (known: {', '.join(SOURCES)}); "
                                     f"write its flow list instead")
        check_generator_range(algo, cluster)
        k = _segments(segments, "segments")
        _check_grid(algo, cluster, k, "cluster")
        return cls(algo, cluster, k, sources_digest(algo))

    # ---- the file ----------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "algo": self.algo, "cluster": self.cluster.to_json(),
                "segments": self.segments, "sources_sha256": self.sources_sha256}

    def canonical_bytes(self) -> bytes:
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":")).encode()

    def sha256(self) -> str:
        """The identity of the parameters (not of a flow list: the two forms hash differently)."""
        return hashlib.sha256(self.canonical_bytes()).hexdigest()

    def save(self, path: str, field: str = "output") -> None:
        write_text_atomic(path, json.dumps(self.to_json(), indent=1) + "\n", field)

    @classmethod
    def from_json(cls, data: object, check_sources: bool = True) -> GeneratedSchedule:
        """Validate every field; OptccError names the first bad one. `check_sources`: the digest
        must be the sources' own now (False only for reporting what a stale file says)."""
        if not isinstance(data, dict):
            raise OptccError("schedule", "expected a JSON object")
        for key in data:
            if key not in KEYS:
                raise OptccError("schedule." + key, f"unknown key in a generated schedule (known: {', '.join(KEYS)})")
        for key in KEYS:
            if key not in data:
                raise OptccError("schedule." + key, "missing")
        if data["format"] != FORMAT:
            raise OptccError("schedule.format", f"expected {FORMAT!r}, got {data['format']!r}")
        algo = data["algo"]
        if not isinstance(algo, str) or algo not in SOURCES:
            raise OptccError("schedule.algo", f"unknown construction {algo!r} for a generated schedule "
                                     f"(known: {', '.join(SOURCES)})")
        cluster = Cluster.from_json(data["cluster"], "schedule.cluster.")
        check_generator_range(algo, cluster, "schedule.cluster")
        k = _segments(data["segments"], "schedule.segments")
        _check_grid(algo, cluster, k, "schedule.cluster")
        digest = data["sources_sha256"]
        if not isinstance(digest, str) or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            raise OptccError("schedule.sources_sha256", f"expected 64 lowercase hex digits, got {digest!r}")
        if check_sources and digest != sources_digest(algo):
            raise OptccError("schedule.sources_sha256", f"the {algo} generator's sources changed since this file was "
                                               f"written (it names {digest[:16]}…, the sources are "
                                               f"{sources_digest(algo)[:16]}…); write it again with optcc schedule")
        return cls(algo, cluster, k, digest)

    @classmethod
    def load(cls, path: str) -> GeneratedSchedule:
        return cls.from_json(read_json(path, path))

    # ---- what it denotes ----------------------------------------------------------------------
    def params(self) -> tuple[int, int, int, Fraction]:
        """(p, k, straggler rank s, ℓ); a fault-free cluster is s = 0 at ℓ = 1."""
        (s, ell), = self.cluster.stragglers.items() if self.cluster.stragglers else [(0, Fraction(1))]
        return self.cluster.p, self.segments, s, Fraction(ell)

    @property
    def meta(self) -> dict[str, Any]:
        """The meta `build_schedule` gives the same schedule (the certificate checks it)."""
        from optcc.algorithms.single.build import optcc_meta
        from optcc.algorithms.ring.build import ring_meta
        return {"ring": ring_meta, "optcc": optcc_meta}[self.algo](self.cluster, self.segments)

    def materialize(self) -> Schedule:
        """The whole flow list (optcc.algorithms.build_schedule, so within check_work)."""
        from optcc.algorithms import build_schedule
        return build_schedule(self.algo, self.cluster, self.segments)

    def flow_list(self) -> Schedule:
        """The whole flow list (ScheduleForm): `materialize`."""
        return self.materialize()

    def rank_flows(self, rank: int) -> RankFlows:
        """One rank's flows as arrays in posting order (optcc.algorithms.families.local)."""
        from optcc.algorithms.families.local import rank_flow_arrays
        p, k, s, ell = self.params()
        if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < p:
            raise OptccError("rank", f"expected a rank in 0..{p - 1}, got {rank!r}")
        return rank_flow_arrays(self.algo, p, k, s, ell, rank)

    def rank_schedule(self, rank: int, arrays: RankFlows | None = None) -> Schedule:
        """A Schedule of this rank's flows alone (posting order), all pieces and the construction's
        meta: what a worker lowers into its program, one Flow per row of `arrays` (rank_flows(rank)
        when not given). Its flows are those of `materialize()` with `rank` at an end
        (tests/optcc/test_rank_local.py)."""
        import numpy as np

        from optcc.schedule import ONE, Flow, Schedule
        rf = self.rank_flows(rank) if arrays is None else arrays
        if rf.rank != rank:
            raise OptccError("rank", f"the arrays given are rank {rf.rank}'s flows, not rank {rank}'s")
        times, at = np.unique(rf.start, return_inverse=True)       # one Fraction per distinct start
        fractions = [Fraction(t, rf.scale) for t in times.tolist()]
        ops = ("add", "copy")
        rows = zip(rf.src.tolist(), rf.dst.tolist(), rf.piece.tolist(), map(ops.__getitem__, rf.op.tolist()),
                   map(fractions.__getitem__, at.tolist()), repeat("nic"), repeat(ONE), repeat(1))
        flows: list[Flow] = list(map(tuple.__new__, repeat(Flow), rows))   # Flow(...) with every field given
        return Schedule(self.cluster, rf.pieces, flows, meta=self.meta)


def _check_grid(algo: str, cluster: Cluster, k: int, field: str) -> None:
    """Refuse parameters whose flow starts do not fit the ranks' int64 start grid (an ℓ with a
    huge denominator), when the file is read rather than in every rank."""
    from optcc.algorithms.families.local import check_start_grid
    (s, ell), = cluster.stragglers.items() if cluster.stragglers else [(0, Fraction(1))]
    check_start_grid(algo, cluster.p, k, s, Fraction(ell), field)


def _segments(value: object, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise OptccError(field, f"expected a positive integer, got {value!r}")
    if value > MAX_RANK_SEGMENTS:
        raise OptccError(field, f"at most {MAX_RANK_SEGMENTS} segments, got {value}")
    return value


def is_generated(data: object) -> bool:
    """Whether parsed JSON is meant as a generated schedule (any version of the format)."""
    return isinstance(data, dict) and str(data.get("format", "")).startswith("optcc-generated-schedule/")


def load_any(path: str, field: str = "schedule") -> ScheduleForm:
    """A Schedule (flow list) or a GeneratedSchedule, by the file's format."""
    from optcc.schedule import Schedule
    data = read_json(path, field)
    if is_generated(data):
        return GeneratedSchedule.from_json(data)
    return Schedule.from_json(data)


def load_flows(path: str, field: str = "schedule") -> Schedule:
    """The flow list a command needs: the file's own, or a generated schedule built (check_work)."""
    return load_any(path, field).flow_list()
