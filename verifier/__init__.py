"""verifier: Z3 proof that a Schedule computes the AllReduce, with counterexamples and certificates.

The names below load on first use (PEP 562), so that a module a runner needs (verifier.step_check,
verifier.streaming_local, verifier.numerics) imports no solver: a worker that runs an attested
schedule proves nothing and never loads z3."""
from importlib import import_module
from typing import Any

_LAZY = {"VERIFIER_VERSION": "verifier.certificate", "certificate_matches": "verifier.certificate",
         "check_certificate": "verifier.certificate", "write_certificate": "verifier.certificate",
         "check_determinism": "verifier.determinism", "PROPERTIES": "verifier.proof", "REPORTED": "verifier.proof",
         "Proof": "verifier.proof", "prove_allreduce": "verifier.proof", "required_properties": "verifier.proof"}

__all__ = ["PROPERTIES", "REPORTED", "VERIFIER_VERSION", "Proof", "certificate_matches", "check_certificate",
           "check_determinism", "prove_allreduce", "required_properties", "write_certificate"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'verifier' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
