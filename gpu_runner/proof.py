"""Refuse to run a schedule the verifier has not proved (DESIGN.md, "Runner").

Calls the real verifier: `verifier.prove_allreduce(schedule)` (a Z3 proof), or, when a
certificate file is given, `verifier.check_certificate(schedule, path)` (re-executes the
schedule symbolically and re-checks the certificate's witness: no Z3, about linear time) or,
for a generator certificate (verifier.parametric.certificate), its check: the generator's
obligations re-proved by Z3 (once per process), the schedule compared with the proved formulas'
enumeration on its parameters and every duration with the timing model. Nothing here
decides correctness by itself. `require_numerics` adds the
floating-point side (verifier.numerics) for the dtype about to run.

`gate` is the library's door: every public entry point that executes a schedule (Executor,
StreamingExecutor, run_virtual; the CLI, the workers and the DDP hook via require_proof)
passes through it. A schedule require_proof accepted in this process (by proof or by a
re-checked certificate, recorded by sha256) passes at once; any other is proved (or its
certificate checked) there, and refused with OptccError("schedule" | "certificate", why).
Only an explicit `unsafe=True` (tests that must run a wrong schedule) skips it.

Streaming programs (optcc.lowering.streaming) pass the same door: `require_streaming` proves a
schedule's programs (verifier.streaming) and records every rank's digest; `rank_program_of`
gives a rank the program it runs, built for that rank alone and compared with a recorded
digest, never an unproved one.

A launcher proves once; its workers do not prove again. `write_attestation` writes what this
process accepted (the schedule's sha256, the proof's description, the numerics decision, the
proved programs' digests) signed with HMAC-SHA256 under a random key that only this process
and the workers it starts hold: gpu_runner.launch hands it to each worker on an inherited pipe
(the fd named by LAUNCH_KEY_FD_ENV, read once and closed), never in the environment.
`accept_attestation` in a worker checks the signature and the schedule's sha256 and records
the same acceptance, so each worker builds and compares only its own program. A worker started
any other way (torchrun) holds no launcher's key, so it refuses an attestation, whoever signed
it: it re-checks a certificate or re-proves the generator itself.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from dataclasses import dataclass, field, fields

from optcc.errors import OptccError
from optcc.files import write_text_atomic
from optcc.lowering.digest import program_record, rank_program_sha256
from optcc.lowering.streaming import DEFAULT_WINDOW, rank_program
from optcc.schedule import Schedule
from verifier.trust_files import read_trust_file, trust_format


@dataclass
class _Accepted:
    """What this process accepted, one dict per door (a worker starts with none: `forget`)."""

    proofs: dict = field(default_factory=dict)     # sha256 -> Proof made here (launch writes the workers' certificate)
    schedules: dict = field(default_factory=dict)  # sha256 -> description: schedules require_proof accepted
    numerics: dict = field(default_factory=dict)   # (sha256, dtype, allow_worse) -> the numerics message accepted
    programs: dict = field(default_factory=dict)   # (sha256, window, recv_order) -> program_record of proved programs
    generated: dict = field(default_factory=dict)  # generated schedule sha256 -> the attestation body accepted
    built: dict = field(default_factory=dict)      # (id(part), window, recv_order) -> (part, its program checked: L1-L5)
    parts: dict = field(default_factory=dict)      # id(part) -> (part, description, {(dtype, allow_worse): numerics}):
    #   a worker's own part of a generated schedule, accepted as that very object (hashing its
    #   10⁵-10⁶ flows again at each door would cost a second each)

    def clear(self) -> None:
        for f in fields(self):
            getattr(self, f.name).clear()


_STORE = _Accepted()
PER_RANK = "per-rank"  # attestation "streaming": each worker checks its own program (verifier.streaming_local)
LAUNCH_KEY_ENV = "OPTCC_LAUNCH_KEY"       # never read: named only to say it is not trusted
LAUNCH_KEY_FD_ENV = "OPTCC_LAUNCH_KEY_FD"  # the inherited pipe a launcher's worker reads its key from
_HELD: list = []      # the launcher's key this worker read from its pipe (at most one)
ATTESTATION_FORMAT = trust_format("optcc-launch-attestation").format
_KEY: list = []       # this process's signing key, made on first use
UNSAFE = "UNSAFE: executed without a proof or certificate (unsafe=True, for tests only)"


def forget() -> None:
    """Drop everything this process accepted (proofs, numerics, programs): a fresh worker's state."""
    _STORE.clear()


