"""The `movielens` dataset kind: implicit-feedback (user, item) pairs for NCF, in rows of K pairs.

    hvdbench prepare movielens --src builtin:ml-100k --out data/ml-100k       # 99 eval negatives
    hvdbench prepare movielens --src ml-20m/ratings.csv --out data/ml-20m     # 999, MLPerf's
    hvdbench prepare synthetic --like movielens --samples 20000 --out data/synth-ml

Every row holds K = 1 + eval_negatives pairs in two int32 fields, `users` (K,) and `items` (K,):

- a **val** row is one user (`users` is that user K times): `items[0]` is the user's held-out
  latest item, `items[1:]` the user's `eval_negatives` sampled items the user never rated. HR@10
  needs all of one user's candidates in one batch on one rank, hence one user per row.
- a **train** row is K training positives of any users (shuffled at prepare): hvdbench's shards
  have one field layout for both splits, so a training row packs as many pairs as a val row has
  candidates. The negatives for training (4 per positive) are drawn on the device every step
  (torch.py), not stored.

So a "sample" (batch_per_gpu, throughput) is one row: K positives in training (5K examples with
their negatives), one user in evaluation, as a sample of `bert_packed` is a pack of sequences.
"""

from __future__ import annotations

import numpy as np

from hvdbench.contracts import DatasetKind
from hvdbench.data.manifest import field_spec

# ml-20m as MLPerf v0.5 uses it (users with >= 20 ratings, which is all of them; every item rated
# at least once), with MLPerf's 999 evaluation negatives per user.
ML20M = {"num_users": 138_493, "num_items": 26_744, "eval_negatives": 999}

# The shards' id dtype. prepare.py refuses a source id it cannot hold (and so ids beyond 2**53, where
# the float64 reader would merge neighbours): NCF's embedding tables are indexed by these ids.
ID_DTYPE = "int32"


def pairs_per_row(info: dict) -> int:
    """K: one held-out positive plus its evaluation negatives (and so K training pairs per row)."""
    return 1 + int(info["eval_negatives"])


class MovieLens(DatasetKind):
    name = "movielens"
    info_keys = ("num_users", "num_items", "eval_negatives")
    # Training rows are packs fixed at prepare: readers shuffle them one by one (rows are 0.8-8 KB,
    # and a whole run of ~1 MB would cover most of a small dataset's rows in one fixed order).
    shuffled_when_written = False
    samples_per_shard = 1024
    synthetic_defaults = dict(ML20M)

    def fields(self, info: dict) -> dict[str, dict]:
        k = pairs_per_row(info)
        return {"users": field_spec((k,), ID_DTYPE), "items": field_spec((k,), ID_DTYPE)}

    def limits(self, manifest: dict) -> dict[str, tuple[int, int]]:
        return {"users": (0, manifest["num_users"] - 1), "items": (0, manifest["num_items"] - 1)}

    def synthetic(self, n: int, info: dict, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Rows of K random (user, item) pairs in range: what a training row looks like."""
        k = pairs_per_row(info)
        return {"users": rng.integers(0, int(info["num_users"]), (n, k), dtype=np.int32),
                "items": rng.integers(0, int(info["num_items"]), (n, k), dtype=np.int32)}


MOVIELENS = MovieLens()
