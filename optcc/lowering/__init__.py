"""Lowering: a Schedule as the per-rank programs that execute it (pure Python, core only below).

  step       the step runner's plans (one batch of posts per start time) for a tensor length
  streaming  the streaming runner's dependency programs (numel-independent)
  msccl      MSCCL thread-block programs and their XML (msccl_runtime: the runtime's limits)
  digest     sha256 of a streaming rank program, as certificates record the proved ones

Each is proved by the verifier (verifier.step_check, verifier.streaming, verifier.msccl), never
here; the runner executes only what those proofs, or a certificate's digests, vouch for.
"""
