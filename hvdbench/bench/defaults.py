"""The benches' default settings, each defined once: `hvdbench bench`'s options show them and the
bench code uses them. Plain constants, free of numpy and h5py, so the CLI imports this at start-up.
"""

# bench allreduce: message sizes 4 B .. 256 MiB (powers of two), fp32 and fp16, nccl-tests' own
# iteration counts (-n 20 -w 5).
MIN_BYTES = 4
MAX_BYTES = 256 << 20
DTYPES = ("fp32", "fp16")
ITERS = 20
WARMUP_ITERS = 5
# Large messages get fewer iterations: about this many bytes per (size, dtype, implementation),
# so a sweep up to 256 MiB finishes in minutes on a laptop and still times >= 2 operations.
BUDGET_BYTES = 1 << 30

# bench io
IO_SPLIT = "train"
IO_BATCH_SIZE = 256  # samples per rank per batch
IO_PASSES = 2  # full reads of the split, each way
IO_SEED = 0
