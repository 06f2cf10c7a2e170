"""gpu_runner: execute proved optcc Schedules with torch.distributed (gloo on CPU, NCCL on GPU).

Modules: runners (the runner table and make_executor), executor (torch: the step plans of
optcc.lowering.step, one batch_isend_irecv per start time, in-place additions), streaming (the
default runner: no per-time barrier, executes the dependency program of optcc.lowering.streaming
that verifier.streaming proves safe), hosts (stragglers named by host: place
processes on schedule ranks), worker (one rank's process; `python -m gpu_runner` under
torchrun), launch (local processes for `optcc run`/`optcc bench`), proof (refuse unproved
schedules and programs; the launcher's signed attestation), watchdog (no rank ever hangs), bench (nccl-tests style table), ddp_hook (DDP
communication hook), testbed (network namespaces with tc-shaped links). torch is imported only
inside this package (optional extra "runner").
"""