def proof_of(schedule: Schedule):
    """The Proof require_proof made for this exact schedule in this process, or None."""
    return _STORE.proofs.get(schedule.sha256())


def require_proof(schedule: Schedule, certificate: str | None = None) -> str:
    """Return a one-line description of the proof, or raise OptccError('schedule', why)."""
    from verifier import prove_allreduce
    if certificate:
        return _accept(schedule, _certificate_accepts(schedule, certificate))
    proof = prove_allreduce(schedule, reported=())
    _STORE.proofs[schedule.sha256()] = proof
    if not proof.proved:
        cx = proof.counterexample          # the first failed property, always with a message
        raise OptccError("schedule", "the verifier did not prove this schedule computes the AllReduce: "
                                     f"{cx['property']}: {cx['message']}; refusing to run it")
    unstated = "" if "time" in proof.properties else "; time not stated"
    return _accept(schedule, f"proved by the verifier ({', '.join(proof.properties)}{unstated}) in {proof.seconds:.2f} s")


# A certificate's kind (verifier.trust_files) -> the check of a current file of that kind and what
# its acceptance says: an instance witness, rails' witnesses plus the composition theorem, or a
# generator proved for every size.
_CERTIFICATE_CHECKS = {
    "optcc-certificate": ("verifier.certificate:check_certificate_data",
                          "re-checked (witness, causality, runnable) for schedule sha256 {sha}"),
    "optcc-rails-certificate": ("verifier.rails_certificate:check_rails_certificate_data",
                                "re-checked (per-rail witnesses and causality, NVLink brackets, runnable; "
                                "composition theorem re-proved) for schedule sha256 {sha}"),
    "optcc-generator-certificate": ("verifier.parametric.certificate:generator_certificate_data_check", "{why}"),
}


def _certificate_accepts(schedule: Schedule, path: str) -> str:
    """What a certificate file vouches for `schedule`, re-checked here, or OptccError("certificate")."""
    import importlib

    from verifier.trust_files import read_trust_file
    fmt, data = read_trust_file(path, "certificate", _CERTIFICATE_CHECKS)
    where, accepted = _CERTIFICATE_CHECKS[fmt.family]
    module, name = where.split(":")
    ok, why = getattr(importlib.import_module(module), name)(schedule, data)
    sha = schedule.sha256()[:16]
    if not ok:
        raise OptccError("certificate", f"{path} ({fmt.what}) does not certify this schedule (sha256 {sha}…): "
                                        f"{why}; refusing to run it")
    return f"{fmt.what} {path} " + accepted.format(sha=sha, why=why)


def _accept(schedule: Schedule, description: str) -> str:
    _STORE.schedules[schedule.sha256()] = description
    return description


def gate(schedule: Schedule, certificate: str | None = None, unsafe: bool = False) -> str:
    """The proof description under which `schedule` may execute (module docstring), or OptccError."""
    if unsafe is True:
        return UNSAFE
    if unsafe is not False:
        raise OptccError("unsafe", f"expected True or False, got {unsafe!r}")
    if not isinstance(schedule, Schedule):
        raise OptccError("schedule", f"expected an optcc Schedule, got {type(schedule).__name__}")
    part = _part(schedule)
    if certificate is None and part is not None:
        return part[1]
    if certificate is None:
        known = _STORE.schedules.get(schedule.sha256())
        if known is not None:
            return known
    return require_proof(schedule, certificate)


