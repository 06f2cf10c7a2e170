"""The files that vouch for a schedule: one table of their formats, and the one reader of a header.

Four kinds of file let a schedule run without being proved again where it runs: an instance
certificate (verifier.certificate, per instance: a Z3 proof's witness, re-checked in linear time), a rails
certificate (verifier.rails_certificate: one witness per distinct rail plus the composition
theorem), a generator certificate (verifier.parametric.certificate: a construction proved for
every size) and a launcher's attestation (gpu_runner.proof: what a launcher accepted, signed for
the workers it starts). Each is JSON whose "format" is FAMILY/VERSION. `read_trust_file` reads a
file once, finds its kind by family (any version), refuses a stale version with what makes a
current one, and refuses a file of another kind than the door expects: no checker reads a
header itself, so no file is ever taken for another kind.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from optcc.errors import OptccError
from optcc.files import read_json


@dataclass(frozen=True)
class TrustFormat:
    family: str      # the format's name without its version
    version: int     # the version this code writes and reads
    what: str        # what the file is, in words
    remake: str      # how to make a current one

    @property
    def format(self) -> str:
        return f"{self.family}/{self.version}"


TRUST_FORMATS = (
    TrustFormat("optcc-certificate", 2, "per-instance certificate", "optcc verify FILE --certificate CERT"),
    TrustFormat("optcc-rails-certificate", 1, "rails certificate", "optcc verify FILE --by-rails --certificate CERT"),
    TrustFormat("optcc-generator-certificate", 2, "generator certificate",
                "optcc prove-all --algo ALGO --certificate CERT"),
    TrustFormat("optcc-launch-attestation", 1, "launcher attestation",
                "written by the launcher (optcc run, bench, testbed) for the workers it starts"),
)
BY_FAMILY = {f.family: f for f in TRUST_FORMATS}


def trust_format(family: str) -> TrustFormat:
    return BY_FAMILY[family]


def format_family(data: object) -> str | None:
    """The family of a parsed file's "format" (any version), or None where it names none we know."""
    got = data.get("format") if isinstance(data, dict) else None
    family = got.rpartition("/")[0] if isinstance(got, str) else ""
    return family if family in BY_FAMILY else None


def read_trust_file(path: str, field: str, families: Iterable[str]) -> tuple[TrustFormat, dict[str, Any]]:
    """(its format, its data) of the file at `path`, read once, if it is a current file of one of
    `families`; else OptccError(field) saying what it is and what to make instead."""
    wanted = tuple(families)
    data = read_json(path, field)
    family = format_family(data)
    got = data.get("format") if isinstance(data, dict) else None
    expected = " or ".join(BY_FAMILY[f].what for f in wanted)
    if family is None:
        raise OptccError(field, f"{path} is not an optcc {expected} (format {got!r})")
    fmt = BY_FAMILY[family]
    if family not in wanted:
        raise OptccError(field, f"{path} holds a {fmt.what} ({got}); expected a {expected}")
    if got != fmt.format:
        raise OptccError(field, f"{path}: {got} is stale: this optcc reads {fmt.format} ({fmt.what}; "
                                f"make a current one: {fmt.remake})")
    assert isinstance(data, dict)
    return fmt, data


def check_file(path: str, family: str, check: Callable[[dict[str, Any]], tuple[bool, str]]) -> tuple[bool, str]:
    """`check` of the data of a current `family` file at `path`, or (False, why it is not one)."""
    try:
        _, data = read_trust_file(path, "certificate", [family])
    except OptccError as e:
        return False, e.message
    return check(data)
