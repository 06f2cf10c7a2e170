"""Workers of a generated schedule (optcc.generated) build and check only their own part: the
launcher proves the instance once and attests it with rank-local program digests
(gpu_runner.proof.write_generated_attestation); each worker checks the signature, builds its
rank's flows from the parameters and compares its program's digest. Real gloo runs through
that path are exact and equal to the flow-list runs."""
from __future__ import annotations

import dataclasses
import json
import pathlib
from fractions import Fraction

import pytest

from gpu_runner import proof
from gpu_runner.admission import ADMISSIONS
from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.generated import GeneratedSchedule
from optcc.lowering.streaming import streaming_program


@pytest.fixture
def generated(tmp_path, monkeypatch):
    """A generated schedule written to a file, proved and attested by this process (the launcher)."""
    from gpu_runner.launch import flows_of
    gen = GeneratedSchedule.of("optcc", Cluster.build(6, stragglers={2: Fraction(3, 2)}), 3)
    path = str(tmp_path / "g.json")
    gen.save(path)
    full = flows_of(path)
    proof.require_proof(full)
    attestation = str(tmp_path / "attestation.json")
    proof.write_generated_attestation(gen, full, attestation, "int64", False, [(4, False), (4, True)])
    return gen, full, path, attestation


@pytest.mark.parametrize("runner", ["streaming", "streaming-ordered"])
def test_a_generated_worker_builds_only_its_part_and_proves_nothing(generated, monkeypatch, runner):
    """The worker's own start-up (_load_schedule, _rank_part, make_executor) with every prover,
    certificate check, numerics analysis and whole-schedule build made to fail."""
    pytest.importorskip("torch")
    import verifier
    import verifier.certificate
    import verifier.numerics
    import verifier.streaming
    from gpu_runner.runners import make_executor
    from gpu_runner.worker import _load_schedule, _rank_part, build_parser
    gen, full, path, attestation = generated
    ordered = runner == "streaming-ordered"
    programs = streaming_program(full, 4, recv_order=ordered).ranks
    proof.forget()

    def forbidden(*a, **k):
        raise AssertionError("a generated worker did global work")
    for module, name in ((verifier, "prove_allreduce"), (verifier, "check_certificate"),
                         (verifier.certificate, "check_certificate"), (verifier.streaming, "prove_streaming"),
                         (verifier.numerics, "analyze_numerics"), (GeneratedSchedule, "materialize")):
        monkeypatch.setattr(module, name, forbidden)
    args = build_parser().parse_args(["--schedule", path, "--attestation", attestation, "--runner", runner,
                                      "--dtype", "int64"])
    loaded = _load_schedule(args)
    assert isinstance(loaded, GeneratedSchedule)
    for r in range(6):
        part = _rank_part(loaded, r, args)
        assert {(f.src, f.dst, f.piece, f.start) for f in part.flows} == \
            {(f.src, f.dst, f.piece, f.start) for f in full.flows if r in (f.src, f.dst)}
        ex = make_executor(part, r, runner)
        assert [(op.kind, op.piece, op.peer, op.slot, op.deps) for op in ex.rp.ops] == \
            [(op.kind, op.piece, op.peer, op.slot, op.deps) for op in programs[r].ops]


def test_a_generated_attestation_is_refused_when_edited_or_for_other_parameters(generated, tmp_path):
    gen, _, _, attestation = generated
    data = json.loads(pathlib.Path(attestation).read_text())
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**data, "programs": []}))
    proof.forget()
    with pytest.raises(OptccError, match="signature does not verify"):
        proof.accept_generated_attestation(gen, str(bad))
    other = GeneratedSchedule.of("optcc", Cluster.build(6, stragglers={3: Fraction(3, 2)}), 3)
    with pytest.raises(OptccError, match="attests another schedule"):
        proof.accept_generated_attestation(other, attestation)
    with pytest.raises(OptccError, match="no launcher attestation"):
        proof.generated_rank_schedule(other, 0)


