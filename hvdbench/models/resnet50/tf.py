"""ResNet-50 v1.5 in TensorFlow 2 with Keras 3 layers: single-device code, NHWC.

    cfg = get_spec("resnet50").flavor("full")
    model = build(cfg, num_classes=1000)     # 25,557,032 trainable parameters, like the PyTorch one
    batch = on_device({"images": uint8_nhwc, "labels": y})     # normalised float NHWC
    loss, stats = loss_and_stats(model, batch, training=True)

Layer for layer the same network as `torch.py` beside this file (bias-free convolutions
followed by BatchNorm, stride on the 3x3 convolution, zero-initialised last BN of each block).
BatchNorm momentum 0.9 here is PyTorch's 0.1 (Keras counts the other way round).
"""

from __future__ import annotations

import keras
import tensorflow as tf
from keras import layers

from hvdbench.families.images.data import MEAN, STD


def _conv_bn(x, filters: int, kernel: int, stride: int, name: str, zero_gamma: bool = False):
    x = layers.Conv2D(filters, kernel, strides=stride, padding="same", use_bias=False,
                      kernel_initializer=keras.initializers.VarianceScaling(2.0, "fan_out", "truncated_normal"),
                      name=f"{name}_conv")(x)
    return layers.BatchNormalization(momentum=0.9, epsilon=1e-5, name=f"{name}_bn",
                                     gamma_initializer="zeros" if zero_gamma else "ones")(x)


def _bottleneck(x, width: int, cout: int, stride: int, name: str, zero_init_last_bn: bool):
    shortcut = x
    if stride != 1 or x.shape[-1] != cout:
        shortcut = _conv_bn(x, cout, 1, stride, f"{name}_down")
    y = layers.ReLU()(_conv_bn(x, width, 1, 1, f"{name}_a"))
    y = layers.ReLU()(_conv_bn(y, width, 3, stride, f"{name}_b"))  # v1.5: the stride is here
    y = _conv_bn(y, cout, 1, 1, f"{name}_c", zero_gamma=zero_init_last_bn)
    return layers.ReLU()(layers.Add()([y, shortcut]))


def build(cfg, num_classes: int | None = None, image_size: int | None = None, **_data_info) -> keras.Model:
    size = image_size or cfg.image_size
    inputs = keras.Input((size, size, 3), name="images")
    if cfg.stem == "imagenet":
        x = layers.ReLU()(_conv_bn(inputs, cfg.width, 7, 2, "stem"))
        x = layers.MaxPooling2D(3, 2, padding="same")(x)
    elif cfg.stem == "small":
        x = layers.ReLU()(_conv_bn(inputs, cfg.width, 3, 1, "stem"))
    else:
        raise ValueError(f"unknown stem {cfg.stem!r}")
    for stage, depth in enumerate(cfg.layers):
        width = cfg.width * 2**stage
        for i in range(depth):
            stride = 2 if stage > 0 and i == 0 else 1
            x = _bottleneck(x, width, width * cfg.expansion, stride, f"s{stage + 1}b{i + 1}",
                            cfg.zero_init_last_bn)
    x = layers.GlobalAveragePooling2D()(x)
    # Logits in float32 even under a mixed-precision policy: the softmax needs the range.
    logits = layers.Dense(num_classes or cfg.num_classes, dtype="float32", name="fc")(x)
    model = keras.Model(inputs, logits, name="resnet")
    model.label_smoothing = cfg.label_smoothing
    return model


def on_device(batch: dict) -> dict:
    """uint8 NHWC images -> normalised float NHWC (TensorFlow's CPU and GPU convolutions both take
    NHWC); traced into the step's graph."""
    return {**batch, "images": (tf.cast(batch["images"], tf.float32) - MEAN) / STD}


def loss_and_stats(model: keras.Model, batch: dict, training: bool):
    logits = model(batch["images"], training=training)
    labels = batch["labels"]
    depth = tf.shape(logits)[-1]
    loss = tf.reduce_mean(keras.losses.categorical_crossentropy(
        tf.one_hot(labels, depth), logits, from_logits=True, label_smoothing=model.label_smoothing))
    correct = tf.reduce_sum(tf.cast(tf.equal(tf.argmax(logits, axis=-1), tf.cast(labels, tf.int64)), tf.int64))
    return loss, {"correct": correct, "total": tf.size(labels, out_type=tf.int64)}
