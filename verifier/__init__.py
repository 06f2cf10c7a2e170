"""verifier: Z3 proof that a Schedule computes the AllReduce, with counterexamples and certificates."""
from verifier.certificate import VERIFIER_VERSION, certificate_matches, check_certificate, write_certificate
from verifier.determinism import check_determinism
from verifier.proof import PROPERTIES, REPORTED, Proof, prove_allreduce, required_properties

__all__ = ["PROPERTIES", "REPORTED", "check_determinism", "Proof", "prove_allreduce", "write_certificate", "certificate_matches",
           "check_certificate", "VERIFIER_VERSION", "required_properties"]
