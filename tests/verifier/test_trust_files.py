"""The files that vouch for a schedule have one table of formats and one header reader
(verifier.trust_files): a file is read once, its kind found by family, a stale version refused
with how to make a current one, and a file of another kind refused at every door."""
from __future__ import annotations

import ast
import json
import pathlib

import pytest

from gpu_runner.proof import require_proof
from optcc.algorithms.ring.build import ring_allreduce
from optcc.cluster import Cluster
from optcc.errors import OptccError
from verifier import prove_allreduce, write_certificate
from verifier.certificate import FORMAT as INSTANCE
from verifier.parametric.certificate import FORMAT as GENERATOR
from verifier.rails_certificate import FORMAT as RAILS
from verifier.trust_files import BY_FAMILY, TRUST_FORMATS, read_trust_file

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_every_writer_writes_the_tables_current_format():
    assert {INSTANCE, GENERATOR, RAILS} | {"optcc-launch-attestation/1"} == {f.format for f in TRUST_FORMATS}
    assert len(BY_FAMILY) == len(TRUST_FORMATS)


@pytest.fixture
def certified(tmp_path):
    s = ring_allreduce(Cluster.build(4), 1)
    path = tmp_path / "c.json"
    write_certificate(prove_allreduce(s), s, str(path))
    return s, path


def _rewrite(path, **change):
    data = json.loads(path.read_text())
    data.update(change)
    path.write_text(json.dumps(data))


def test_a_certificate_is_not_an_attestation_and_an_attestation_is_no_certificate(certified):
    s, path = certified
    with pytest.raises(OptccError) as e:
        read_trust_file(str(path), "attestation", ["optcc-launch-attestation"])
    assert e.value.field == "attestation"
    assert "holds a per-instance certificate (optcc-certificate/2); expected a launcher attestation" in e.value.message
    _rewrite(path, format="optcc-launch-attestation/1")
    with pytest.raises(OptccError) as e:
        require_proof(s, str(path))
    assert e.value.field == "certificate" and "launcher attestation" in e.value.message


@pytest.mark.parametrize("fmt,words", [
    ("optcc-certificate/1", ["stale", "optcc-certificate/2", "optcc verify FILE --certificate CERT"]),
    ("optcc-rails-certificate/0", ["stale", "optcc-rails-certificate/1", "--by-rails"]),
    ("optcc-certificate", ["not an optcc"]),
    ("something-else/2", ["not an optcc"]),
    (None, ["not an optcc"])])
def test_stale_and_unknown_formats_are_refused_once_with_what_to_make(certified, fmt, words):
    s, path = certified
    _rewrite(path, format=fmt)
    with pytest.raises(OptccError) as e:
        require_proof(s, str(path))
    assert e.value.field == "certificate" and all(w in e.value.message for w in words), e.value.message


def test_the_right_kind_is_checked_by_its_own_check(certified):
    s, path = certified
    assert require_proof(s, str(path)).startswith(f"per-instance certificate {path} re-checked (witness")
    _rewrite(path, format=RAILS)                   # a current rails header on an instance body
    with pytest.raises(OptccError) as e:
        require_proof(s, str(path))
    assert e.value.field == "certificate" and "rails certificate" in e.value.message


def _reads_a_format(path: pathlib.Path) -> list[int]:
    """Lines that read a parsed file's "format" key (data.get("format") or data["format"])."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "get" and node.args \
                and isinstance(node.args[0], ast.Constant) and node.args[0].value == "format":
            lines.append(node.lineno)
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) \
                and isinstance(node.slice, ast.Constant) and node.slice.value == "format":
            lines.append(node.lineno)
    return lines


def test_no_trust_file_reader_but_the_one_reads_a_header():
    readers = ["verifier/certificate.py", "verifier/rails_certificate.py", "verifier/parametric/certificate.py",
               "gpu_runner/proof.py", "gpu_runner/admission.py"]
    assert {r: lines for r in readers if (lines := _reads_a_format(ROOT / r))} == {}
