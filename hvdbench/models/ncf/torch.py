"""NeuMF (neural collaborative filtering) in PyTorch: single-device code (Horovod is applied in
frameworks/torch/dist.py).

    from hvdbench.contracts import get_spec
    cfg = get_spec("ncf").flavor("full")
    model = build(cfg, num_users=138_493, num_items=26_744)      # 31,832,577 parameters (rank 0)
    loss, stats = loss_and_stats(model, {"users": users, "items": items})   # rows of K pairs

The network is MLPerf v0.5's `neumf.py`: a GMF branch (user and item embeddings multiplied
elementwise) beside an MLP branch (user and item embeddings concatenated, then ReLU layers), both
concatenated into one logit. Initialisation as the reference: embeddings N(0, 0.01), MLP weights
Glorot-uniform, the final layer LeCun-uniform.

Training (`model.training`): every pair of the rows is a positive; `cfg.train_negatives` (4)
negatives per positive are drawn on the device every step, uniformly over all items, paired with
the positive's user; the loss is binary cross-entropy over positives and negatives together.
MLPerf's reference draws them anew each epoch, rejecting items among the user's training positives;
a uniform draw keeps the rating matrix off the device at the cost of a false negative now and then
(the user's share of the catalogue: 0.5 % on average in ml-20m, 6 % in ML-100K).

Evaluation: every row is one user's held-out item (column 0) and its sampled negatives; a hit when
fewer than `top_k` negatives score at least as high as the positive (a tie counts against it, as
the reference's ranking lists the positive after its negatives). Stats {"hits", "users"}.
"""

from __future__ import annotations

import itertools
import math

import torch
import torch.nn.functional as F
from torch import nn



class NeuMF(nn.Module):
    def __init__(self, cfg, num_users: int, num_items: int, rank: int = 0):
        super().__init__()
        self.rank = rank  # seeds this rank's stream of negative items
        layers = tuple(cfg.mlp_layers)
        if layers[0] % 2:
            raise ValueError(f"the first MLP layer ({layers[0]}) must be even: it is the user and item "
                             f"embeddings side by side")
        self.num_items, self.train_negatives, self.top_k = num_items, cfg.train_negatives, cfg.top_k
        self.mf_user = nn.Embedding(num_users, cfg.mf_dim)
        self.mf_item = nn.Embedding(num_items, cfg.mf_dim)
        self.mlp_user = nn.Embedding(num_users, layers[0] // 2)
        self.mlp_item = nn.Embedding(num_items, layers[0] // 2)
        self.mlp = nn.ModuleList(nn.Linear(a, b) for a, b in itertools.pairwise(layers))
        self.final = nn.Linear(layers[-1] + cfg.mf_dim, 1)
        for e in (self.mf_user, self.mf_item, self.mlp_user, self.mlp_item):
            nn.init.normal_(e.weight, 0.0, cfg.init_std)
        for layer in self.mlp:
            nn.init.xavier_uniform_(layer.weight)  # Glorot uniform
        limit = math.sqrt(3.0 / self.final.in_features)  # LeCun uniform
        nn.init.uniform_(self.final.weight, -limit, limit)
        self._rng: torch.Generator | None = None

    def forward(self, users: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
        """Logits, one per (user, item) pair (1-D inputs of equal length)."""
        gmf = self.mf_user(users) * self.mf_item(items)
        x = torch.cat((self.mlp_user(users), self.mlp_item(items)), dim=-1)
        for layer in self.mlp:
            x = F.relu(layer(x))
        x = torch.cat((gmf, x), dim=-1)
        # The logit in float32 under bf16/fp16 autocast too: bf16's 8-bit mantissa would tie many
        # candidates' scores, and a tie counts against the held-out item in HR@10.
        with torch.autocast(x.device.type, enabled=False):
            return self.final(x.float()).squeeze(-1)

    def negative_items(self, n: int, device: torch.device) -> torch.Tensor:
        """n uniform random items. Each rank draws its own stream (seeded from the run's seed and
        the rank): with the global generator, which every rank seeds alike, all ranks would draw
        the same negative items every step."""
        if self._rng is None or self._rng.device != device:
            self._rng = torch.Generator(device=device)
            self._rng.manual_seed((torch.initial_seed() * 1_000_003 + self.rank) % 2**63)
        return torch.randint(self.num_items, (n,), device=device, generator=self._rng)


def build(cfg, num_users: int | None = None, num_items: int | None = None, rank: int = 0,
          **_data_info) -> NeuMF:
    """The network for a flavor (a manifest's user and item counts override the flavor's); `rank`
    is the one the trainer hands it (it seeds the rank's negative items)."""
    return NeuMF(cfg, num_users or cfg.num_users, num_items or cfg.num_items, rank)


def loss_and_stats(model: NeuMF, batch: dict[str, torch.Tensor]):
    users, items = batch["users"].long(), batch["items"].long()  # (rows, K)
    if model.training:
        pos_users, pos_items = users.reshape(-1), items.reshape(-1)
        k = model.train_negatives
        all_users = torch.cat((pos_users, pos_users.repeat(k)))
        all_items = torch.cat((pos_items, model.negative_items(k * pos_items.numel(), pos_items.device)))
        labels = torch.zeros(all_users.numel(), device=users.device)
        labels[:pos_users.numel()] = 1.0
        logits = model(all_users, all_items).float()
        loss = F.binary_cross_entropy_with_logits(logits, labels)
        return loss, {"loss_sum": loss.detach() * labels.numel(), "count": labels.numel()}
    scores = model(users.reshape(-1), items.reshape(-1)).float().view(users.shape)
    # Rank of the positive among its candidates: how many negatives score at least as high.
    above = (scores[:, 1:] >= scores[:, :1]).sum(dim=1)
    hits = (above < model.top_k).sum()
    # The row count is known on the host: no tensor to copy to the device per batch.
    return scores.new_zeros(()), {"hits": hits, "users": users.shape[0]}
