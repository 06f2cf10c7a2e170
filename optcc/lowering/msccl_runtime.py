"""Limits of the MSCCL runtime (msccl.h, msccl_parser.h; RCCL: ../shared/MSCCL.md) that both the
exporter (optcc.lowering.msccl) and the verifier's model of the runtime (verifier.msccl) obey."""

MAX_COUNT = 72              # MSCCL_MAX_COUNT: cnt must be < 72
MAX_THREAD_BLOCKS = 64      # per GPU (RCCL; ../shared/MSCCL.md)
MAX_TBS_PER_CHANNEL = 32    # MSCCL_MAX_NUM_THREAD_BLOCKS_PER_CHANNEL: send (recv) peers per channel
MAX_REDUCE_FUSION = 16      # MSCCL_MAX_REDUCE_FUSION
MAX_CHANNELS = 64           # MAXCHANNELS: NCCL 2.12-2.18 and RCCL 32, later NCCL 64
MAX_STR_LEN = 255           # MSCCL_MAX_STR_LEN (msccl_parser.h)
MAX_ATTR_COUNT = 16         # MSCCL_MAX_ATTR_COUNT
MAX_SUBS = 1024             # MSCCL_MAX_SUBS: children of one element
MAX_NODES = 4096            # MSCCL_MAX_NODES: elements the runtime stores for one rank (RCCL)
