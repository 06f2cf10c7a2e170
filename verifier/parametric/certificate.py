"""Generator certificates: `optcc prove-all` proved a construction's families for all sizes;
a schedule is covered when it is exactly the proved formulas' enumeration on its own parameters.

The certificate (format "optcc-generator-certificate/2") names the construction, the range,
`sources_sha256` (every module that determines a schedule, its durations or canonical form:
the import closure of the construction, its families, optcc.cluster/timing/schedule and the
obligations) and a WITNESS, `obligations_sha256`: the digest of the exact obligations proved.
Checking one (`generator_certificate_check`), cheapest first:
  1. format, construction, range (g = 1, at most one straggler, p ≥ p_min);
  2. work limits before any regeneration: segments and p²·k (check_work), then the flow and
     piece counts the families have on these parameters against the schedule's own;
  3. `sources_sha256` against the sources as they are now (any edit invalidates it);
  4. the obligations rebuilt from the sources, their digest against the witness, and every
     one re-proved by Z3 (seconds, once per process): a hand-written "proved" is never taken;
  5. the instance: the verifier enumerates the families itself, over spans the obligations
     prove cover every domain, mapping nodes, pieces and slots to ranks, indices and times
     with the families' glue (node_rank, piece_index, phase_clock, piece_sizes), the very
     functions the obligations state as Z3 terms;
     the schedule must be that enumeration byte for byte (sha256), and the timing model's
     duration of every flow (optcc.timing.durations, Cluster.nic_time) must equal the proved
     duration (family dur × slot), and a stated slot time must be the proved flows' last
     landing. The generator's own loops and glue are thereby checked, not trusted.
"""
from __future__ import annotations

import json
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import z3

from optcc.errors import OptccError
from optcc.files import write_text_atomic
from optcc.proof_sources import MIN_P as _MIN_P
from optcc.proof_sources import SOURCES as _SOURCES
from optcc.proof_sources import source_files, sources_digest  # noqa: F401  (re-exported)
from verifier.trust_files import check_file, trust_format

if TYPE_CHECKING:
    from optcc.algorithms.families import Family, Term
    from optcc.cluster import Cluster
    from optcc.schedule import Flow, Schedule

FORMAT = trust_format("optcc-generator-certificate").format
def check_certifiable(algo: str) -> None:
    """Refuse (OptccError "certificate") a construction that has no generator certificate."""
    if not isinstance(algo, str) or algo not in _SOURCES:
        raise OptccError("certificate", f"no generator certificate for {algo!r} (only {', '.join(_SOURCES)}): "
                                        "its schedules are proved per instance by the runner's gate")


def write_generator_certificate(result: dict[str, Any], path: str) -> None:
    """Atomically write the certificate of a prove_all result; refuses one that did not prove."""
    check_certifiable(result["algo"])
    if not result.get("proved"):
        raise OptccError("certificate", "only a proved construction gets a generator certificate")
    data = {"format": FORMAT, "algo": result["algo"], "proved": True, "for_all": result["for_all"],
            "properties": result["properties"], "obligations": result["obligations"],
            "witness": {"obligations_sha256": result["obligations_sha256"]},
            "sources_sha256": sources_digest(result["algo"]), "z3_version": z3.get_version_string()}
    write_text_atomic(path, json.dumps(data, indent=2) + "\n", "certificate")


_REPROVED: dict[tuple[str, str], tuple[str, str | None]] = {}      # (algo, sources digest) -> (obligations digest, None or the failure)
_RANGE: dict[tuple[str, str], str] = {}         # (algo, sources digest) -> the range the obligations are stated for


def reprove(algo: str) -> tuple[str, str | None]:
    """(digest of the obligations as the sources state them now, None if Z3 proves every one,
    else the first failure). Once per process and sources digest: the obligations are a
    function of the sources."""
    from verifier.parametric.obligations import discharge
    from verifier.parametric.prove import obligations, obligations_digest
    key = (algo, sources_digest(algo))
    if key not in _REPROVED:
        _RANGE[key], obs = obligations(algo)
        why = None
        for ob in obs:
            r = discharge(ob)
            if r["status"] != "proved":
                why = f"obligation {r['obligation']!r} ({r['property']}) is {r['status']}"
                break
        _REPROVED[key] = (obligations_digest(obs), why)
    return _REPROVED[key]


