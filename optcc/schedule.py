"""Schedule: the IR every package exchanges (DESIGN.md, "Schedule").

- `pieces`: sizes of the pieces the data is cut into, exact Fractions of n summing to 1.
- Every rank holds one value per piece, a linear combination of the ranks' inputs for that
  piece; initially rank r holds input_r.
- `Flow(src, dst, piece, op, start, link, rate, coef)`: at time `start` the flow reads the
  current value of (src, piece); when it lands (start + duration) dst either adds
  coef × value ("add") or overwrites with it ("copy"). `rate` is the fraction of the slower
  end's bandwidth the flow uses (1 = the whole port, the paper's rule).
- `LocalOp(rank, piece, time, coef)`: rank scales its value of piece by the integer coef at
  `time` (multi-straggler combination rules need a signed step).
- Times are exact Fractions in units of n/B (see optcc.cluster).
- `stated_slot_time` (JSON key "slot_time", optional): the finish time the schedule's generator
  states from its closed form (optcc.algorithms.registry's `slot_time`; build_schedule writes
  it). The verifier's `time` property proves the schedule ends exactly then; a schedule that
  states none reports `time: not stated`. (A meta.slot_time, the old place, is read the same.)

Semantics at one instant t: flows that end at t land first, then local ops at t apply, then
flows that start at t read. JSON format "optcc-schedule/1" round-trips exactly.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any, ClassVar, NamedTuple, Protocol

from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.exact import fraction_to_json, parse_fraction, show
from optcc.files import read_json, write_text_atomic

FORMAT = "optcc-schedule/1"
LINKS = ("nic", "nvlink")
OPS = ("add", "copy")
ONE = Fraction(1)
MAX_COEF = 2**62       # derived: every coefficient is an int64 scalar for torch (add_ alpha, mul_)


class Flow(NamedTuple):
    src: int
    dst: int
    piece: int
    op: str
    start: Fraction
    link: str = "nic"
    rate: Fraction = ONE
    coef: int = 1


class LocalOp(NamedTuple):
    rank: int
    piece: int
    time: Fraction
    coef: int


class ScheduleForm(Protocol):
    """What both forms of a schedule are to their users: `Schedule` ("flows", the flow list) and
    optcc.generated.GeneratedSchedule ("generated", a proved construction's parameters). Runners
    and commands read `form` to find the row of their own table that handles it (the runner's
    admission, gpu_runner.admission), never isinstance."""

    form: ClassVar[str]

    @property
    def cluster(self) -> Cluster: ...

    @property
    def meta(self) -> dict[str, Any]: ...

    def sha256(self) -> str: ...

    def canonical_bytes(self) -> bytes: ...

    def to_json(self) -> dict[str, Any]: ...

    def save(self, path: str, field: str = "output") -> None: ...

    def flow_list(self) -> Schedule:
        """The whole flow list (a generated schedule builds it, within check_work)."""
        ...


class Schedule:
    """Pieces, flows and local ops on a Cluster, the stated slot time (or None), plus free-form
    `meta` (algorithm, params)."""

    form: ClassVar[str] = "flows"

    def __init__(self, cluster: Cluster, pieces: Iterable[Fraction | int], flows: Iterable[Flow],
                 local_ops: Iterable[LocalOp] = (), meta: Mapping[str, Any] | None = None,
                 stated_slot_time: Fraction | None = None) -> None:
        self.cluster = cluster
        self.pieces: list[Fraction] = [x if type(x) is Fraction else Fraction(x) for x in pieces]   # (immutable: shared)
        self.flows: list[Flow] = list(flows)
        self.local_ops: list[LocalOp] = list(local_ops)
        self.meta: dict[str, Any] = dict(meta or {})
        self._stated: Fraction | None = stated_slot_time

    @property
    def stated_slot_time(self) -> Fraction | None:
        """The slot time this schedule states (n/B): the field, else the old meta.slot_time; None: none."""
        if self._stated is not None:
            return self._stated
        legacy = self.meta.get("slot_time")
        return None if legacy is None else _stated_number(legacy, "meta.slot_time")

    @stated_slot_time.setter
    def stated_slot_time(self, value: Fraction | None) -> None:
        self._stated = value

    def flow_list(self) -> Schedule:
        """This schedule (ScheduleForm: it is its flow list)."""
        return self

    def __repr__(self) -> str:
        return (f"Schedule({self.cluster.describe()}, {len(self.pieces)} pieces, "
                f"{len(self.flows)} flows, meta={self.meta})")

    # ---- checks -------------------------------------------------------------------------
    def validate(self) -> Schedule:
        """Raise OptccError naming the first bad field (path as in the JSON file)."""
        _validate_pieces(self.pieces)
        if self._stated is not None and (not isinstance(self._stated, Fraction) or self._stated <= 0):
            raise OptccError("slot_time", f"expected a time > 0 (n/B), got {show(self._stated)}")
        legacy = self.meta.get("slot_time")
        if legacy is not None:
            value = _stated_number(legacy, "meta.slot_time")
            if self._stated is not None and value != self._stated:
                raise OptccError("meta.slot_time", f"states {show(value)} but slot_time states {show(self._stated)}")
        p, g = self.cluster.p, self.cluster.g
        n_pieces = len(self.pieces)
        for i, f in enumerate(self.flows):
            where = f"flows[{i}]"
            for name in ("src", "dst", "piece", "coef"):
                v = getattr(f, name)
                if isinstance(v, bool) or not isinstance(v, int):
                    raise OptccError(f"{where}.{name}", f"expected an integer, got {v!r}")
            if not 0 <= f.src < p:
                raise OptccError(where + ".src", f"rank {f.src} is out of range 0..{p - 1}")
            if not 0 <= f.dst < p:
                raise OptccError(where + ".dst", f"rank {f.dst} is out of range 0..{p - 1}")
            if f.src == f.dst:
                raise OptccError(where + ".dst", f"a flow cannot go from rank {f.src} to itself")
            if not 0 <= f.piece < n_pieces:
                raise OptccError(where + ".piece", f"piece {f.piece} is out of range 0..{n_pieces - 1}")
            if not isinstance(f.op, str) or f.op not in OPS:
                raise OptccError(where + ".op", f"expected one of {OPS}, got {f.op!r}")
            if f.op == "copy" and f.coef != 1:
                raise OptccError(where + ".coef", "a copy flow has no coefficient (must be 1)")
            if f.coef == 0:
                raise OptccError(where + ".coef", "coefficient 0 moves nothing")
            if abs(f.coef) > MAX_COEF:
                raise OptccError(where + ".coef", f"|coefficient| must be at most 2**62 (an int64 scalar), got {f.coef}")
            if not isinstance(f.start, Fraction) or f.start < 0:
                raise OptccError(where + ".start", f"expected a time ≥ 0, got {show(f.start)}")
            if not isinstance(f.link, str) or f.link not in LINKS:
                raise OptccError(where + ".link", f"expected one of {LINKS}, got {f.link!r}")
            if f.link == "nvlink" and f.src // g != f.dst // g:
                raise OptccError(where + ".link", f"NVLink joins GPUs of one server; ranks {f.src} and "
                                                  f"{f.dst} are on servers {f.src // g} and {f.dst // g}")
            if not isinstance(f.rate, Fraction) or not 0 < f.rate <= 1:
                raise OptccError(where + ".rate", f"expected a fraction in (0, 1], got {show(f.rate)}")
        for i, op in enumerate(self.local_ops):
            where = f"local_ops[{i}]"
            for name in ("rank", "piece"):
                v = getattr(op, name)
                if isinstance(v, bool) or not isinstance(v, int):
                    raise OptccError(f"{where}.{name}", f"expected an integer, got {v!r}"[:200])
            if not 0 <= op.rank < p:
                raise OptccError(where + ".rank", f"rank {op.rank} is out of range 0..{p - 1}")
            if not 0 <= op.piece < n_pieces:
                raise OptccError(where + ".piece", f"piece {op.piece} is out of range 0..{n_pieces - 1}")
            if not isinstance(op.time, Fraction) or op.time < 0:
                raise OptccError(where + ".time", f"expected a time ≥ 0, got {show(op.time)}")
            if isinstance(op.coef, bool) or not isinstance(op.coef, int) or op.coef == 0 or abs(op.coef) > MAX_COEF:
                raise OptccError(where + ".coef", f"expected a non-zero integer of at most 2**62 in size, "
                                                  f"got {op.coef!r}"[:200])
        return self

    # ---- JSON ---------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return self._json_with(self._flows_json())

    def _flows_json(self) -> list[dict[str, int | str]]:
        flows = []
        starts: dict[Fraction, int | str] = {}                  # start -> its JSON form (flows share few distinct starts)
        for f in self.flows:
            start = starts.get(f.start)
            if start is None:
                start = starts[f.start] = fraction_to_json(f.start)
            d: dict[str, int | str] = {"src": f.src, "dst": f.dst, "piece": f.piece, "op": f.op, "start": start}
            if f.link != "nic":
                d["link"] = f.link
            if f.rate != 1:
                d["rate"] = fraction_to_json(f.rate)
            if f.coef != 1:
                d["coef"] = f.coef
            flows.append(d)
        return flows

    def _json_with(self, flows: object) -> dict[str, Any]:
        out: dict[str, Any] = {
            "format": FORMAT,
            "meta": self.meta,
            "cluster": self.cluster.to_json(),
            "pieces": [fraction_to_json(x) for x in self.pieces],
            "flows": flows,
        }
        if self._stated is not None:
            out["slot_time"] = fraction_to_json(self._stated)
        if self.local_ops:
            out["local_ops"] = [{"rank": o.rank, "piece": o.piece, "time": fraction_to_json(o.time),
                                 "coef": o.coef} for o in self.local_ops]
        return out

    @classmethod
    def from_json(cls, data: object) -> Schedule:
        if not isinstance(data, dict):
            raise OptccError("(top level)", "expected a JSON object")
        if data.get("format") != FORMAT:
            raise OptccError("format", f"expected {FORMAT!r}, got {data.get('format')!r}")
        known = {"format", "meta", "cluster", "pieces", "flows", "local_ops", "slot_time"}
        for key in data:
            if key not in known:
                raise OptccError(key, f"unknown key (known: {', '.join(sorted(known))})")
        for key in ("cluster", "pieces", "flows"):
            if key not in data:
                raise OptccError(key, "missing")
        cluster = Cluster.from_json(data["cluster"])
        if not isinstance(data["pieces"], list):
            raise OptccError("pieces", "expected a list of sizes (fractions of n)")
        pieces = [parse_fraction(x, f"pieces[{i}]") for i, x in enumerate(data["pieces"])]
        if not isinstance(data["flows"], list):
            raise OptccError("flows", "expected a list of flows")
        cache: dict[tuple[type, object], Fraction] = {}

        def frac(value: object, where: str) -> Fraction:
            key = (type(value), value)
            try:
                return cache[key]
            except (KeyError, TypeError):
                x = parse_fraction(value, where)
                try:
                    cache[key] = x
                except TypeError:
                    pass
                return x

        flow_keys = {"src", "dst", "piece", "op", "start", "link", "rate", "coef"}
        flows = []
        for i, d in enumerate(data["flows"]):
            where = f"flows[{i}]"
            if not isinstance(d, dict):
                raise OptccError(where, "expected an object")
            for key in d:
                if key not in flow_keys:
                    raise OptccError(f"{where}.{key}", f"unknown key (known: {', '.join(sorted(flow_keys))})")
            for key in ("src", "dst", "piece", "op", "start"):
                if key not in d:
                    raise OptccError(f"{where}.{key}", "missing")
            flows.append(Flow(d["src"], d["dst"], d["piece"], d["op"], frac(d["start"], where + ".start"),
                              d.get("link", "nic"), frac(d.get("rate", 1), where + ".rate"), d.get("coef", 1)))
        local_ops = []
        raw_ops = data.get("local_ops", [])
        if not isinstance(raw_ops, list):
            raise OptccError("local_ops", "expected a list")
        for i, d in enumerate(raw_ops):
            where = f"local_ops[{i}]"
            if not isinstance(d, dict) or set(d) != {"rank", "piece", "time", "coef"}:
                raise OptccError(where, "expected an object {rank, piece, time, coef}")
            local_ops.append(LocalOp(d["rank"], d["piece"], frac(d["time"], where + ".time"), d["coef"]))
        meta = data.get("meta", {})
        if not isinstance(meta, dict):
            raise OptccError("meta", "expected an object")
        stated = _stated_number(data["slot_time"], "slot_time") if "slot_time" in data else None
        return cls(cluster, pieces, flows, local_ops, meta, stated).validate()

    def canonical_bytes(self) -> bytes:
        """Canonical JSON (sorted keys, no spaces): what the certificate hash is taken over.
        The flows are written by `_canonical_flows` (the same bytes as json.dumps, several times
        faster on the 10⁵-10⁶ flows of one rank's part at p = 4096; tests/optcc/test_schedule_hash.py)."""
        flows = _canonical_flows(self.flows)
        if flows is None:
            return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":")).encode()
        text = json.dumps(self._json_with(_SENTINEL), sort_keys=True, separators=(",", ":"))
        if text.count(_SENTINEL_JSON) != 1:       # the marker also in a name: the plain way
            return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":")).encode()
        return text.replace(_SENTINEL_JSON, flows, 1).encode()

    def sha256(self) -> str:
        return hashlib.sha256(self.canonical_bytes()).hexdigest()

    def save(self, path: str, field: str = "output") -> None:
        """Write atomically (optcc.files.write_text_atomic): never half-written, never over a device."""
        write_text_atomic(path, json.dumps(self.to_json(), separators=(",", ":")), field)

    @classmethod
    def load(cls, path: str) -> Schedule:
        """Read and validate (optcc.files.read_json: every unreadable input is an OptccError)."""
        return cls.from_json(read_json(path, path))


