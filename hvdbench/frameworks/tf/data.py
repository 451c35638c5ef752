"""Dataset batches (dicts of numpy arrays) to TensorFlow tensors on the training device.

Images arrive as uint8 NHWC and are normalised on the device to float NHWC (TensorFlow's CPU and
GPU convolutions both take NHWC) with ImageNet's channel mean and deviation; every other field
keeps its dtype.
"""

from __future__ import annotations

import tensorflow as tf

MEAN = (0.485 * 255, 0.456 * 255, 0.406 * 255)
STD = (0.229 * 255, 0.224 * 255, 0.225 * 255)


@tf.function(reduce_retracing=True)
def _normalise(images):
    return (tf.cast(images, tf.float32) - MEAN) / STD


class DeviceBatches:
    def __call__(self, batch: dict) -> dict[str, tf.Tensor]:
        out = {name: tf.convert_to_tensor(value) for name, value in batch.items()}
        if "images" in out:
            out["images"] = _normalise(out["images"])
        return out
