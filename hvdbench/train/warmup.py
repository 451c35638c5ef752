"""When a throughput run's warm-up may end: after `--warmup-steps` at least, once the step times
have settled, and after `--warmup-max-steps` at most (the count is recorded as the run's
`warmup_steps`).

    hvdbench train resnet50 --synthetic --steps 50 --warmup-steps 5 --warmup-max-steps 40

A cold rank (allocator, caches, the first collectives, a CPU's frequency) steps slower for a while;
a fixed count of warm-up steps that ends too early leaves that in the timed window, and two repeats
of one layout then differ by more than any layout change (seen here: 98 ms and 63 ms per step).

    settled([0.09, 0.08, 0.07, 0.066, 0.064, 0.063, 0.063, 0.062, 0.063, 0.063])   # True
"""

from __future__ import annotations

from statistics import median

WINDOW = 5  # steps per window: the median of the last 5 against the median of the 5 before them
TOLERANCE = 0.05  # settled when those medians differ by at most 5 % (a slow ramp moves 10 % in 5 steps)
CAP_FACTOR = 5  # --warmup-max-steps 0: five times --warmup-steps


def settled(step_times: list[float], window: int = WINDOW, tolerance: float = TOLERANCE) -> bool:
    """Whether the last `window` step times have the median of the `window` before them, within
    `tolerance`: the step time has stopped falling (or rising)."""
    if len(step_times) < 2 * window:
        return False
    last, before = median(step_times[-window:]), median(step_times[-2 * window:-window])
    return before > 0 and abs(last / before - 1.0) <= tolerance


def least(warmup_steps: int, compiles: bool) -> int:
    """The fewest warm-up steps a run takes: --warmup-steps, but at least one where the step is
    compiled (torch.compile compiles in the first call). `--warmup-steps 0` asks for the shortest
    run, not for compilation timed as throughput (10.7 samples/s where ~800 was the step's rate)."""
    return max(warmup_steps, 1) if compiles else warmup_steps


def cap(warmup_steps: int, warmup_max_steps: int) -> int:
    """The most warm-up steps a run takes: --warmup-max-steps, else CAP_FACTOR x --warmup-steps
    (never fewer than --warmup-steps; 0 warm-up steps asked for means none). A default cap too short
    to judge settling (two windows) keeps --warmup-steps as asked: a short smoke run (--warmup-steps 1)
    is not stretched to a cap it could never end before."""
    if not warmup_max_steps and CAP_FACTOR * warmup_steps < 2 * WINDOW:
        return warmup_steps
    most = warmup_max_steps or CAP_FACTOR * warmup_steps
    return max(most, warmup_steps)


def done(step: int, step_times: list[float], warmup_steps: int, most: int) -> bool:
    """This rank's view: warm-up may end before `step` (0-based) with these warm-up step times."""
    if step < warmup_steps:
        return False
    return step >= most or settled(step_times)