_SENTINEL = "\x00optcc-flows\x00"
_SENTINEL_JSON = json.dumps(_SENTINEL)
_WORDS = {w: json.dumps(w) for w in ("add", "copy", "nic", "nvlink")}


def _canonical_flows(flows: Iterable[Flow]) -> str | None:
    """The flows' canonical JSON array (keys sorted: coef, dst, link, op, piece, rate, src, start),
    or None where a field is not a plain int or known word (json.dumps then decides)."""
    starts: dict[int, str] = {}            # id(start) -> its JSON text (flows share start objects)
    keep = []                              # the start objects, so that no id is reused meanwhile
    out: list[str] = []
    append = out.append
    words = _WORDS
    for f in flows:
        src, dst, piece, op, start, link, rate, coef = f
        if type(src) is not int or type(dst) is not int or type(piece) is not int or op not in words \
                or link not in words or type(coef) is not int or type(start) is not Fraction:
            return None
        st = starts.get(id(start))
        if st is None:
            n, d = start.numerator, start.denominator
            st = starts[id(start)] = str(n) if d == 1 else f'"{n}/{d}"'
            keep.append(start)
        head = "" if coef == 1 else f'"coef":{coef},'
        mid = "" if link == "nic" else f'"link":{words[link]},'
        tail = "" if rate is ONE or rate == 1 else f'"rate":{json.dumps(fraction_to_json(rate))},'
        append(f'{{{head}"dst":{dst},{mid}"op":{words[op]},"piece":{piece},{tail}"src":{src},"start":{st}}}')
    return "[" + ",".join(out) + "]"


