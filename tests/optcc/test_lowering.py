"""optcc.lowering: per-rank programs built once, in one place, and run only by digest of a proof.

- a rank's program built for that rank alone is the one the whole-schedule lowering builds;
- the digest sees every field of a program, so the executor refuses any program but the proved one;
- a launcher's attestation is accepted only under its key, for its schedule, unaltered, and a
  worker that holds one proves nothing (the worker's own code path, its provers made to fail).
"""
import copy
import json
import os
import pathlib
import random

import pytest

import gpu_runner.proof as proof
from optcc.algorithms import build_schedule
from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.lowering.digest import program_record, rank_program_sha256
from optcc.lowering.streaming import rank_program, streaming_program
from streaming_cases import random_schedule

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("recv_order", [False, True])
def test_a_ranks_own_program_is_the_whole_lowerings(seed, recv_order):
    schedule = random_schedule(random.Random(seed), max_p=6)
    window = random.Random(seed).choice([1, 2, 4])
    whole = streaming_program(schedule, window, recv_order=recv_order)
    for r in range(schedule.cluster.p):
        assert rank_program(schedule, r, window, recv_order) == whole.ranks[r]


def test_rank_program_refuses_a_rank_outside_the_schedule():
    schedule = build_schedule("ring", Cluster.build(3), 1)
    with pytest.raises(OptccError) as e:
        rank_program(schedule, 3)
    assert e.value.field == "rank"


def _mutations(rp):
    """One copy of rp per field an op or the program has, each changed in that one field."""
    for n, op in enumerate(rp.ops):
        for name, value in (("kind", "snap" if op.kind != "snap" else "send"), ("piece", op.piece + 1),
                            ("peer", (op.peer or 0) + 1), ("slot", (op.slot or 0) + 1)):
            m = copy.deepcopy(rp)
            setattr(m.ops[n], name, value)
            yield f"ops[{n}].{name}", m
        if op.deps:
            m = copy.deepcopy(rp)
            m.ops[n].deps.pop()
            yield f"ops[{n}].deps (one dropped)", m
            m = copy.deepcopy(rp)
            i, ev = m.ops[n].deps[0]
            m.ops[n].deps[0] = (i, "S" if ev == "C" else "C")
            yield f"ops[{n}].deps (S/C swapped)", m
    m = copy.deepcopy(rp)
    m.n_slots += 1
    yield "n_slots", m
    m = copy.deepcopy(rp)
    m.ops = m.ops[1:]
    yield "ops (one left out)", m


def test_the_digest_sees_every_field():
    schedule = build_schedule("optcc", Cluster.build(4, stragglers={0: 2}), 2)
    rp = streaming_program(schedule).ranks[1]
    base = rank_program_sha256(rp)
    assert rank_program_sha256(copy.deepcopy(rp)) == base
    seen = 0
    for what, m in _mutations(rp):
        assert rank_program_sha256(m) != base, what
        seen += 1
    assert seen > 50


def test_the_streaming_executor_runs_only_the_proved_program():
    pytest.importorskip("torch")
    from gpu_runner.streaming import StreamingExecutor
    schedule = build_schedule("optcc", Cluster.build(4, stragglers={0: 2}), 2)
    own = streaming_program(schedule).ranks[2]
    with pytest.raises(OptccError) as e:              # nothing proved in this process yet
        StreamingExecutor(schedule, 2, program=own)
    assert e.value.field in ("runner", "schedule")
    proof.require_proof(schedule)
    proof.require_streaming(schedule)
    assert StreamingExecutor(schedule, 2, program=own).rp is own
    for what, bad in list(_mutations(own))[:40]:
        with pytest.raises(OptccError, match="not the proved one") as e:
            StreamingExecutor(schedule, 2, program=bad)
        assert e.value.field == "runner", what
    with pytest.raises(OptccError, match="rank 2's"):
        StreamingExecutor(schedule, 1, program=own)


@pytest.fixture
def attested(tmp_path, monkeypatch):
    """A schedule proved and attested by this process (the launcher), its key in the environment."""
    schedule = build_schedule("optcc", Cluster.build(5, stragglers={0: 2}), 3)
    path = str(tmp_path / "s.json")
    schedule.save(path)
    proof.require_proof(schedule)
    attestation = str(tmp_path / "attestation.json")
    proof.write_attestation(schedule, attestation, "float32", False, [(4, False), (4, True)])
    return schedule, path, attestation


def _fresh_worker():
    proof.forget()


def test_an_attestation_is_accepted_only_as_the_launcher_wrote_it(attested, tmp_path, monkeypatch):
    schedule, _, attestation = attested
    _fresh_worker()
    assert proof.accept_attestation(schedule, attestation).startswith("attested by the launcher: proved by the verifier")
    data = json.loads(pathlib.Path(attestation).read_text())
    for edit in ({"accepted": "anything"}, {"schedule_sha256": "0" * 64},
                 {"programs": []}, {"numerics": {"dtype": "float32", "allow_worse": True, "message": "x"}}):
        bad = tmp_path / "bad.json"
        bad.write_text(json.dumps({**data, **edit}))
        _fresh_worker()
        with pytest.raises(OptccError, match="signature does not verify") as e:
            proof.accept_attestation(schedule, str(bad))
        assert e.value.field == "attestation"
    other = build_schedule("optcc", Cluster.build(5, stragglers={1: 2}), 3)
    with pytest.raises(OptccError, match="attests another schedule"):
        proof.accept_attestation(other, attestation)
    launcher_key = proof.launch_key_hex()
    monkeypatch.setattr(proof, "_KEY", [])             # a worker process: not the launcher itself
    monkeypatch.setattr(proof, "_HELD", [])
    monkeypatch.setenv(proof.LAUNCH_KEY_FD_ENV, str(proof.key_pipe("ab" * 32)))   # another launcher's key
    with pytest.raises(OptccError, match="signature does not verify"):
        proof.accept_attestation(schedule, attestation)
    monkeypatch.setattr(proof, "_HELD", [])
    monkeypatch.setenv(proof.LAUNCH_KEY_ENV, launcher_key)     # the right key, but from the environment
    with pytest.raises(OptccError, match="trusted only from the launcher .* is not a launcher's key and is ignored"):
        proof.accept_attestation(schedule, attestation)
    monkeypatch.setenv(proof.LAUNCH_KEY_FD_ENV, str(proof.key_pipe(launcher_key)))  # as optcc run hands it
    assert proof.accept_attestation(schedule, attestation).startswith("attested by the launcher")
    assert proof.LAUNCH_KEY_FD_ENV not in os.environ                 # read once, the pipe closed


