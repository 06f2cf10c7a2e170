"""verifier: Z3 proof that a Schedule computes the AllReduce, with counterexamples and certificates."""
from verifier.certificate import certificate_matches, write_certificate
from verifier.proof import PROPERTIES, Proof, prove_allreduce

__all__ = ["PROPERTIES", "Proof", "prove_allreduce", "write_certificate", "certificate_matches"]
