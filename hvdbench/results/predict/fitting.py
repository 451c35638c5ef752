"""The least-squares fit both predictors share: the throughput predictor's link latency and busbw
(throughput.py) and the time-to-train predictor's training rate (time_to_train.py); and the interval
both put beside every predicted number (`interval`, COVERAGE).

    a, b = least_squares([(1.0, n) for n in sizes], times)    # times ~ a + b n, a and b >= 0
    low, high = interval(predicted, quadrature(residual, repeats, 0.06 * doublings_past(64, [8, 16])))
"""

from __future__ import annotations

import math
from statistics import NormalDist


def least_squares(x: list[tuple[float, float]], y: list[float]) -> tuple[float, float]:
    """(a, b) minimising sum (a x0 + b x1 - y)^2, both kept >= 0 (a cost cannot be negative): the
    2x2 normal equations, and the one-unknown fit when the other comes out negative."""
    s00 = sum(u * u for u, _ in x)
    s01 = sum(u * v for u, v in x)
    s11 = sum(v * v for _, v in x)
    t0 = sum(u * w for (u, _), w in zip(x, y))
    t1 = sum(v * w for (_, v), w in zip(x, y))
    det = s00 * s11 - s01 * s01
    if det > 0:
        a, b = (t0 * s11 - t1 * s01) / det, (t1 * s00 - t0 * s01) / det
        if a >= 0 and b >= 0:
            return a, b
    only_b = (0.0, max(t1 / s11, 0.0)) if s11 > 0 else (0.0, 0.0)
    only_a = (max(t0 / s00, 0.0), 0.0) if s00 > 0 else (0.0, 0.0)

    def err(ab):
        return sum((ab[0] * u + ab[1] * v - w) ** 2 for (u, v), w in zip(x, y))
    return min(only_b, only_a, key=err)


# --- intervals ----------------------------------------------------------------------------------------
# Every predicted number carries an interval meant to hold COVERAGE of the values a measurement would
# give: value x exp(+-z sigma), sigma the log-spread of what the fit cannot explain, in quadrature: the
# residuals of the fitted layouts, the spread of their repeats, and a spread that grows with each
# doubling past the fitted range (PER_DOUBLING, added up, as a systematic error is). The per-doubling
# spreads are judged from MLPerf Training v4.0-v5.1 (benchmarks/bench_predict_published.py: a layout
# 2x past its fitted GPUs misses by ~5 %, 8-16x past by 10-40 %); the benchmark scores the coverage.
COVERAGE = 0.8
Z = NormalDist().inv_cdf(0.5 + COVERAGE / 2)
PER_DOUBLING = {
    "gpus": 0.06,  # each doubling of GPUs past the fitted: the rate collapses at many nodes after none at few
    "per_gpu_batch": 0.10,  # each halving of the per-GPU batch past the fitted: a step's fixed cost dominates
    "global_batch": 0.06,  # each doubling of the global batch: samples to target off the fitted line
    "global_batch_rcp": 0.03,  # ... where the benchmark's RCP table covers the batch (its own mean is used)
}


def doublings_past(value: float, values) -> float:
    """How many doublings `value` lies outside the range of `values` (0 inside it)."""
    values = [v for v in values if v and v > 0]
    if not values or not value or value <= 0:
        return 0.0
    lo, hi = min(values), max(values)
    return math.log2(value / hi) if value > hi else math.log2(lo / value) if value < lo else 0.0


def rms(values) -> float:
    values = list(values)
    return math.sqrt(sum(v * v for v in values) / len(values)) if values else 0.0


def quadrature(*sigmas: float) -> float:
    return math.sqrt(sum(s * s for s in sigmas))


def interval(value: float | None, sigma: float) -> tuple[float | None, float | None]:
    """(low, high) of a positive prediction with log-spread sigma: COVERAGE of measurements inside."""
    if value is None or not value > 0:
        return None, None
    return value * math.exp(-Z * sigma), value * math.exp(Z * sigma)
