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

# bench links: the smallest size gives the latency, the largest the bandwidth; each (pair, size) is
# `repeats` timed runs of up to `iters` round trips, fewer where a round trip is slow: the repeats
# together take about BUDGET_S (one round trip each at least), so a link shaped to 100 Mbit/s costs
# seconds per pair, not minutes.
LINK_SIZES = (8, 64 << 10, 1 << 20, 16 << 20)
LINK_ITERS = 20
LINK_WARMUP_ITERS = 3
LINK_REPEATS = 5
LINK_BUDGET_S = 1.0

# bench io
IO_SPLIT = "train"
IO_BATCH_SIZE = 256  # samples per rank per batch
IO_PASSES = 2  # full reads of the split, each way
IO_SEED = 0

# bench compute: the precisions timed (those a device lacks get a row saying so), and the time each
# (rank, op, precision) is given: the op is timed once, then repeated to fill the budget (2 at least).
COMPUTE_DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8")
COMPUTE_BUDGET_S = 1.0
COMPUTE_MAX_ITERS = 200
# Matrix size n (n x n times n x n) and copy size: large enough to reach a device's steady rate,
# small enough for a CPU core (2 x 2048^3 = 17 GFLOP, a fraction of a second in fp32 on one core).
MATMUL_N = {"cuda": 8192, "cpu": 2048}
COPY_BYTES = {"cuda": 1 << 30, "cpu": 256 << 20}
# The smallest copy `bench compute` times: below a MiB a copy is over in microseconds and its time is the
# call's overhead, not memory bandwidth (1 byte measured 0.0 GB/s); sizes past the caches read memory.
MIN_COPY_BYTES = 1 << 20
