"""Validation log-perplexity: the mean next-token cross-entropy (nats per token) over every token
of the validation sequences and every rank, lower is better. MLPerf's llama31_8b (target 3.3),
gpt_oss_20b (3.34), llama31_405b (5.6) and deepseekv3_671b (3.6) log it as `eval_accuracy`.

    metric = log_perplexity()            # stats {"loss_sum", "count"} from loss_and_stats
    metric = RoutedLogPerplexity(32)     # also {"expert_tokens", "top_k"}: tokens per expert

`RoutedLogPerplexity` (gpt_oss_20b) adds the router's load over the same evaluation to the same
allreduce: the tokens each expert received (summed over layers), said in one line by rank 0 at
every evaluation. The metric's value, what the target is checked against and what MLLOG carries, is
the log-perplexity alone.
"""

from __future__ import annotations

import math

import numpy as np

from hvdbench.contracts import RatioMetric, eval_loss

NAME = "log_perplexity"
HEADER = 5  # RoutedLogPerplexity's numbers before the per-expert loads


def log_perplexity() -> RatioMetric:
    return eval_loss(NAME)


def load_summary(counts: np.ndarray, top_k: int) -> dict:
    """How evenly `counts` (tokens per expert, summed over layers) spread: each expert's share of
    the routed token slots, the largest and smallest share over the even share 1/E, and the
    coefficient of variation (0: perfectly even)."""
    counts = np.asarray(counts, np.float64)
    total = counts.sum()
    if total <= 0:
        return {"experts": len(counts), "routed": 0}
    share = counts / total
    even = 1.0 / len(counts)
    return {"experts": len(counts), "top_k": top_k, "routed": int(total),
            "max_over_even": float(share.max() / even), "min_over_even": float(share.min() / even),
            "cv": float(share.std() / share.mean()), "share": [round(float(s), 4) for s in share]}


class RoutedLogPerplexity(RatioMetric):
    """Log-perplexity, and the router's load measured over the same evaluation batches. The loads
    travel in `slots` fixed places (the most experts of any flavor), with the expert count beside
    them, so a rank that had no batch still sends a vector of the same size."""

    def __init__(self, slots: int, say=None):
        super().__init__(NAME, "loss_sum", "count", higher_is_better=False, bounds=(0.0, math.inf))
        self.slots = slots
        self.say = say  # where rank 0's line goes (default: hvdbench.output.line)
        self.last_load: dict | None = None

    def start(self) -> list:
        return [0, 0, None, 0]

    def update(self, state: list, stats: dict) -> list:
        load = stats["expert_tokens"] if state[2] is None else state[2] + stats["expert_tokens"]
        return [state[0] + stats["loss_sum"], state[1] + stats["count"], load, stats["top_k"]]

    def local(self, state: list) -> np.ndarray:
        # [loss sum, tokens, ranks with batches, their experts, their top-k, tokens per expert...]
        out = np.zeros(HEADER + self.slots, np.float64)
        out[0], out[1] = float(state[0]), float(state[1])
        if state[2] is not None:
            load = np.asarray(state[2].detach().float().cpu(), np.float64).reshape(-1)
            if len(load) > self.slots:
                raise ValueError(f"{len(load)} experts: RoutedLogPerplexity has {self.slots} slots")
            out[2:HEADER] = 1.0, len(load), float(state[3])
            out[HEADER:HEADER + len(load)] = load
        return out

    def reduce(self, local: np.ndarray, dist) -> np.ndarray:
        reduced = np.asarray(dist.allreduce_sum(local), dtype=np.float64)
        if reduced[2] > 0:
            experts, top_k = round(reduced[3] / reduced[2]), round(reduced[4] / reduced[2])
            self.last_load = load_summary(reduced[HEADER:HEADER + experts], top_k)
            if dist.rank == 0 and self.last_load.get("routed"):
                from hvdbench.output import line

                s = self.last_load
                (self.say or line)(f"[hvdbench] router load over the evaluation: {s['routed']:,} token slots "
                                   f"to {s['experts']} experts (top-{s['top_k']}), busiest {s['max_over_even']:.2f}x "
                                   f"and idlest {s['min_over_even']:.2f}x the even share, cv {s['cv']:.2f}")
        return reduced[:2]
