"""Certificates carry a witness the runner re-checks: forged, stale or tampered ones are refused."""
import json

import pytest

from optcc.algorithms import build_schedule
from optcc_app.cli import main
from optcc.cluster import Cluster
from optcc.schedule import Schedule
from verifier import VERIFIER_VERSION, check_certificate, prove_allreduce, write_certificate
from verifier.certificate import FORMAT, final_table


def _ring():
    return build_schedule("ring", Cluster.build(3), 1)


def _forge(schedule, path):
    """What a forger can write without the verifier's approval: every field, even a real digest."""
    digest, _ = final_table(schedule)
    data = {"format": FORMAT, "verifier_version": VERIFIER_VERSION, "schedule_sha256": schedule.sha256(),
            "proved": True, "properties": {k: True for k in ("sum", "causality", "capacity", "time", "runnable")},
            "witness": {"final_table_sha256": digest, "pieces": len(schedule.pieces), "p": schedule.cluster.p},
            "z3_version": "4.x", "seconds": 0.0}
    with open(path, "w") as fh:
        json.dump(data, fh)


def _broken():
    s = _ring()
    return Schedule(s.cluster, s.pieces, s.flows[:-1], s.local_ops, s.meta)     # one rank misses the sum


def test_a_real_certificate_is_accepted(tmp_path):
    s = _ring()
    path = str(tmp_path / "c.json")
    write_certificate(prove_allreduce(s), s, path)
    assert check_certificate(s, path) == (True, "")
    data = json.loads(open(path).read())
    assert data["verifier_version"] == VERIFIER_VERSION and len(data["witness"]["final_table_sha256"]) == 64


def test_a_forged_certificate_of_a_refuted_schedule_is_refused(tmp_path, monkeypatch, capsys):
    broken = _broken()
    assert not prove_allreduce(broken).proved
    sched, cert = str(tmp_path / "s.json"), str(tmp_path / "forged.json")
    broken.save(sched)
    _forge(broken, cert)
    ok, why = check_certificate(broken, cert)
    assert not ok and "is not the sum of all inputs: the certificate is forged" in why
    pytest.importorskip("torch")
    import gpu_runner.launch as launch_mod
    started = []
    monkeypatch.setattr(launch_mod, "launch", lambda *a, **k: started.append(a))
    assert main(["run", "--nproc", "3", "--schedule", sched, "--certificate", cert]) == 2
    assert "forged" in capsys.readouterr().err and started == []


@pytest.mark.parametrize("change,reason", [
    (lambda d: d.update(format="optcc-certificate/1"), "stale"),
    (lambda d: d.update(verifier_version="optcc-verifier/1"), "stale"),
    (lambda d: d["witness"].update(final_table_sha256="0" * 64), "digest differs"),
    (lambda d: d.pop("witness"), "no witness"),
    (lambda d: d["properties"].update(time=False), "every property"),
    (lambda d: d.update(schedule_sha256="0" * 64), "another schedule")])
def test_stale_or_tampered_certificates_are_refused(tmp_path, change, reason):
    s = _ring()
    path = str(tmp_path / "c.json")
    write_certificate(prove_allreduce(s), s, path)
    data = json.loads(open(path).read())
    change(data)
    with open(path, "w") as fh:
        json.dump(data, fh)
    ok, why = check_certificate(s, path)
    assert not ok and reason in why


def test_the_old_hash_only_certificate_is_stale(tmp_path):
    s = _ring()
    path = str(tmp_path / "old.json")
    with open(path, "w") as fh:
        json.dump({"format": "optcc-certificate/1", "schedule_sha256": s.sha256(), "proved": True,
                   "properties": {k: True for k in ("sum", "causality", "capacity", "time", "runnable")}}, fh)
    assert "stale" in check_certificate(s, path)[1]


def test_the_trusted_sha256_bypass_is_gone():
    pytest.importorskip("torch")
    from gpu_runner.worker import build_parser
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--schedule", "s.json", "--trusted-sha256", "0" * 64])


def test_run_with_a_real_certificate_on_gloo(tmp_path, capsys):
    pytest.importorskip("torch")
    s = _ring()
    sched, cert = str(tmp_path / "s.json"), str(tmp_path / "c.json")
    s.save(sched)
    assert main(["verify", sched, "--certificate", cert]) == 0
    capsys.readouterr()
    assert main(["run", "--nproc", "3", "--schedule", sched, "--certificate", cert, "--size", "4096",
                 "--timeout", "60", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["correct"] is True and "re-checked (witness, causality, runnable)" in out["proof"]


def test_final_table_matches_a_plain_symbolic_run_and_digests_the_table():
    """The linear-time table (one check per distinct final expression) finds the same first wrong
    (piece, rank) as a direct run of every piece, and tables that differ have different digests."""
    from verifier.events import piece_events
    from verifier.provenance import run_piece
    from optcc.timing import IntegerTimes
    base = build_schedule("optcc", Cluster.build(5, 1, [(1, 2)]), 2)
    digests = set()
    for drop in (None, 0, 7, len(base.flows) // 2, len(base.flows) - 1):
        flows = base.flows if drop is None else base.flows[:drop] + base.flows[drop + 1:]
        s = Schedule(base.cluster, base.pieces, flows, base.local_ops, base.meta)
        want = None
        for piece, events in enumerate(piece_events(s, IntegerTimes(s))):
            finals = run_piece(s, events)
            for r in range(s.cluster.p):
                coefs = finals[r].coefs if r in finals else {r: 1}
                if want is None and (len(coefs) != s.cluster.p or any(c != 1 for c in coefs.values())):
                    want = (piece, r)
        digest, wrong = final_table(s)
        assert wrong == want and (drop is None) == (wrong is None)
        digests.add(digest)
    assert len(digests) == 5
