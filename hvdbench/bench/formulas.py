"""Allreduce bandwidth as nccl-tests defines it, and the sizes and iteration counts of a sweep.

nccl-tests (github.com/NVIDIA/nccl-tests, doc/PERFORMANCE.md):
- time: each rank times `iters` back-to-back operations after a barrier and divides by `iters`;
  the reported time is the average of that over ranks (`-a 1`, its default). We report the same
  mean, and the min and max over ranks beside it.
- algorithm bandwidth: algbw = S / t, S the message size in bytes.
- bus bandwidth: busbw = algbw x 2(n-1)/n for allreduce: each of the n ranks must send and receive
  2(n-1)/n of the message whatever the algorithm (ring, tree), so busbw is comparable to the
  hardware's link bandwidth and independent of n. With n = 1 nothing crosses a link: busbw = 0.
- GB/s means 1e9 bytes per second.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from hvdbench.bench.defaults import BUDGET_BYTES
from hvdbench.errors import ConfigError

GB = 1e9  # nccl-tests' bandwidth unit
MIB = 1 << 20
MIN_ITERS = 2  # even the largest message is timed over at least this many operations

DTYPE_BYTES = {"fp32": 4, "fp16": 2}


def algbw(nbytes: int, seconds: float) -> float:
    """Algorithm bandwidth in GB/s: bytes / time per operation."""
    if seconds <= 0:
        raise ValueError(f"time per operation must be positive, got {seconds!r}")
    return nbytes / seconds / GB


def busbw(algbw_gb_s: float, world_size: int) -> float:
    """Allreduce bus bandwidth in GB/s: algbw x 2(n-1)/n."""
    if world_size < 1:
        raise ValueError(f"world size must be >= 1, got {world_size!r}")
    return algbw_gb_s * 2 * (world_size - 1) / world_size


def is_power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def message_sizes(min_bytes: int, max_bytes: int, dtype: str) -> list[int]:
    """Powers of two from min_bytes to max_bytes, skipping sizes smaller than one element of dtype."""
    for name, value in (("--min-bytes", min_bytes), ("--max-bytes", max_bytes)):
        if not is_power_of_two(value):
            raise ConfigError(f"{name} {value}: must be a power of two (4, 8, ..., 268435456)")
    if min_bytes > max_bytes:
        raise ConfigError(f"--min-bytes {min_bytes} is larger than --max-bytes {max_bytes}")
    if dtype not in DTYPE_BYTES:
        raise ConfigError(f"dtype {dtype!r}: choose from {', '.join(DTYPE_BYTES)}")
    sizes, size = [], min_bytes
    while size <= max_bytes:
        if size >= DTYPE_BYTES[dtype]:
            sizes.append(size)
        size *= 2
    return sizes


def iterations(nbytes: int, iters: int, warmup_iters: int, budget_bytes: int = BUDGET_BYTES) -> tuple[int, int]:
    """(timed, warm-up) operations for one message size:
    timed = max(2, min(iters, budget / size)); warm-up = max(1, min(warmup_iters, budget / size / 4)).
    Small messages get the full counts; a 256 MiB message with a 1 GiB budget gets 4 timed and 1 warm-up."""
    if iters < 1 or warmup_iters < 0:
        raise ConfigError(f"--iters {iters} must be >= 1 and --warmup-iters {warmup_iters} >= 0")
    fit = budget_bytes // max(1, nbytes)
    timed = min(iters, max(MIN_ITERS, fit))
    warm = min(warmup_iters, max(1, fit // 4))
    return timed, warm


@dataclass(frozen=True)
class Iterations:
    """How often a collective runs at each message size: up to `iters` timed after up to
    `warmup_iters` untimed, both cut so that one size moves about `budget_bytes` (`at`).
    `hvdbench bench allreduce --iters 20 --warmup-iters 5`."""

    iters: int
    warmup_iters: int
    budget_bytes: int = BUDGET_BYTES

    def at(self, nbytes: int) -> tuple[int, int]:
        """(timed, warm-up) operations for a message of `nbytes` (`iterations`)."""
        return iterations(nbytes, self.iters, self.warmup_iters, self.budget_bytes)


def across_ranks(seconds_per_op: list[float]) -> tuple[float, float, float]:
    """(mean, min, max) over ranks of each rank's average time per operation."""
    return statistics.fmean(seconds_per_op), min(seconds_per_op), max(seconds_per_op)
