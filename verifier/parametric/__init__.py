"""Parametric proofs: the generators' flow families proved for all sizes (docs/parametric.md)."""
from verifier.parametric.prove import PROPERTIES, prove_all

__all__ = ["PROPERTIES", "prove_all"]
