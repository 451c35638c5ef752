"""The `toy_regression` dataset kind: features x (float32) and a target y = 2 tanh(w.x / sqrt(n))
plus noise of deviation 0.1, with w fixed (the same function in every shard and split)."""

import numpy as np

from hvdbench.contracts import DatasetKind
from hvdbench.data.manifest import field_spec


class Regression(DatasetKind):
    name = "toy_regression"
    info_keys = ("features",)
    shuffled_when_written = True  # samples are independent draws
    samples_per_shard = 1024
    synthetic_defaults = {"features": 8}

    def fields(self, info):
        return {"x": field_spec((info["features"],), "float32"), "y": field_spec((), "float32")}

    def limits(self, manifest):
        return {"y": (-3.0, 3.0)}  # |2 tanh| < 2, plus at most 10 deviations of noise

    def synthetic(self, n, info, rng):
        features = int(info["features"])
        w = np.random.default_rng(1234).normal(size=features)  # fixed: the function to learn
        x = rng.normal(size=(n, features)).astype(np.float32)
        noise = np.clip(rng.normal(scale=0.1, size=n), -1.0, 1.0)
        y = 2 * np.tanh(x @ w / np.sqrt(features)) + noise
        return {"x": x, "y": y.astype(np.float32)}


REGRESSION = Regression()