def _params(algo: str, c: Cluster) -> tuple[int, Fraction]:
    (s, ell), = c.stragglers.items() if c.stragglers else [(0, Fraction(1))]
    return s, Fraction(ell)


def expected_counts(algo: str, p: int, k: int, ell: Fraction) -> tuple[int, int]:
    """(flows, pieces) the families have on (p, k, ℓ): a size check before any enumeration."""
    if algo == "ring":
        return 2 * k * (p - 1) * p, k * p
    H, small = p - 1, ell < 2
    flows = 2 * (H - 1) * H + 2 * (k - 1) * H * (H - 1) + 2 * k * H + (2 * (k - 1) * H if small else 0)
    return flows, k * H + (k - 1 if small else 0)


def reference(algo: str, c: Cluster, k: int) -> tuple[list[Fraction], list[Flow], list[Fraction]]:
    """(pieces, flows, durations) enumerated by the verifier from the proved terms (module doc, 5)."""
    from optcc.algorithms.families import INT, Params
    from optcc.schedule import Flow
    s, ell = _params(algo, c)
    p = c.p
    P = Params(p, k, ell, s)
    F: Any                          # the construction's families module, and its verifier model
    PV: Any
    if algo == "ring":
        from optcc.algorithms.ring import families as F
        from verifier.parametric import ring as PV
        origins, units = [Fraction(0)], [F.slot(INT, P)]
        pieces = F.piece_sizes(P)

        def rank(n: Term) -> Term:
            return n

        def piece_of(key: tuple[Term, ...]) -> Term:
            return F.piece_index(INT, P, key)
    else:
        from optcc.algorithms.single import families as F
        from verifier.parametric import optcc as PV
        origins, units = F.phase_clock(INT, P)
        pieces = F.piece_sizes(P)

        def rank(n: Term) -> Term:
            return F.node_rank(INT, P, n)

        def piece_of(key: tuple[Term, ...]) -> Term:
            return F.piece_index(INT, P, key)
    fams: dict[str, Family] = {f.name: f for f in F.FAMILIES}
    sp: dict[str, list[range]] = {name: [range(lo, hi + 1) for lo, hi in r] for name, r in PV.spans(P).items()}
    flows: list[Flow] = []
    durs: list[Fraction] = []
    starts: dict[Fraction, Fraction] = {}

    def emit(fam: Family, idx: tuple[int, ...]) -> None:
        if not all(fam.domain(INT, P, *idx)):
            return
        T = fam.terms(INT, P, *idx)
        t = origins[T.phase] + (T.box + T.offset) * units[T.phase]
        t = starts.setdefault(t, t)
        flows.append(Flow(rank(T.src), rank(T.dst), piece_of(T.piece), fam.op, t))
        durs.append(T.dur * units[T.phase])

    def every(name: str, *outer: int) -> None:
        r = sp[name]
        if len(outer) == 0:
            for a in r[0]:
                for b in r[1]:
                    emit(fams[name], (a, b))
        elif len(r) == 2:
            emit(fams[name], outer)
        else:
            for j in r[2]:
                emit(fams[name], (*outer, j))

    if algo == "ring":
        rs, ag = F.FAMILIES
        if sp[rs.name][0] != sp[ag.name][0] or sp[rs.name][2] != sp[ag.name][2]:
            raise OptccError("certificate", "the ring families' spans disagree on σ or i")
        for sigma in sp[rs.name][0]:
            for fam in (rs, ag):
                for h in sp[fam.name][1]:
                    for i in sp[fam.name][2]:
                        emit(fam, (sigma, h, i))
    else:
        pro, rs, up, down, p2p_up, p2p_down, ag, epi = F.FAMILIES
        job = sp[up.name][:2]
        if any(sp[f.name][:2] != job for f in (rs, down, p2p_up, p2p_down, ag)):
            raise OptccError("certificate", "the pipeline families' spans disagree on (σ, o)")
        every(pro.name)
        for sigma in job[0]:
            for o in job[1]:
                for fam in (rs, up, down, p2p_up, p2p_down, ag):
                    every(fam.name, sigma, o)
        every(epi.name)
    return pieces, flows, durs


def _semantic_meta(algo: str, schedule: Schedule, k: int) -> None:
    want: dict[str, object] = {"algorithm": algo, "segments": k, "capacity": "exclusive"}
    if algo == "optcc":
        want["straggler"] = _params(algo, schedule.cluster)[0]
    meta = schedule.meta
    if any(meta.get(key) != v for key, v in want.items()):
        raise OptccError("meta", f"expected {want} in the schedule's meta")