def test_a_rank_part_whose_program_differs_from_the_attested_one_is_refused(generated, monkeypatch):
    """A rank-local enumeration that drops one flow builds another program: refused by digest."""
    pytest.importorskip("torch")
    from gpu_runner.runners import make_executor
    gen, _, _, attestation = generated
    proof.forget()
    proof.accept_generated_attestation(gen, attestation)
    real = GeneratedSchedule.rank_flows

    def lossy(self, rank):
        rf = real(self, rank)
        return dataclasses.replace(rf, **{c: getattr(rf, c)[:-1] for c in ("src", "dst", "piece", "op", "start")})
    monkeypatch.setattr(GeneratedSchedule, "rank_flows", lossy)
    with pytest.raises(OptccError, match="rank 1 built 57 flows; the proved optcc families give it 58"):
        proof.generated_rank_schedule(gen, 1)          # the part checked against the proved terms first
    from optcc.algorithms.families import local
    monkeypatch.setattr(local, "check_rank_part", lambda *a: None)
    part = proof.generated_rank_schedule(gen, 1)
    with pytest.raises(OptccError, match="not the proved one"):
        make_executor(part, 1, "streaming")          # and, past it, by the attested program's digest


@pytest.mark.slow
def test_optcc_run_of_a_generated_schedule_is_exact_and_equal_to_the_flow_list(tmp_path, run_optcc):
    for p in (8, 16):
        common = ["--algo", "optcc", "--p", str(p), "--straggler", "3:2", "--segments", "4"]
        for form in ("generated", "flows"):
            assert run_optcc("schedule", *common, "--form", form, "-o", tmp_path / f"{form}.json").returncode == 0
        outs = {}
        for form in ("generated", "flows"):
            r = run_optcc("run", "--schedule", tmp_path / f"{form}.json", "--nproc", p, "--size", "256K",
                          "--dtype", "int64", "--json", timeout=300)
            assert r.returncode == 0, r.stderr
            outs[form] = json.loads(r.stdout)
        for out in outs.values():
            assert out["correct"] is True and out["wrong"] == 0 and out["max_abs_error"] == 0
        assert outs["generated"]["algorithm"] == outs["flows"]["algorithm"] == "optcc"
        assert outs["generated"]["proof"].startswith("proved by the verifier")
    step = run_optcc("run", "--schedule", tmp_path / "generated.json", "--nproc", 16, "--size", "256K",
                     "--runner", "step", timeout=300)
    assert step.returncode == 2 and "error: --runner" in step.stderr


