"""gpu_runner: execute proved optcc Schedules with torch.distributed (gloo on CPU, NCCL on GPU).

Modules: plan (schedule -> per-rank steps, pure Python), executor (torch: batch_isend_irecv per
start time, in-place additions), streaming (the default runner: no per-time barrier, executes
the dependency program verifier.streaming proves safe), hosts (stragglers named by host: place
processes on schedule ranks), worker (one rank's process; `python -m gpu_runner` under
torchrun), launch (local processes for `optcc run`/`optcc bench`), proof (refuse unproved
schedules), watchdog (no rank ever hangs), bench (nccl-tests style table), ddp_hook (DDP
communication hook), testbed (network namespaces with tc-shaped links). torch is imported only
inside this package (optional extra "runner").
"""
