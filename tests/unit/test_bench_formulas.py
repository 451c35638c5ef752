"""Allreduce bandwidth formulas (nccl-tests' definitions), message sizes and iteration counts."""

import pytest

from hvdbench.bench import defaults, formulas as F
from hvdbench.errors import ConfigError
from hvdbench.output import human_bytes


def test_algbw_is_bytes_over_time_in_gb_per_s():
    assert F.algbw(1_000_000_000, 0.5) == pytest.approx(2.0)
    assert F.algbw(4, 1e-6) == pytest.approx(4e-3)


@pytest.mark.parametrize("n, factor", [(1, 0.0), (2, 1.0), (4, 1.5), (8, 1.75), (64, 2 * 63 / 64)])
def test_busbw_is_algbw_times_2_n_minus_1_over_n(n, factor):
    assert F.busbw(10.0, n) == pytest.approx(10.0 * factor)


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError):
        F.algbw(1024, 0.0)
    with pytest.raises(ValueError):
        F.busbw(1.0, 0)


def test_sizes_double_from_min_to_max_and_skip_sizes_below_one_element():
    assert F.message_sizes(4, 64, "fp32") == [4, 8, 16, 32, 64]
    assert F.message_sizes(1, 16, "fp16") == [2, 4, 8, 16]  # 1 byte holds no fp16 element
    assert F.message_sizes(1, 2, "fp32") == []
    default = F.message_sizes(defaults.MIN_BYTES, defaults.MAX_BYTES, "fp32")
    assert default[0] == 4 and default[-1] == 256 << 20 and len(default) == 27


@pytest.mark.parametrize("lo, hi, dtype, fragment", [
    (3, 64, "fp32", "--min-bytes 3"), (4, 100, "fp32", "--max-bytes 100"),
    (64, 4, "fp32", "larger than"), (4, 64, "int8", "dtype 'int8'")])
def test_bad_sizes_name_the_option(lo, hi, dtype, fragment):
    with pytest.raises(ConfigError, match=fragment):
        F.message_sizes(lo, hi, dtype)


def test_large_messages_get_fewer_iterations_but_at_least_two_timed_and_one_warmup():
    budget = 1 << 30
    assert F.iterations(4, 20, 5, budget) == (20, 5)
    assert F.iterations(32 << 20, 20, 5, budget) == (20, 5)  # 1 GiB / 32 MiB = 32 >= 20
    assert F.iterations(64 << 20, 20, 5, budget) == (16, 4)
    assert F.iterations(256 << 20, 20, 5, budget) == (4, 1)
    assert F.iterations(1 << 30, 20, 5, budget) == (2, 1)
    assert F.iterations(4 << 30, 20, 5, budget) == (2, 1)
    assert F.iterations(4, 3, 0, budget) == (3, 0)
    with pytest.raises(ConfigError):
        F.iterations(4, 0, 5)


def test_time_across_ranks_is_mean_min_max_of_per_rank_averages():
    assert F.across_ranks([1.0, 2.0, 6.0]) == (3.0, 1.0, 6.0)


def test_human_bytes():
    assert [human_bytes(n) for n in (4, 1024, 3 << 20, 1 << 30, 1000)] == ["4 B", "1 KiB", "3 MiB", "1 GiB", "1000 B"]