def generator_certificate_check(schedule: Schedule, path: str) -> tuple[bool, str]:
    """(True, note) iff `path` certifies the construction that produces exactly `schedule`."""
    return check_file(path, "optcc-generator-certificate", lambda data: generator_certificate_data_check(schedule, data))


def generator_certificate_data_check(schedule: Schedule, data: dict[str, Any]) -> tuple[bool, str]:
    """generator_certificate_check of a file verifier.trust_files has read (a current one)."""
    from optcc.algorithms import check_segments, check_work
    from optcc.schedule import Schedule
    from optcc.timing import durations, slot_time
    if data.get("proved") is not True:
        return False, "it does not record a proved construction (run prove-all again)"
    algo = data.get("algo")
    if not isinstance(algo, str) or algo not in _SOURCES or schedule.meta.get("algorithm") != algo:
        return False, f"certificate is for {algo!r}, schedule says {schedule.meta.get('algorithm')!r}"
    props = data.get("properties")
    if not isinstance(props, dict) or any(v != "proved" for v in props.values()) or "sum" not in props:
        return False, "certificate does not prove every property"
    witness = data.get("witness")
    if not isinstance(witness, dict) or not isinstance(witness.get("obligations_sha256"), str):
        return False, "certificate carries no witness (witness.obligations_sha256)"
    c = schedule.cluster
    if c.g != 1 or len(c.stragglers) > 1 or c.p < _MIN_P[algo]:
        return False, (f"the proof covers g = 1, p ≥ {_MIN_P[algo]} and at most one straggler, "
                       f"not {c.describe()}")
    try:
        k = check_segments(schedule.meta.get("segments"))
        check_work(c, k)
        _semantic_meta(algo, schedule, k)
    except OptccError as e:
        return False, f"cannot regenerate the schedule from its parameters: {e}"
    _, ell = _params(algo, c)
    n_flows, n_pieces = expected_counts(algo, c.p, k, ell)
    if (len(schedule.flows), len(schedule.pieces), len(schedule.local_ops)) != (n_flows, n_pieces, 0):
        return False, (f"the proved {algo} generator has {n_flows} flows, {n_pieces} pieces and no local ops "
                       f"on these parameters; the schedule has {len(schedule.flows)}, {len(schedule.pieces)}, "
                       f"{len(schedule.local_ops)}")
    if data.get("sources_sha256") != sources_digest(algo):
        return False, ("the sources that determine the schedule changed since the proof (sources_sha256 "
                       "differs); run prove-all again")
    digest, failure = reprove(algo)
    if witness["obligations_sha256"] != digest:
        return False, "the witness names other obligations than the sources state (obligations_sha256 differs)"
    if failure is not None:
        return False, f"re-proving the generator: {failure}: the certificate is forged or stale"
    proved_for = _RANGE[(algo, sources_digest(algo))]
    if data.get("for_all") != proved_for:
        return False, (f"the certificate says it covers {data.get('for_all')!r}; the re-proved obligations are "
                       f"stated for {proved_for!r}")
    try:
        pieces, flows, durs = reference(algo, c, k)
    except OptccError as e:
        return False, f"cannot enumerate the proved families: {e.message}"
    again = Schedule(c, pieces, flows, meta=schedule.meta, stated_slot_time=schedule.stated_slot_time)
    if again.sha256() != schedule.sha256():
        return False, (f"the schedule (sha256 {schedule.sha256()[:16]}…) is not the enumeration of the proved "
                       f"{algo} families for its cluster and segments ({again.sha256()[:16]}…)")
    for i, (model, proved) in enumerate(zip(durations(schedule), durs)):
        if model != proved:
            f = schedule.flows[i]
            return False, (f"flow {i} ({f.src} -> {f.dst}, piece {f.piece}) lasts {model} in the timing model, "
                           f"the proof assumes {proved}")
    stated = schedule.stated_slot_time
    if stated is not None:          # the durations are the proved ones (above), so this is the proved flows' end
        finish = slot_time(schedule)
        if finish != stated:
            return False, f"the schedule states slot time {stated} n/B but its proved flows end at {finish} n/B"
    return True, (f"{algo} generator re-proved for {proved_for}; schedule is its enumeration, "
                  f"sha256 {schedule.sha256()[:16]}…, durations as proved"
                  + ("" if stated is None else f", ends at the stated slot time {stated} n/B"))