def posting_order(schedule: Schedule, starts: Sequence[Fraction] | Sequence[int] | None = None) -> list[int]:
    """Flow indices sorted by (start, src, dst, piece, index): the one order in which every rank
    posts its flows (optcc.lowering.step), so both ends of every pair post alike, and in which
    landings of one instant are applied, by the runners and every verifier property. `starts`: per-flow start times in any order-preserving encoding
    (e.g. optcc.timing.IntegerTimes.starts, faster to compare); default the flows' own starts."""
    flows = schedule.flows
    starts = [f.start for f in flows] if starts is None else starts
    return sorted(range(len(flows)), key=lambda i: (starts[i], flows[i].src, flows[i].dst, flows[i].piece, i))

def _stated_number(value: object, where: str) -> Fraction:
    """A stated slot time as JSON holds it (a number or a fraction string), or OptccError naming `where`."""
    if not isinstance(value, (int, float, str)) or isinstance(value, bool):
        raise OptccError(where, f"expected a number (n/B, e.g. 3 or \"8/7\"), got {value!r}")
    return parse_fraction(value, where)


def _validate_pieces(pieces: list[Fraction]) -> None:
    if not pieces:
        raise OptccError("pieces", "a schedule needs at least one piece")
    for i, x in enumerate(pieces):
        if not isinstance(x, Fraction) or x <= 0:
            raise OptccError(f"pieces[{i}]", f"expected a positive fraction of n, got {show(x)}")
    total = sum(pieces)
    if total != 1:
        raise OptccError("pieces", f"piece sizes must add up to 1 (the whole vector), they add up to {show(total)}")