def require_numerics(schedule: Schedule, dtype: str, allow_worse: bool = False) -> str:
    """Refuse a schedule whose rounding-error bound for `dtype` is worse than the ring's (or whose
    intermediates can overflow an integer dtype) unless `allow_worse`; returns the one-line report."""
    part = _part(schedule)
    if part is not None and (dtype, bool(allow_worse)) in part[2]:
        return part[2][(dtype, bool(allow_worse))]
    key = (schedule.sha256(), dtype, bool(allow_worse))
    if key in _STORE.numerics:
        return _STORE.numerics[key]
    _check_coefficients(schedule, dtype)
    from verifier.numerics import analyze_numerics
    report = analyze_numerics(schedule, dtype)
    if not report.ok and not allow_worse:
        raise OptccError("schedule", f"numerics: {report.message}; refusing to run it "
                                     f"(allow it explicitly with --allow-worse-numerics)")
    _STORE.numerics[key] = report.message
    return report.message


def _coefficient_limit(dtype: str):
    """The largest magnitude `dtype` holds (a runner scales by the coefficient in that dtype):
    numpy's iinfo / finfo; bfloat16, which numpy lacks, from its format (derived: 8 exponent bits
    as float32, 7 fraction bits, so (2 − 2⁻⁷)·2¹²⁷)."""
    import numpy as np
    if dtype == "bfloat16":
        return (2 - 2**-7) * 2.0**127
    if dtype in ("int32", "int64"):
        return int(np.iinfo(dtype).max)
    return float(np.finfo(dtype).max) if dtype in ("float16", "float32", "float64") else None


def _check_coefficients(schedule: Schedule, dtype: str) -> None:
    """A coefficient the dtype cannot hold cannot be applied at all: refused whatever
    --allow-worse-numerics says (it allows imprecise sums, not impossible ones)."""
    limit = _coefficient_limit(dtype)
    if limit is None:
        return
    shown = str(limit) if isinstance(limit, int) else f"{limit:g}"
    for i, f in enumerate(schedule.flows):
        if abs(f.coef) > limit:
            raise OptccError("schedule", f"flows[{i}] has coefficient {f.coef}, beyond what {dtype} holds "
                                         f"(|c| ≤ {shown}); no runner can apply it in {dtype}")
    for i, op in enumerate(schedule.local_ops):
        if abs(op.coef) > limit:
            raise OptccError("schedule", f"local_ops[{i}] has coefficient {op.coef}, beyond what {dtype} holds "
                                         f"(|c| ≤ {shown}); no runner can apply it in {dtype}")


def require_streaming(schedule: Schedule, window: int = DEFAULT_WINDOW, recv_order: bool = False):
    """Every rank's streaming program, proved safe now (verifier.streaming), its digests recorded;
    OptccError("runner", the counterexample) when the verifier refutes it."""
    from verifier.streaming import prove_streaming
    program, cx = prove_streaming(schedule, window, recv_order)
    if cx is not None:
        raise OptccError("runner", f"streaming execution is not proved safe for this schedule: {cx['kind']}: "
                                   f"{cx['message']}; run it with --runner step")
    _STORE.programs[(schedule.sha256(), window, bool(recv_order))] = program_record(program)
    return program


def rank_program_of(schedule: Schedule, rank: int, window: int = DEFAULT_WINDOW, recv_order: bool = False):
    """Rank `rank`'s streaming program: built for that rank alone and compared with the digest a
    proof or an attestation recorded in this process (all ranks are proved now if none did)."""
    sha = schedule.sha256()
    if (sha, window, bool(recv_order)) not in _STORE.programs:
        return require_streaming(schedule, window, recv_order).ranks[rank]
    rp = rank_program(schedule, rank, window, recv_order)
    check_proved_program(schedule, rp, window, recv_order, sha)
    return rp


