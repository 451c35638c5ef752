"""The `images` dataset kind: labelled RGB images, uint8 NHWC, square, one class per image.

Written by `hvdbench prepare images` (an ImageNet-style folder tree), `prepare digits` (the built-in
real digits) and `prepare synthetic --like images`; normalised on the device by the model (torch.py,
tf.py), so a batch crosses to the device at a quarter of float32's bytes.
"""

from __future__ import annotations

import numpy as np

from hvdbench.contracts import DatasetKind
from hvdbench.data.manifest import field_spec

# ImageNet's channel mean and deviation on the 0-255 scale (what every ResNet reference uses).
MEAN = (0.485 * 255, 0.456 * 255, 0.406 * 255)
STD = (0.229 * 255, 0.224 * 255, 0.225 * 255)


class Images(DatasetKind):
    name = "images"
    info_keys = ("num_classes", "image_size")
    # Image shards follow the source's order (class folders), so readers shuffle single samples.
    shuffled_when_written = False
    samples_per_shard = 1024
    synthetic_defaults = {"num_classes": 1000, "image_size": 224}  # ImageNet's
    synthetic_flags = {"size": "image_size", "num-classes": "num_classes"}  # `--size 224`

    def fields(self, info: dict) -> dict[str, dict]:
        size = info["image_size"]
        return {"images": field_spec((size, size, 3), "uint8"), "labels": field_spec((), "int64")}

    def limits(self, manifest: dict) -> dict[str, tuple[int, int]]:
        return {"labels": (0, manifest["num_classes"] - 1)}

    def synthetic(self, n: int, info: dict, rng: np.random.Generator) -> dict[str, np.ndarray]:
        size = info["image_size"]
        return {"images": rng.integers(0, 256, (n, size, size, 3), dtype=np.uint8),
                "labels": rng.integers(0, info["num_classes"], n, dtype=np.int64)}

    def synthetic_files(self, out, info: dict) -> dict:
        return {"class_names": [str(c) for c in range(info["num_classes"])]}

    def host_decode(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """uint8 (B,H,W,3) -> float32 (B,3,H,W), (x - mean) / std per channel: the training tensor."""
        images = batch["images"]
        b, h, w, c = images.shape
        x = np.empty((b, c, h, w), np.float32)
        np.copyto(x, images.transpose(0, 3, 1, 2), casting="unsafe")  # one strided copy into NCHW
        x -= np.float32(MEAN).reshape(1, 3, 1, 1)
        x /= np.float32(STD).reshape(1, 3, 1, 1)
        return {**batch, "images": x}


IMAGES = Images()
