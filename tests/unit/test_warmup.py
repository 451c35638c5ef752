"""Warm-up ends when step times have settled (hvdbench.train.warmup), between --warmup-steps and
its cap, on synthetic step-time series."""

import pytest

from hvdbench.train.warmup import cap, done, settled


def cold_then_steady(cold_steps: int, steady_s: float = 0.063, cold_s: float = 0.098) -> list[float]:
    """A rank that starts cold and speeds up linearly to its steady step time."""
    ramp = [cold_s - (cold_s - steady_s) * i / cold_steps for i in range(cold_steps)]
    return ramp + [steady_s] * 40


def first_done(times: list[float], warmup_steps: int, most: int) -> int:
    return next(i for i in range(len(times) + 1) if done(i, times[:i], warmup_steps, most))


def test_a_cold_start_is_waited_out():
    # 5 warm-up steps would end mid-ramp (the seen 98 ms vs 63 ms repeats); settling waits for the
    # ramp to end: the last 5 steps' median within 5 % of the 5 before.
    times = cold_then_steady(20)
    end = first_done(times, warmup_steps=5, most=60)
    assert 20 < end <= 30
    assert settled(times[:end]) and not any(settled(times[:i]) for i in range(end))
    assert first_done(times, warmup_steps=5, most=cap(5, 0)) == 25  # the default cap came first


def test_steady_steps_end_warm_up_as_soon_as_there_are_two_windows():
    assert first_done([0.05] * 60, warmup_steps=5, most=25) == 10
    assert first_done([0.05] * 60, warmup_steps=12, most=25) == 12  # never before --warmup-steps


def test_the_cap_ends_a_warm_up_that_never_settles():
    noisy = [0.05 if i % 2 else 0.15 for i in range(100)]
    noisy = [t * (1 + 0.5 * (i // 5 % 2)) for i, t in enumerate(noisy)]  # medians jump every window
    assert first_done(noisy, warmup_steps=5, most=cap(5, 0)) == 25  # 5 x --warmup-steps
    assert first_done(noisy, warmup_steps=5, most=cap(5, 40)) == 40  # --warmup-max-steps


@pytest.mark.parametrize("warmup_steps, warmup_max_steps, expected", [
    (10, 0, 50), (10, 30, 30), (10, 4, 10), (0, 0, 0),
    (2, 0, 10),  # the default cap is 5x, enough for two windows of 5
    (1, 0, 1),  # 5 steps could never show two windows settled: the asked count stands
    (1, 8, 8)])  # a cap the user gives is taken as given
def test_the_cap(warmup_steps, warmup_max_steps, expected):
    assert cap(warmup_steps, warmup_max_steps) == expected
