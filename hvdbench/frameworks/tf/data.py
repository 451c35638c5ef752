"""Dataset batches (dicts of numpy arrays) to TensorFlow tensors, each field keeping its dtype.

The model's own preprocessing (`on_device` in its tf.py, e.g. image normalisation) is traced into
the trainer's step and evaluation graphs, so it runs on the device.
"""

from __future__ import annotations

import tensorflow as tf


class DeviceBatches:
    def __call__(self, batch: dict) -> dict[str, tf.Tensor]:
        return {name: tf.convert_to_tensor(value) for name, value in batch.items()}