def check_proved_program(schedule: Schedule, rp, window: int, recv_order: bool, sha256: str | None = None) -> None:
    """OptccError("runner") unless `rp` is, digest for digest, rank rp.rank's proved program
    (`sha256`: the schedule's, when the caller has it)."""
    built = _STORE.built.get((id(schedule), window, bool(recv_order)))
    if built is not None and built[0] is schedule and built[1] is rp:
        return                                     # the very program its rank checked (L1-L5) just now
    record = _STORE.programs.get((sha256 or schedule.sha256(), window, bool(recv_order)))
    if record is None:
        raise OptccError("runner", "no streaming program of this schedule was proved in this process "
                                   "(gpu_runner.proof.require_streaming)")
    digests = record["ranks_sha256"]
    if not 0 <= rp.rank < len(digests) or rank_program_sha256(rp) != digests[rp.rank]:
        raise OptccError("runner", f"rank {rp.rank}'s streaming program is not the proved one (its digest differs); "
                                   "refusing to run it")


def _key() -> bytes:
    if not _KEY:
        _KEY.append(secrets.token_bytes(32))
    return _KEY[0]


def launch_key_hex() -> str:
    """This process's signing key, for gpu_runner.launch to hand to the workers it starts on a pipe."""
    return _key().hex()


def key_pipe(key_hex: str) -> int:
    """A pipe holding `key_hex`, its read end returned (inheritable; the caller names it in
    LAUNCH_KEY_FD_ENV for the child and closes it after the child started)."""
    r, w = os.pipe()
    try:
        os.write(w, key_hex.encode())
    finally:
        os.close(w)
    os.set_inheritable(r, True)
    return r


def _launcher_keys() -> list[bytes]:
    """The keys an attestation may be signed with here: this process's own (it is the launcher)
    and the key its launcher handed it on the inherited pipe (read once, the fd then closed)."""
    fd = os.environ.pop(LAUNCH_KEY_FD_ENV, None)
    if fd is not None and not _HELD:
        try:
            n = int(fd)
            data = os.read(n, 256)
            os.close(n)
            _HELD.append(bytes.fromhex(data.decode()))
        except (ValueError, OSError):
            pass
    return list(_KEY) + list(_HELD)


def _mac(key: bytes, body: dict) -> str:
    return hmac.new(key, json.dumps(body, sort_keys=True, separators=(",", ":")).encode(), hashlib.sha256).hexdigest()


def write_attestation(schedule: Schedule, path: str, dtype: str | None = None, allow_worse: bool = False,
                      runners=()) -> None:
    """Sign what this process accepted of `schedule` (module docstring) for the workers it starts:
    the proof (require_proof first), numerics for `dtype`, the programs of the streaming `runners`
    ((window, recv_order) pairs, proved now if not yet)."""
    sha = schedule.sha256()
    if sha not in _STORE.schedules:
        raise OptccError("schedule", "this process has not accepted the schedule (gpu_runner.proof.require_proof)")
    body = {"format": ATTESTATION_FORMAT, "schedule_sha256": sha, "accepted": _STORE.schedules[sha], "numerics": None,
            "programs": []}
    if dtype is not None:
        body["numerics"] = {"dtype": dtype, "allow_worse": bool(allow_worse),
                            "message": require_numerics(schedule, dtype, allow_worse)}
    for window, recv_order in runners:
        if (sha, window, bool(recv_order)) not in _STORE.programs:
            require_streaming(schedule, window, recv_order)
        body["programs"].append(_STORE.programs[(sha, window, bool(recv_order))])
    write_text_atomic(path, json.dumps({**body, "hmac_sha256": _mac(_key(), body)}, indent=1) + "\n", "attestation")