@pytest.mark.slow
def test_torchrun_two_nodes_run_a_generated_schedule(tmp_path, monkeypatch):
    """Two torchrun 'nodes' (static rendezvous on localhost) run a generated schedule: with no
    launcher, each worker re-proves the generator and builds and checks only its own part (the
    per-rank path); the instance is built nowhere (a materialize that raises is loaded first)."""
    from conftest import torchrun_two_nodes
    path = str(tmp_path / "g.json")
    GeneratedSchedule.of("optcc", Cluster.build(4, stragglers={1: 2}), 3).save(path)
    (tmp_path / "sitecustomize.py").write_text(
        "from optcc.generated import GeneratedSchedule\n"
        "def _no(*a, **k):\n    raise AssertionError('a torchrun worker built the whole instance')\n"
        "GeneratedSchedule.materialize = _no\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))      # torchrun_two_nodes puts this checkout first
    result = torchrun_two_nodes(path)
    assert result["correct"] is True and result["world_size"] == 4 and result["schedule"] == "optcc"


# ---- per rank: no instance proof at all (verifier.streaming_local) ---------------------------------

@pytest.fixture
def per_rank(tmp_path, monkeypatch):
    """A generated schedule accepted by its generator's proof alone and attested for per-rank checks."""
    from gpu_runner.launch import attested_worker_args, prepare_schedule
    gen = GeneratedSchedule.of("optcc", Cluster.build(7, stragglers={3: Fraction(3, 2)}), 3)
    path = str(tmp_path / "g.json")
    gen.save(path)
    loaded, note = prepare_schedule(path, 7, dtype="int64", per_rank=True)
    assert isinstance(loaded, GeneratedSchedule) and "generator re-proved" in note
    assert "int64: exact; every intermediate is a partial sum of distinct inputs (Σ|c| ≤ p = 7)" in note
    args = attested_worker_args(loaded, path, str(tmp_path), "streaming", "int64", False)
    return gen, path, args[-1]


def test_a_per_rank_worker_checks_its_own_program_and_nothing_global(per_rank, monkeypatch):
    pytest.importorskip("torch")
    import verifier
    import verifier.numerics
    import verifier.streaming
    import verifier.streaming_check
    from gpu_runner.runners import make_executor
    from gpu_runner.worker import _load_schedule, _rank_part, build_parser
    gen, path, attestation = per_rank
    full = gen.materialize()
    programs = streaming_program(full, 4).ranks
    proof.forget()

    def forbidden(*a, **k):
        raise AssertionError("a per-rank worker did global work")
    for module, name in ((verifier, "prove_allreduce"), (verifier.streaming, "prove_streaming"),
                         (verifier.streaming_check, "check_streaming"), (verifier.numerics, "analyze_numerics"),
                         (GeneratedSchedule, "materialize")):
        monkeypatch.setattr(module, name, forbidden)
    args = build_parser().parse_args(["--schedule", path, "--attestation", attestation, "--dtype", "int64"])
    loaded = _load_schedule(args)
    for r in range(7):
        part = _rank_part(loaded, r, args)
        rp = proof.built_program(part, 4, False)
        assert rp is not None
        ex = make_executor(part, r, "streaming", program=rp)
        assert ex.rp.columns is not None      # checked and bound from the lowering's columns: no Op made
        assert [(op.kind, op.piece, op.peer, op.slot, op.deps) for op in ex.rp.ops] == \
            [(op.kind, op.piece, op.peer, op.slot, op.deps) for op in programs[r].ops]
        assert ex.rp.columns is None          # read once, the ops are the program


def test_a_per_rank_worker_refuses_a_program_that_fails_the_check(per_rank, monkeypatch):
    """A lowering that drops the window's completion dependencies: the worker's own check refuses."""
    import optcc.lowering.streaming as LS
    from gpu_runner.worker import _load_schedule, _rank_part, build_parser
    from optcc.errors import OptccError as Err
    gen, path, attestation = per_rank
    real = LS.rank_program

    def no_window(*a, **k):
        rp = real(*a, **k)
        for seq in rp.peer_seq.values():
            for n in seq[4:]:
                rp.ops[n].deps = [d for d in rp.ops[n].deps if d[1] != "C"]
        return rp
    monkeypatch.setattr(proof, "rank_program", no_window)
    proof.forget()
    args = build_parser().parse_args(["--schedule", path, "--attestation", attestation, "--dtype", "int64"])
    loaded = _load_schedule(args)
    with pytest.raises(Err, match="fails the per-rank check") as e:
        for r in range(7):
            _rank_part(loaded, r, args)
    assert e.value.field == "runner"


def test_the_per_rank_check_never_passes_what_the_whole_program_check_refutes():
    """Soundness of the order argument on mutants: 1200 random edits of real programs (a dependency
    dropped, retargeted or switched S/C, two ops swapped, a slot changed); whenever every rank
    passes L1-L5, verifier.streaming's whole-program check passes too."""
    import copy
    import random
    from optcc.algorithms import build_schedule
    from optcc.lowering.streaming import streaming_program as build
    from verifier.streaming_check import check_streaming
    from verifier.streaming_local import check_rank_program
    rng = random.Random(1)
    seen = {"both pass": 0, "both refuse": 0, "only the per-rank check refuses": 0}
    for algo, c in [("optcc", Cluster.build(5, 1, {1: Fraction(3, 2)})), ("ring", Cluster.build(4, 1, {0: 2})),
                    ("optcc", Cluster.build(6, 1, {2: 2})), ("direct", Cluster.build(5, 1, {0: 2}))]:
        s = build_schedule(algo, c, 2)
        base = build(s, 2)
        for _ in range(300):
            prog = copy.deepcopy(base)
            rp = rng.choice(prog.ranks)
            ops, n, kind = rp.ops, rng.randrange(len(rp.ops)), rng.randrange(5)
            if kind == 0 and ops[n].deps:
                ops[n].deps.pop(rng.randrange(len(ops[n].deps)))
            elif kind == 1 and n + 1 < len(ops):
                ops[n], ops[n + 1] = ops[n + 1], ops[n]
                mp = {n: n + 1, n + 1: n}
                for op in ops:
                    op.deps = [(mp.get(m, m), ev) for m, ev in op.deps]
                for q, seq in rp.peer_seq.items():
                    rp.peer_seq[q] = [mp.get(x, x) for x in seq]
            elif kind == 2 and ops[n].slot is not None:
                ops[n].slot = (ops[n].slot + 1) % max(1, rp.n_slots)
            elif kind == 3 and ops[n].deps and n > 0:
                ops[n].deps[rng.randrange(len(ops[n].deps))] = (rng.randrange(n), "S")
            elif ops[n].deps:
                m, ev = ops[n].deps[0]
                ops[n].deps[0] = (m, "S" if ev == "C" else ("C" if ops[m].kind in ("send", "recv") else "S"))
            local = all(check_rank_program(s, r, prog.window) is None for r in prog.ranks)
            whole, _ = check_streaming(s, prog)
            assert whole or not local, "the per-rank check passed a program the whole-program check refutes"
            seen["both pass" if local else "both refuse" if not whole else "only the per-rank check refuses"] += 1
    assert seen["both refuse"] >= 300 and seen["both pass"] >= 100


def test_every_registry_program_passes_the_per_rank_check():
    from optcc.algorithms import algorithm_names, build_schedule
    from optcc.errors import OptccError as Err
    from verifier.streaming_local import check_rank_program
    checked = 0
    for algo in algorithm_names():
        for c in (Cluster.build(5, 1, {1: Fraction(3, 2)}), Cluster.build(8, 2, {2: 2, 3: 2}), Cluster.build(6, 1, {0: 2, 3: 3})):
            try:
                s = build_schedule(algo, c, 2)
            except Err:
                continue
            for ordered in (False, True):
                for rp in streaming_program(s, 4, recv_order=ordered).ranks:
                    assert check_rank_program(s, rp, 4) is None, (algo, c.describe(), rp.rank)
                    checked += 1
    assert checked > 150


def test_over_the_build_limit_optcc_run_takes_the_per_rank_path(tmp_path):
    from gpu_runner.launch import check_runner, prepare_schedule
    gen = GeneratedSchedule.of("optcc", Cluster.build(2048, stragglers={0: 2}), 1)     # p²·k > 4·10⁶
    path = str(tmp_path / "g.json")
    gen.save(path)
    loaded, note = prepare_schedule(path, 2048, dtype="float32")          # no --allow-worse-numerics
    assert isinstance(loaded, GeneratedSchedule) and "re-proved" in note
    assert "summation trees of depth ≤ p − 1 = 2047" in note and "the ring's bound" in note
    assert "each rank checks its own program" in check_runner(loaded, "streaming")
    with pytest.raises(OptccError) as e:
        check_runner(loaded, "step")
    assert e.value.field == "runner"


@pytest.mark.slow
def test_a_per_rank_gloo_run_is_exact(per_rank):
    pytest.importorskip("torch")
    from gpu_runner.launch import launch_trusted
    gen, path, _ = per_rank
    res = launch_trusted(path, gen.sha256(), 7, 7 * 8 * 64, "int64", 120.0, schedule=gen)
    assert res.ok, res.describe_failure()
    assert res.result["correct"] is True and res.result["rows"][0]["wrong"] == 0


def test_the_ddp_hook_state_refuses_a_generated_schedule_with_the_step_runner_or_a_certificate(tmp_path):
    pytest.importorskip("torch")
    from gpu_runner.ddp_hook import OptccHookState
    gen = GeneratedSchedule.of("optcc", Cluster.build(8, stragglers={0: 2}), 2)
    with pytest.raises(OptccError) as e:
        OptccHookState(gen, runner="step")
    assert e.value.field == "runner" and "streaming runners" in e.value.message
    with pytest.raises(OptccError) as e:
        OptccHookState(gen, certificate=str(tmp_path / "c.json"))
    assert e.value.field == "certificate"
    state = OptccHookState(gen)                 # no process group needed until the first bucket
    assert state.admission is ADMISSIONS["generated"] and state.proof.startswith("the optcc generator re-proved for every size")
