"""DDP comm hook that lets an MSCCL runtime pick an exported algorithm for every gradient bucket.

MSCCL runtimes run an algorithm XML only when the element count is a multiple of its
`nchunksperloop` D (and the op is SUM; AVG falls back to NCCL's own algorithms silently). DDP's
buckets have arbitrary sizes, so the hook copies each bucket into a zero-padded buffer whose
length is a multiple of D, divides by the world size (DDP averages, like the default hook),
calls `dist.all_reduce` (SUM) on it, and copies the first n elements back. Padding with zeros
does not change the sum. Each call gets its own padded buffer (DDP may have several buckets of one
size in flight at once; torch's caching allocator makes the allocation cheap).

    state = MscclHookState.from_xml("optcc.xml")      # or MscclHookState(d)
    model.register_comm_hook(state, msccl_hook)
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from optcc.errors import OptccError


def padded_length(n: int, d: int) -> int:
    """The smallest multiple of d that is >= n (n = 0 stays 0)."""
    return -(-n // d) * d


class MscclHookState:
    def __init__(self, d: int, process_group=None):
        if not isinstance(d, int) or d < 1:
            raise OptccError("nchunksperloop", f"expected a positive integer D, got {d!r}")
        self.d = d
        self.process_group = process_group
        self.padded = 0                                # buckets that needed padding (for tests, logs)

    @classmethod
    def from_xml(cls, path: str, process_group=None) -> MscclHookState:
        """D from the file's nchunksperloop (the file is parsed as the runtime parses it)."""
        from verifier.msccl import load_program
        with open(path) as fh:
            return cls(load_program(fh.read()).nchunks, process_group)

    def buffer(self, like: torch.Tensor) -> torch.Tensor:
        """A zeroed buffer for `like`, padded to a multiple of D."""
        return torch.zeros(padded_length(like.numel(), self.d), dtype=like.dtype, device=like.device)


def msccl_hook(state: MscclHookState, bucket):  # no return annotation: DDP rejects string ones
    """Average one DDP bucket with dist.all_reduce on a buffer padded to a multiple of D."""
    tensor = bucket.buffer()
    n = tensor.numel()
    world = dist.get_world_size(state.process_group)
    if n % state.d == 0:
        tensor.div_(world)
        fut = dist.all_reduce(tensor, group=state.process_group, async_op=True).get_future()
        return fut.then(lambda f: f.value()[0])
    state.padded += 1
    buf = state.buffer(tensor)
    buf[:n].copy_(tensor.view(-1)).div_(world)
    fut = dist.all_reduce(buf, group=state.process_group, async_op=True).get_future()

    def unpad(f):
        tensor.view(-1).copy_(f.value()[0][:n])
        return tensor
    return fut.then(unpad)
