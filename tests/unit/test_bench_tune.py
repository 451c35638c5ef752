"""The search behind `bench allreduce --tune` (hvdbench/bench/tune.py): coordinate descent finds the
best settings of a known score surface, measuring each distinct setting once; scores and flags."""

import math

import pytest

from hvdbench.bench import tune as T
from hvdbench.results.records.schema import AllreduceRow

SPACE = (("A", ("1", "2", "3")), ("B", ("x", "y")))


def test_coordinate_descent_finds_the_best_of_a_separable_surface_measuring_each_setting_once():
    gain = {"1": 1.0, "2": 3.0, "3": 2.0, "x": 1.0, "y": 1.5}
    calls = []

    def measure(settings):
        calls.append(dict(settings))
        return gain[settings["A"]] * gain[settings["B"]]

    best, tried = T.coordinate_descent(SPACE, measure)
    assert best == {"A": "2", "B": "y"}
    assert calls[0] == {"A": "1", "B": "x"}  # the defaults first
    assert len(calls) == len({tuple(sorted(c.items())) for c in calls}) == 4  # A: 3 values, then B's other
    assert max(s for _, s in tried) == pytest.approx(4.5)


def test_the_defaults_stay_when_nothing_beats_them():
    best, tried = T.coordinate_descent(SPACE, lambda s: 1.0 if s == {"A": "1", "B": "x"} else 0.5)
    assert best == {"A": "1", "B": "x"} and len(tried) == 4
    assert T.env_flags(best, SPACE).startswith("(Horovod's defaults are best")
    assert T.env_flags({"A": "3", "B": "x"}, SPACE) == "--env A=3"


def row(nbytes, seconds, busbw=None):
    return AllreduceRow(impl="horovod", dtype="fp32", bytes=nbytes, time_mean_s=seconds, busbw_gb_s=busbw)


def test_the_score_is_the_geometric_mean_of_horovods_bandwidth_over_mpis():
    rows = [row(1 << 20, 0.004), row(16 << 20, 0.010)]
    reference = {("fp32", 1 << 20): 0.001, ("fp32", 16 << 20): 0.010}
    assert T.score(rows, reference) == pytest.approx(math.sqrt(0.25 * 1.0))
    # Without an MPI reference (horovodrun --gloo): Horovod's bus bandwidth.
    assert T.score([row(1 << 20, 0.1, 2.0), row(2 << 20, 0.1, 8.0)], None) == pytest.approx(4.0)
    assert T.score([], None) == 0.0


def test_the_search_space_starts_at_horovods_defaults():
    space = dict(T.SEARCH)
    assert space["HOROVOD_CYCLE_TIME"][0] == "1" and space["HOROVOD_CACHE_CAPACITY"][0] == "1024"
