"""The learning-rate schedule every model shares: the peak scaled with the global batch, linear
warm-up, polynomial decay (MLPerf's ResNet and BERT references both have this shape).

    peak = scaled_lr(cfg, global_batch=1024)     # cfg.lr for cfg.lr_base_batch, scaled by lr_scaling
    lr = lr_at(step, peak, warmup_steps=100, total_steps=5000, end_lr=1e-4, power=2.0)
"""

from __future__ import annotations

import math


def scaled_lr(cfg, global_batch: int) -> float:
    ratio = global_batch / cfg.lr_base_batch
    factor = {"linear": ratio, "sqrt": math.sqrt(ratio), "none": 1.0}[cfg.lr_scaling]
    return cfg.lr * factor


def lr_at(step: int, peak: float, warmup_steps: int, total_steps: int, end_lr: float, power: float) -> float:
    """Linear warm-up to `peak` over `warmup_steps`, then polynomial decay to `end_lr` at the last step."""
    if step < warmup_steps:
        return peak * (step + 1) / warmup_steps
    if total_steps <= warmup_steps:
        return peak
    done = min(1.0, (step - warmup_steps) / (total_steps - warmup_steps))
    return end_lr + (peak - end_lr) * (1.0 - done) ** power