def accept_attestation(schedule: Schedule, path: str) -> str:
    """Record a launcher's attestation of `schedule` in this process (a worker's gate); returns the
    proof's description. OptccError("attestation") for a missing key, a bad signature or
    another schedule."""
    body = _verified_body(path)
    sha = schedule.sha256()
    if body["schedule_sha256"] != sha:
        raise OptccError("attestation", f"{path} attests another schedule (sha256 {body['schedule_sha256'][:16]}…, "
                                        f"this one {sha[:16]}…); refusing")
    description = f"attested by the launcher: {body['accepted']}"
    _STORE.schedules[sha] = description
    num = body.get("numerics")
    if num:
        _STORE.numerics[(sha, num["dtype"], bool(num["allow_worse"]))] = num["message"]
    for record in body.get("programs", ()):
        _STORE.programs[(sha, record["window"], bool(record["recv_order"]))] = record
    return description


# ---- generated schedules (optcc.generated): the launcher proves the instance, each worker ------
# ---- builds and compares only its own part -----------------------------------------------------


def write_generated_attestation(gen, full: Schedule, path: str, dtype: str | None = None,
                                allow_worse: bool = False, runners=()) -> None:
    """An attestation of the generated schedule `gen` whose flow list `full` this process accepted
    (require_proof, numerics, streaming programs, as write_attestation): its programs' digests
    are rank-local (optcc.lowering.digest.localized_record), for workers that build their part
    from the parameters alone."""
    body = _generated_body(gen, full, dtype, allow_worse, runners)
    write_text_atomic(path, json.dumps({**body, "hmac_sha256": _mac(_key(), body)}, indent=1) + "\n", "attestation")


def accept_generator_here(gen, dtype: str | None = None, allow_worse: bool = False, runners=()) -> str:
    """A worker with no launcher (torchrun): accept `gen` by its generator's proof, re-proved here
    (accept_generator), for generated_rank_schedule's per-rank path: this rank's part is built
    from the parameters and its own streaming program checked (verifier.streaming_local, whose
    order argument prove-all's `streaming_order` covers); no instance is built in any worker."""
    accept_generator(gen)
    _STORE.generated[gen.sha256()] = _per_rank_body(gen, dtype, allow_worse, runners)
    return _STORE.schedules[gen.sha256()]


def _generated_body(gen, full: Schedule, dtype, allow_worse, runners) -> dict:
    from optcc.lowering.digest import localized_record
    from verifier.streaming import prove_streaming
    sha = full.sha256()
    if sha not in _STORE.schedules:
        raise OptccError("schedule", "this process has not accepted the schedule (gpu_runner.proof.require_proof)")
    body = {"format": ATTESTATION_FORMAT, "form": "generated", "schedule_sha256": gen.sha256(),
            "flows_sha256": sha, "accepted": _STORE.schedules[sha], "numerics": None, "programs": []}
    if dtype is not None:
        body["numerics"] = {"dtype": dtype, "allow_worse": bool(allow_worse),
                            "message": require_numerics(full, dtype, allow_worse)}
    for window, recv_order in runners:
        program, cx = prove_streaming(full, window, recv_order)
        if cx is not None:
            raise OptccError("runner", f"streaming execution is not proved safe for this schedule: {cx['kind']}: "
                                       f"{cx['message']}; run it with --runner step")
        body["programs"].append(localized_record(full, program))
    return body


def _verified_body(path: str) -> dict:
    keys = _launcher_keys()
    if not keys:
        also = (f" ({LAUNCH_KEY_ENV} in the environment is not a launcher's key and is ignored)"
                if os.environ.get(LAUNCH_KEY_ENV) else "")
        raise OptccError("attestation", f"{path}: an attestation is trusted only from the launcher that started "
                                        f"this process (optcc run, bench and testbed hand their key on an inherited "
                                        f"pipe){also}; under torchrun leave --attestation out (a generated schedule "
                                        f"is re-proved here) or give --certificate")
    _, data = read_trust_file(path, "attestation", ["optcc-launch-attestation"])
    body = {k: v for k, v in data.items() if k != "hmac_sha256"}
    good = any(hmac.compare_digest(_mac(key, body), str(data.get("hmac_sha256"))) for key in keys)
    if not good:
        raise OptccError("attestation", f"{path}: its signature does not verify under this launch's key; refusing")
    return body


