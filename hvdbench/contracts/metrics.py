"""Evaluation metrics: per-rank state -> reduced across ranks -> one value, and its direction.

    metric = accuracy("top1")             # correct / total, one allreduce of two sums
    metric.reached(0.96, target=0.95)     # True
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hvdbench.errors import ConfigError


class Metric:
    """An evaluation metric: per-rank state over the validation batches -> reduced across ranks ->
    one value, and the direction in which the target is reached.

    The trainer calls `update(state, stats)` per batch with the `stats` dict the model's
    `loss_and_stats` returns (framework tensors; keep them on the device), then `local(state)`
    once; the worker calls `reduce(local, dist)` on every rank and `value(reduced)`.
    """

    name: str = ""
    higher_is_better: bool = True
    bounds: tuple[float, float] = (0.0, 1.0)  # the values a target may take

    def start(self) -> Any:
        raise NotImplementedError

    def update(self, state: Any, stats: dict) -> Any:
        raise NotImplementedError

    def local(self, state: Any) -> Any:
        """This rank's state in plain Python/numpy (what travels between ranks)."""
        return state

    def reduce(self, local: Any, dist) -> Any:
        raise NotImplementedError

    def value(self, reduced: Any) -> float:
        raise NotImplementedError

    def samples(self, reduced: Any) -> int | None:
        """How many samples the evaluation covered, when the metric knows."""
        return None

    def reached(self, value: float, target: float) -> bool:
        return value >= target if self.higher_is_better else value <= target

    def logged(self, value: float):
        """What MLLOG's eval_accuracy carries for the evaluation `value` just came from: the value,
        or the several numbers MLPerf logs for a benchmark (Mask R-CNN's {"BBOX", "SEGM"})."""
        return value

    def check_target(self, target: float) -> None:
        low, high = self.bounds
        if not (low < target <= high if self.higher_is_better else low <= target < high):
            raise ConfigError(f"target for {self.name} must be in "
                              f"{'(' if self.higher_is_better else '['}{low:g}, {high:g}"
                              f"{']' if self.higher_is_better else ')'}, got {target}")


class RatioMetric(Metric):
    """sum(numerator) / sum(denominator) over batches and ranks: accuracy (correct / total),
    HR@10 (hits / users), a mean eval loss (loss sum / tokens). Reduced by one allreduce of sums."""

    def __init__(self, name: str, numerator: str, denominator: str, higher_is_better: bool = True,
                 bounds: tuple[float, float] = (0.0, 1.0)):
        self.name, self.keys = name, (numerator, denominator)
        self.higher_is_better, self.bounds = higher_is_better, bounds

    def start(self) -> list:
        return [0, 0]  # ints: they add to int and float tensors of any framework alike

    def update(self, state: list, stats: dict) -> list:
        # Adds framework tensors without reading them back: no device synchronisation per batch.
        return [s + stats[k] for s, k in zip(state, self.keys)]

    def local(self, state: list) -> np.ndarray:
        return np.array([float(s) for s in state], dtype=np.float64)

    def reduce(self, local: np.ndarray, dist) -> np.ndarray:
        return np.asarray(dist.allreduce_sum(local), dtype=np.float64)

    def value(self, reduced: np.ndarray) -> float:
        return float(reduced[0] / max(reduced[1], 1e-12)) if reduced[1] else math.nan

    def samples(self, reduced: np.ndarray) -> int:
        return int(reduced[1])


class GatheredMetric(Metric):
    """A metric that needs every rank's raw results (COCO mAP over all detections): the per-batch
    stats (host objects) are gathered to every rank and `compute(list of all batches' stats)`."""

    def __init__(self, name: str, compute, higher_is_better: bool = True,
                 bounds: tuple[float, float] = (0.0, 1.0)):
        self.name, self.compute = name, compute
        self.higher_is_better, self.bounds = higher_is_better, bounds

    def start(self) -> list:
        return []

    def update(self, state: list, stats: dict) -> list:
        return [*state, stats]

    def reduce(self, local: list, dist) -> list:
        return [item for part in dist.allgather_object(local) for item in part]

    def value(self, reduced: list) -> float:
        return float(self.compute(reduced))


def accuracy(name: str) -> RatioMetric:
    """correct / total, from `loss_and_stats`'s stats {"correct", "total"}."""
    return RatioMetric(name, "correct", "total")


def eval_loss(name: str = "eval_loss") -> RatioMetric:
    """Mean loss, lower is better, from stats {"loss_sum", "count"}."""
    return RatioMetric(name, "loss_sum", "count", higher_is_better=False, bounds=(0.0, math.inf))