@pytest.mark.parametrize("runner", ["streaming", "streaming-ordered", "step"])
def test_an_attested_worker_proves_nothing(attested, monkeypatch, runner):
    """The worker's own start-up (gpu_runner.worker._load_schedule, then make_executor) with every
    prover and certificate check made to fail: it runs the proved program all the same."""
    pytest.importorskip("torch")
    import verifier
    import verifier.certificate
    import verifier.streaming
    from gpu_runner.runners import make_executor, program_key
    from gpu_runner.worker import _load_schedule, build_parser
    schedule, path, attestation = attested
    expected = {r: streaming_program(schedule, 4, recv_order=runner == "streaming-ordered").ranks[r]
                for r in range(5)}
    _fresh_worker()

    def forbidden(*a, **k):
        raise AssertionError("an attested worker proved or re-checked something")
    for module, name in ((verifier, "prove_allreduce"), (verifier, "check_certificate"),
                         (verifier.certificate, "check_certificate"), (verifier.streaming, "prove_streaming")):
        monkeypatch.setattr(module, name, forbidden)
    args = build_parser().parse_args(["--schedule", path, "--attestation", attestation, "--runner", runner])
    loaded = _load_schedule(args)
    assert loaded.sha256() == schedule.sha256()
    for r in range(5):
        ex = make_executor(loaded, r, runner)
        if program_key(runner) is not None:
            assert ex.rp == expected[r]


def test_the_launcher_refuses_to_attest_what_it_did_not_accept(tmp_path):
    schedule = build_schedule("ring", Cluster.build(3), 1)
    with pytest.raises(OptccError, match="has not accepted"):
        proof.write_attestation(schedule, str(tmp_path / "a.json"))
    assert not (tmp_path / "a.json").exists()


def test_program_record_lists_every_rank():
    schedule = build_schedule("optcc", Cluster.build(4, stragglers={0: 2}), 2)
    program = streaming_program(schedule, 2, recv_order=True)
    record = program_record(program)
    assert record["window"] == 2 and record["recv_order"] is True
    assert record["ranks_sha256"] == [rank_program_sha256(rp) for rp in program.ranks]
    assert len(set(record["ranks_sha256"])) == 4


def test_each_lowering_has_one_home():
    """The lowerings are defined in optcc/lowering and nowhere else (no second copy to drift)."""
    defs = ("def streaming_program(", "def rank_program(", "def build_plan(", "def build_all_plans(",
            "def piece_ranges(", "def build_program(", "def export_xml(", "def chunk_layout(")
    homes = {}
    for path in ROOT.glob("*/**/*.py"):
        if path.parts[len(ROOT.parts)] in (".venv", "tests", "build"):
            continue
        text = path.read_text(encoding="utf-8")
        for d in defs:
            if d in text:
                homes.setdefault(d, []).append(str(path.relative_to(ROOT)))
    assert set(homes) == set(defs)
    for d, where in homes.items():
        assert len(where) == 1 and where[0].startswith("optcc/lowering/"), (d, where)


def _handshakes_finish(orders) -> bool:
    """Every rank walks its pairs in order; a pair is done when it is next on both its ends."""
    pos = [0] * len(orders)
    while True:
        moved = False
        for r, order in enumerate(orders):
            if pos[r] < len(order):
                a, b = order[pos[r]]
                q = b if r == a else a
                if pos[q] < len(orders[q]) and orders[q][pos[q]] == (a, b):
                    pos[r] += 1
                    pos[q] += 1
                    moved = True
        if not moved:
            return all(pos[r] == len(o) for r, o in enumerate(orders))


@pytest.mark.parametrize("seed", range(8))
def test_nccl_connects_only_the_peers_a_rank_exchanges_with_and_cannot_deadlock(seed):
    pytest.importorskip("torch")
    from gpu_runner.streaming import handshake_order
    schedule = random_schedule(random.Random(seed), max_p=7)
    program = streaming_program(schedule)
    orders = [handshake_order(rp.rank, rp.peer_seq) for rp in program.ranks]
    for rp, order in zip(program.ranks, orders):
        assert {b if a == rp.rank else a for a, b in order} == set(rp.peer_seq)
    assert _handshakes_finish(orders)


def test_a_healthy_optcc_rank_connects_three_peers_not_p_minus_one():
    pytest.importorskip("torch")
    from gpu_runner.streaming import handshake_order
    program = streaming_program(build_schedule("optcc", Cluster.build(16, stragglers={0: 2}), 4))
    sizes = [len(handshake_order(rp.rank, rp.peer_seq)) for rp in program.ranks]
    assert sizes == [15] + [3] * 15
    assert not _handshakes_finish([[(0, 1)], [(1, 2)], [(0, 2)]][:2] + [[(1, 2), (0, 2)]])   # the check can fail
