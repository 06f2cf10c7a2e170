"""verifier.msccl: read, verify and write MSCCL algorithm XML (the runtimes' custom collectives).

verify_xml(text) parses with the runtime's lexical rules (verifier.msccl.parse), loads and checks
the program (verifier.msccl.model), executes it symbolically (verifier.msccl.execute) and proves
sum, deadlock_free, limits and deterministic (verifier.msccl.prove). optcc.lowering.msccl.export_xml
writes a proved optcc Schedule as an in-place AllReduce XML. docs/msccl.md.
"""
from verifier.msccl.model import Program, load_program
from verifier.msccl.prove import PROPERTIES, MscclProof, prove_program

STEP_LIMITS = (64, 256)   # steps per thread block: RCCL / msccl-executor-nccl, microsoft/msccl


def verify_xml(text: str, max_steps: int = 64) -> MscclProof:
    """Prove the four properties of an AllReduce XML; OptccError (line, field) when malformed."""
    return prove_program(load_program(text), max_steps)


__all__ = ["PROPERTIES", "STEP_LIMITS", "MscclProof", "Program", "load_program", "prove_program", "verify_xml"]
