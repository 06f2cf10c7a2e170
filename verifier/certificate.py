"""Proof certificates: a small JSON file tying a proved Proof to the schedule's sha256.

The runner accepts a schedule whose certificate matches without proving it again; the
certificate is only as good as the hash (sha256 of the schedule's canonical JSON).
"""
from __future__ import annotations

import json

import z3

from optcc.errors import OptccError
from optcc.files import write_text_atomic
from optcc.jsonout import dumps
from verifier.proof import PROPERTIES

FORMAT = "optcc-certificate/1"


def write_certificate(proof, schedule, path: str, field: str = "certificate") -> None:
    """Write the certificate atomically; refuses a proof that did not prove all five properties."""
    if not proof.proved or set(proof.properties) != set(PROPERTIES):
        raise OptccError("certificate", "only a proof of all five properties gets a certificate")
    data = {"format": FORMAT, "schedule_sha256": schedule.sha256(), "proved": True,
            "properties": {k: bool(proof.properties[k]) for k in PROPERTIES},
            "z3_version": z3.get_version_string(), "seconds": round(proof.seconds, 6)}
    write_text_atomic(path, dumps(data, indent=2) + "\n", field)


def certificate_matches(schedule, path: str) -> bool:
    """True iff `path` is a certificate of this exact schedule with every property proved."""
    try:
        with open(path) as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return False
    if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("proved") is not True:
        return False
    props = data.get("properties")
    if not isinstance(props, dict) or any(props.get(k) is not True for k in PROPERTIES):
        return False
    return data.get("schedule_sha256") == schedule.sha256()