def accept_generated_attestation(gen, path: str) -> str:
    """Check a launcher's attestation of the generated schedule `gen` (signature, sha256 of the
    parameters); nothing global is built. Returns the proof's description."""
    body = _verified_body(path)
    if body.get("form") != "generated" or body["schedule_sha256"] != gen.sha256():
        raise OptccError("attestation", f"{path} attests another schedule (sha256 {body['schedule_sha256'][:16]}…, "
                                        f"this one {gen.sha256()[:16]}…); refusing")
    _STORE.generated[gen.sha256()] = body
    return f"attested by the launcher: {body['accepted']}"


def generated_rank_schedule(gen, rank: int) -> Schedule:
    """Rank `rank`'s part of an attested generated schedule (optcc.generated.rank_schedule),
    accepted in this process under the attestation: numerics as attested, and its streaming
    program admitted only if its digest is the attested one for that rank (rank_program_of)."""
    body = _STORE.generated.get(gen.sha256())
    if body is None:
        raise OptccError("attestation", "no launcher attestation of this generated schedule was accepted "
                                        "in this process (gpu_runner.proof.accept_generated_attestation)")
    with gc_paused():
        return _rank_part_checked(gen, body, rank)


def _rank_part_checked(gen, body: dict, rank: int) -> Schedule:
    from optcc.algorithms.families.local import check_rank_part
    flows = gen.rank_flows(rank)
    check_rank_part(gen.algo, *gen.params(), rank, flows)    # the numpy build against the proved terms, flow by flow
    part = gen.rank_schedule(rank, flows)                    # one Flow per checked row
    num = body.get("numerics")
    numerics = {(num["dtype"], bool(num["allow_worse"])): num["message"]} if num else {}
    if body.get("streaming") == PER_RANK:           # no instance proof: this rank's program, checked here
        from optcc.timing import IntegerTimes
        from verifier.streaming_local import OpColumns, check_rank_program
        grid = IntegerTimes(part, starts=(flows.start.tolist(), flows.scale))   # the part's starts, as built
        for record in body.get("programs", ()):
            window, recv_order = record["window"], bool(record["recv_order"])
            rp = rank_program(part, rank, window, recv_order, grid=grid)
            cols = OpColumns.of(rp)                  # the lowering's columns: no Op objects are made
            cx = check_rank_program(part, rp, window, grid, cols)
            if cx is not None:
                raise OptccError("runner", f"rank {rank}'s streaming program fails the per-rank check "
                                           f"({cx['kind']}: {cx['message']}); refusing to run it")
            _STORE.built[(id(part), window, recv_order)] = (part, rp, cols)    # the executor runs these columns
    else:
        sha = part.sha256()
        for record in body.get("programs", ()):
            digests = ["" for _ in record["ranks_sha256"]]
            digests[rank] = record["ranks_sha256"][rank]
            _STORE.programs[(sha, record["window"], bool(record["recv_order"]))] = {**record, "ranks_sha256": digests}
    _STORE.parts[id(part)] = (part, f"attested by the launcher: {body['accepted']} (rank {rank}'s part)", numerics)
    return part


class gc_paused:
    """No cyclic garbage collection while a rank builds its part, its program and its executor,
    and what was built then frozen out of the collector's reach (gc.freeze) when it resumes:
    10⁶ small objects that live as long as the rank, and the collector's passes over them took
    about half the build and check time at p = 4096 (benchmarks/scale.py), then again at the
    first collection after the pause, which scans every object made during it
    (benchmarks/first_message.py). Frozen objects are never collected as cyclic garbage; they
    are still freed by reference counting."""

    def __enter__(self):
        import gc
        self.was = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc):
        import gc
        if self.was:
            gc.freeze()
            gc.enable()
        return False


def _part(schedule):
    got = _STORE.parts.get(id(schedule))
    return got if got is not None and got[0] is schedule else None


