"""Flux.1's quality metric, MLPerf's flux1 validation loss (lower is better, target 0.586): the
rectified-flow loss at 8 equidistant timesteps t = i / 8 (i = 0..7), averaged per timestep, then
the mean of the 8 per-timestep means (mlcommons/training text_to_image/README.md, "Validation Loss
Computation", after Esser et al. 2024).

    metric = TimestepLoss()
    state = metric.update(metric.start(), stats)    # per validation batch (torch.py's stats)
    reduced = metric.reduce(metric.local(state), dist)   # one allreduce of 17 sums
    metric.value(reduced)                           # mean over timesteps of the mean loss at each

torch.py's stats per batch: `timestep_loss` (8,) the sums of the per-sample losses at each timestep
index, `timestep_count` (8,) how many samples were evaluated at each, and `samples` the batch's
validation samples. The ranks' sums are added before any division, so the value is that of the
whole validation split whatever the number of ranks. With equal counts per timestep (the reference's
split is a multiple of 8, each sample carries i = its position mod 8) it equals the plain mean loss,
which is what the reference's train.py computes.
"""

from __future__ import annotations

import math

import numpy as np

from hvdbench.contracts import Metric

TIMESTEPS = 8


class TimestepLoss(Metric):
    higher_is_better = False
    bounds = (0.0, math.inf)

    def __init__(self, name: str = "eval_loss", timesteps: int = TIMESTEPS):
        self.name, self.timesteps = name, timesteps

    def start(self) -> list:
        return [0, 0, 0]  # ints: they add to tensors of any framework alike

    def update(self, state: list, stats: dict) -> list:
        # Adds device tensors without reading them back: no synchronisation per batch.
        return [state[0] + stats["timestep_loss"], state[1] + stats["timestep_count"], state[2] + stats["samples"]]

    def local(self, state: list) -> np.ndarray:
        """[8 loss sums, 8 counts, samples] as float64 (a state no batch updated is all zeros)."""
        t = self.timesteps
        sums, counts, samples = (np.zeros(n) + _numbers(x) for x, n in zip(state, (t, t, 1)))
        return np.concatenate([sums, counts, samples.reshape(1)])

    def reduce(self, local: np.ndarray, dist) -> np.ndarray:
        return np.asarray(dist.allreduce_sum(local), dtype=np.float64)

    def per_timestep(self, reduced: np.ndarray) -> np.ndarray:
        """The mean loss at each timestep index (nan where no sample was evaluated there)."""
        t = self.timesteps
        sums, counts = reduced[:t], reduced[t:2 * t]
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)

    def value(self, reduced: np.ndarray) -> float:
        """Mean of the per-timestep means over the timesteps evaluated (all 8 on any split of at
        least 8 samples); nan for an empty evaluation."""
        means = self.per_timestep(reduced)
        seen = means[~np.isnan(means)]
        return float(seen.mean()) if len(seen) else math.nan

    def samples(self, reduced: np.ndarray) -> int:
        return int(reduced[2 * self.timesteps])


def _numbers(x) -> np.ndarray:
    """A device tensor, a number or an array as float64 numpy."""
    if hasattr(x, "detach"):
        return x.detach().double().cpu().numpy()
    return np.asarray(x, dtype=np.float64)
