"""Workers of a generated schedule (optcc.generated) build and check only their own part: the
launcher proves the instance once and attests it with rank-local program digests
(gpu_runner.proof.write_generated_attestation); each worker checks the signature, builds its
rank's flows from the parameters and compares its program's digest. Real gloo runs through
that path are exact and equal to the flow-list runs."""
from __future__ import annotations

import json
import pathlib
from fractions import Fraction

import pytest

from gpu_runner import proof
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
    monkeypatch.setenv(proof.LAUNCH_KEY_ENV, proof.launch_key_env()[proof.LAUNCH_KEY_ENV])
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
    real = GeneratedSchedule.rank_schedule

    def lossy(self, rank):
        part = real(self, rank)
        part.flows = part.flows[:-1]
        return part
    monkeypatch.setattr(GeneratedSchedule, "rank_schedule", lossy)
    part = proof.generated_rank_schedule(gen, 1)
    with pytest.raises(OptccError, match="not the proved one"):
        make_executor(part, 1, "streaming")


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
def test_torchrun_two_nodes_run_a_generated_schedule(tmp_path):
    """Two torchrun 'nodes' (static rendezvous on localhost) run a generated schedule: with no
    launcher, each worker proves the instance itself, then builds and runs its own part."""
    import os
    import shutil
    import subprocess
    import sys
    pytest.importorskip("torch")
    torchrun = shutil.which("torchrun") or os.path.join(os.path.dirname(sys.executable), "torchrun")
    if not os.path.exists(torchrun):
        pytest.skip("torchrun is not installed")
    from gpu_runner.launch import free_port
    path = str(tmp_path / "g.json")
    GeneratedSchedule.of("optcc", Cluster.build(4, stragglers={1: 2}), 3).save(path)
    port = str(free_port())
    root = str(pathlib.Path(__file__).resolve().parent.parent)
    procs = []
    for node in (0, 1):
        env = dict(os.environ, OMP_NUM_THREADS="1",
                   PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH", "")])))
        procs.append(subprocess.Popen(
            [torchrun, "--nnodes", "2", "--node-rank", str(node), "--nproc-per-node", "2", "--master-addr",
             "127.0.0.1", "--master-port", port, "-m", "gpu_runner", "--schedule", path,
             "--size", "8008", "--dtype", "int64", "--json", "--timeout", "30"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = []
    for p in procs:
        try:
            outs.append(p.communicate(timeout=120))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail("torchrun did not finish in 120 s")
    assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outs]
    result = json.loads(outs[0][0].strip().splitlines()[-1])
    assert result["correct"] is True and result["world_size"] == 4 and result["schedule"] == "optcc"
