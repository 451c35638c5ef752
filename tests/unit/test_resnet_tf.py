"""ResNet-50 v1.5 in TensorFlow 2 / Keras 3: the same network as the PyTorch one (parameter
counts, stride placement) and the model interface the TF worker relies on."""

import keras
import numpy as np
import tensorflow as tf

from hvdbench.contracts import get_spec  # noqa: E402
from hvdbench.families.images.data import IMAGES  # noqa: E402
from hvdbench.models.resnet50 import tf as resnet  # noqa: E402

SPEC = get_spec("resnet50")


def trainable(model):
    return sum(int(np.prod(v.shape)) for v in model.trainable_variables)


def test_full_flavor_has_the_same_25_6m_parameters_as_pytorch():
    model = resnet.build(SPEC.flavor("full"))
    assert trainable(model) == 25_557_032
    assert model.output_shape == (None, 1000)
    convs = [layer for layer in model.layers if isinstance(layer, keras.layers.Conv2D)]
    assert len(convs) == 53


def test_v1_5_puts_the_stride_on_the_3x3_convolution():
    model = resnet.build(SPEC.flavor("full"))
    assert model.get_layer("s2b1_a_conv").strides == (1, 1)
    assert model.get_layer("s2b1_b_conv").strides == (2, 2)
    assert model.get_layer("s2b1_b_conv").kernel_size == (3, 3)


def test_debug_flavor_matches_the_pytorch_debug_size():
    assert trainable(resnet.build(SPEC.flavor("debug"))) == 130_002
    smaller_head = resnet.build(SPEC.flavor("debug"), num_classes=3, image_size=32)
    assert trainable(smaller_head) == 130_002 - 7 * 257  # 7 fewer outputs of a 256-wide fc


def test_debug_flavor_learns_one_batch():
    cfg = SPEC.flavor("debug")
    model = resnet.build(cfg)
    batch = IMAGES.synthetic(8, SPEC.synthetic_info(cfg), np.random.default_rng(0))
    assert batch["images"].dtype == np.uint8 and batch["images"].shape == (8, 16, 16, 3)
    x = resnet.on_device({k: tf.convert_to_tensor(v) for k, v in batch.items()})
    assert x["images"].dtype == tf.float32 and abs(float(tf.reduce_mean(x["images"]))) < 0.5
    opt = keras.optimizers.SGD(0.1, momentum=0.9)
    losses = []
    for _ in range(6):  # the loss halves by the 3rd step (2.2-2.6 to 0.37-0.46) and is ~0.05 of it by the 6th
        with tf.GradientTape() as tape:
            loss, stats = resnet.loss_and_stats(model, x, training=True)
        opt.apply(tape.gradient(loss, model.trainable_variables), model.trainable_variables)
        losses.append(float(loss))
    assert losses[-1] < losses[0] / 2
    assert int(stats["total"]) == 8
