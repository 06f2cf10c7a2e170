"""verifier.rails_certificate: `optcc verify FILE --by-rails --certificate C` writes one witness
per distinct rail; the runner's gate re-checks it without Z3 on the schedule, and every forgery a
hostile user could make (witness, schedule, rail, bracket, theorem, version) is refused."""
from __future__ import annotations

import json
from fractions import Fraction as F

import pytest

from optcc.algorithms.rails import build as optcc_rails
from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.schedule import Schedule
from verifier.rails_certificate import check_rails_certificate, write_rails_certificate
from verifier.rails_composition import prove_rails_composition

BASE = optcc_rails.build(Cluster.build(12, 4, {1: F(2)}, bandwidth=50 * 10**9, nvlink_bandwidth=450 * 10**9), 2)


@pytest.fixture
def certified(tmp_path):
    path = tmp_path / "r.json"
    BASE.save(str(path))
    cert = tmp_path / "r.cert"
    from optcc_app.cli import main
    assert main(["verify", str(path), "--by-rails", "--certificate", str(cert)]) == 0
    return path, cert


def _edited(cert, tmp_path, **change):
    data = json.loads(cert.read_text())
    for key, fn in change.items():
        data[key] = fn(data[key])
    out = tmp_path / "edited.cert"
    out.write_text(json.dumps(data))
    return str(out)


def test_the_certificate_has_one_witness_per_distinct_rail(certified):
    _, cert = certified
    data = json.loads(cert.read_text())
    assert data["format"] == "optcc-rails-certificate/1" and data["schedule_sha256"] == BASE.sha256()
    assert sorted(sorted(r["rails"]) for r in data["rails"]) == [[0, 2, 3], [1]]     # GPU 1's rail is the slow one
    assert data["properties"] == {"sum": True, "causality": True, "capacity": True, "time": True}
    assert check_rails_certificate(BASE, str(cert)) == (True, "")


def test_the_runners_gate_accepts_it_without_proving_the_schedule(certified, monkeypatch):
    import verifier
    import verifier.proof
    from gpu_runner import proof
    from gpu_runner.launch import prepare_schedule
    path, cert = certified

    def forbidden(*a, **k):
        raise AssertionError("the schedule was proved again")
    monkeypatch.setattr(verifier, "prove_allreduce", forbidden)
    monkeypatch.setattr(verifier.proof, "prove_allreduce", forbidden)
    proof.forget()
    _, note = prepare_schedule(str(path), 12, certificate=str(cert))
    assert note.startswith(f"rails certificate {cert} re-checked (per-rail witnesses and causality, NVLink brackets")


def test_a_forged_witness_is_refused(certified, tmp_path):
    _, cert = certified
    forged = _edited(cert, tmp_path, rails=lambda rs: [{**r, "final_table_sha256": "0" * 64} for r in rs])
    ok, why = check_rails_certificate(BASE, forged)
    assert not ok and "final coefficient table's digest differs from the witness" in why


def test_another_schedule_is_refused(certified):
    _, cert = certified
    other = optcc_rails.build(BASE.cluster, 3)
    assert check_rails_certificate(other, str(cert)) == (False, "it names another schedule (sha256 differs)")


def _with_schedule_sha(cert, tmp_path, schedule, rails=None):
    """A forger who rewrites the certificate for an edited schedule (sha256 recomputed)."""
    data = json.loads(cert.read_text())
    data["schedule_sha256"] = schedule.sha256()
    if rails is not None:
        data["rails"] = rails
    out = tmp_path / "forged.cert"
    out.write_text(json.dumps(data))
    return str(out)


def test_a_moved_all_gather_copy_is_refused_by_the_bracket_check(certified, tmp_path):
    _, cert = certified
    flows = list(BASE.flows)
    i = next(i for i, f in enumerate(flows) if f.link == "nvlink" and f.op == "copy")
    flows[i] = flows[i]._replace(start=F(0))
    bad = Schedule(BASE.cluster, BASE.pieces, flows, BASE.local_ops, BASE.meta, BASE.stated_slot_time)
    ok, why = check_rails_certificate(bad, _with_schedule_sha(cert, tmp_path, bad))
    assert not ok and why.startswith("R3: an all-gather copy starts before the rail's last landing")