def built_program(part: Schedule, window: int, recv_order: bool):
    """The program generated_rank_schedule checked for this part (per rank), or None: the
    executor takes it instead of lowering the part a second time."""
    got = _STORE.built.get((id(part), window, bool(recv_order)))
    return got[1] if got is not None and got[0] is part else None


def built_columns(part: Schedule, rp, window: int, recv_order: bool):
    """The columns L1-L5 read when generated_rank_schedule checked `rp` for this part
    (verifier.streaming_local.OpColumns), handed over once, or None: the executor runs them."""
    key = (id(part), window, bool(recv_order))
    got = _STORE.built.get(key)
    if got is None or got[0] is not part or got[1] is not rp or got[2] is None:
        return None
    _STORE.built[key] = (part, rp, None)            # not kept beside the executor's own (memory)
    return got[2]


def accept_generator(gen) -> str:
    """Accept a generated schedule by its generator's proof alone (no instance is built): the
    sources it names are checked on loading; here the generator's obligations are re-proved by
    Z3 (verifier.parametric.certificate.reprove, once per process)."""
    from verifier.parametric.certificate import reprove
    _, failure = reprove(gen.algo)
    if failure is not None:
        raise OptccError("schedule", f"re-proving the {gen.algo} generator: {failure}; refusing to run it")
    description = f"the {gen.algo} generator re-proved for every size; streaming checked per rank"
    _STORE.schedules[gen.sha256()] = description
    return description


def write_generated_attestation_per_rank(gen, path: str, dtype: str | None = None, allow_worse: bool = False,
                                         runners=()) -> None:
    """An attestation of a generated schedule accepted by accept_generator, for workers that check
    their own streaming program (verifier.streaming_local) instead of comparing it with an
    instance proof's digest. Numerics by the summation-tree lemma (generated_numerics)."""
    body = _per_rank_body(gen, dtype, allow_worse, runners)
    write_text_atomic(path, json.dumps({**body, "hmac_sha256": _mac(_key(), body)}, indent=1) + "\n", "attestation")


def _per_rank_body(gen, dtype, allow_worse, runners) -> dict:
    sha = gen.sha256()
    if sha not in _STORE.schedules:
        raise OptccError("schedule", "this process has not accepted the generated schedule "
                                     "(gpu_runner.proof.accept_generator)")
    body = {"format": ATTESTATION_FORMAT, "form": "generated", "streaming": PER_RANK, "schedule_sha256": sha,
            "accepted": _STORE.schedules[sha], "numerics": None,
            "programs": [{"window": w, "recv_order": bool(ro)} for w, ro in runners]}
    if dtype is not None:
        body["numerics"] = {"dtype": dtype, "allow_worse": bool(allow_worse), "message": generated_numerics(gen, dtype, allow_worse)}
    return body


def generated_numerics(gen, dtype: str, allow_worse: bool = False) -> str:
    """The numerics decision for a generated schedule accepted by its generator's proof, no
    instance built: the summation-tree lemma (verifier.numerics.summation_tree_numerics) on
    prove-all's sum invariant, whose values are partial sums of distinct inputs, for families
    whose every flow is a coefficient-1 add or copy (checked here) and which have no local ops."""
    from optcc.algorithms.families.local import local_form
    from verifier.numerics import summation_tree_numerics
    odd = [f.name for f in local_form(gen.algo).families if f.op not in ("add", "copy")]
    if odd:
        why = f"families {', '.join(odd)} are not plain adds or copies, so the summation-tree lemma does not apply"
        if not allow_worse:
            raise OptccError("schedule", f"numerics not analysed: {why}; allow it explicitly with --allow-worse-numerics")
        return f"{dtype}: numerics not analysed ({why}); allowed explicitly"
    why = f"prove-all's {gen.algo} sum invariant holds for every p"
    return summation_tree_numerics(gen.cluster.p, dtype, why).message
