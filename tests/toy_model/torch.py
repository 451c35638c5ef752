"""The toy's network in PyTorch: single-device code (no horovod)."""

from torch import nn


def build(cfg, features=None, **_):
    n = int(features or cfg.features)
    return nn.Sequential(nn.Linear(n, cfg.hidden), nn.ReLU(), nn.Linear(cfg.hidden, cfg.hidden), nn.ReLU(),
                         nn.Linear(cfg.hidden, 1))


def loss_and_stats(model, batch):
    error = model(batch["x"]).squeeze(-1) - batch["y"]
    squared = error.float().pow(2)
    # The metric (eval_loss) sums loss_sum and count over batches and ranks, then divides.
    return squared.mean(), {"loss_sum": squared.sum().detach(), "count": squared.numel()}