def test_a_wrong_rail_with_its_sha_rewritten_is_refused_by_re_execution(certified, tmp_path):
    """The forger also lists the broken rail's sha256 and keeps the old witness: the re-executed rail
    is not an AllReduce."""
    import hashlib

    from verifier.rails_certificate import _rails
    _, cert = certified
    flows = list(BASE.flows)
    i = next(i for i, f in enumerate(flows) if f.link == "nic" and f.op == "add" and f.src % 4 == 1)
    flows[i] = flows[i]._replace(op="copy")
    bad = Schedule(BASE.cluster, BASE.pieces, flows, BASE.local_ops, BASE.meta, BASE.stated_slot_time)
    data = json.loads(cert.read_text())
    rails = []
    for key, (ls, rs) in _rails(bad)[4].items():
        old = next(r for r in data["rails"] if set(ls) <= set(r["rails"]))
        rails.append({**old, "rail_sha256": hashlib.sha256(rs.canonical_bytes()).hexdigest()})
    ok, why = check_rails_certificate(bad, _with_schedule_sha(cert, tmp_path, bad, rails))
    assert not ok and "is not the sum of the rail's inputs: the certificate is forged" in why


def test_a_rail_not_listed_and_a_listed_rail_not_used_are_refused(certified, tmp_path):
    _, cert = certified
    one = _edited(cert, tmp_path, rails=lambda rs: [r for r in rs if r["rails"] != [1]])
    ok, why = check_rails_certificate(BASE, one)
    assert not ok and why.startswith("rail 1 (sha256 ") and "is not among the certified rails" in why
    extra = _edited(cert, tmp_path, rails=lambda rs: rs + [{**rs[0], "rail_sha256": "f" * 64}])
    ok, why = check_rails_certificate(BASE, extra)
    assert not ok and "it certifies a rail the schedule does not have" in why


def test_other_theorem_obligations_and_a_stale_version_are_refused(certified, tmp_path):
    _, cert = certified
    ok, why = check_rails_certificate(BASE, _edited(cert, tmp_path, composition_obligations_sha256=lambda d: "1" * 64))
    assert not ok and "composition theorem's obligations" in why
    ok, why = check_rails_certificate(BASE, _edited(cert, tmp_path, verifier_version=lambda v: "optcc-verifier/3"))
    assert not ok and why.startswith("stale: made by 'optcc-verifier/3'")
    ok, why = check_rails_certificate(BASE, _edited(cert, tmp_path, properties=lambda p: {**p, "sum": False}))
    assert (ok, why) == (False, "it does not record every property as proved")


def test_optcc_run_refuses_a_forged_rails_certificate_with_exit_2(certified, tmp_path, run_optcc):
    path, cert = certified
    forged = _edited(cert, tmp_path, rails=lambda rs: [{**r, "final_table_sha256": "0" * 64} for r in rs])
    out = run_optcc("run", "--schedule", path, "--nproc", 12, "--certificate", forged)
    assert out.returncode == 2 and "error: --certificate:" in out.stderr and "differs from the witness" in out.stderr


def test_only_a_composition_proof_gets_a_rails_certificate(tmp_path):
    from verifier import prove_allreduce
    with pytest.raises(OptccError, match="for a proof by composition"):
        write_rails_certificate(prove_allreduce(BASE, reported=()), BASE, str(tmp_path / "c"))
    assert not (tmp_path / "c").exists()
    pr = prove_rails_composition(BASE)
    pr.proved = False
    with pytest.raises(OptccError, match="only a proof of all of"):
        write_rails_certificate(pr, BASE, str(tmp_path / "c"))


@pytest.mark.slow
def test_a_gloo_run_under_a_rails_certificate_is_exact(certified, run_optcc):
    pytest.importorskip("torch")
    path, cert = certified
    out = run_optcc("run", "--schedule", path, "--nproc", 12, "--size", "48K", "--dtype", "int64",
                    "--certificate", cert, "--json", timeout=300)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["correct"] is True and data["proof"].startswith("rails certificate")
