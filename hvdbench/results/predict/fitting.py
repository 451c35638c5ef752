"""The least-squares fit both predictors share: the throughput predictor's link latency and busbw
(throughput.py) and the time-to-train predictor's training rate (time_to_train.py).

    a, b = least_squares([(1.0, n) for n in sizes], times)    # times ~ a + b n, a and b >= 0
"""

from __future__ import annotations


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
