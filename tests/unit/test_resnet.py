"""ResNet-50 v1.5 in PyTorch: the real network's size, v1.5's stride placement, the debug flavor,
and the model interface (build, on_device, loss_and_stats) the worker relies on, on batches of
the `images` kind."""

import numpy as np  # noqa: E402
import pytest
import torch
from torch import nn  # noqa: E402

from hvdbench.contracts import get_spec  # noqa: E402
from hvdbench.families.images.data import IMAGES  # noqa: E402
from hvdbench.models.resnet50 import torch as resnet  # noqa: E402

SPEC = get_spec("resnet50")
# tests/conftest.py: small tensors on a shared machine (the batch's 15 steps: 11.8 CPU-s on two threads, 0.3 on one)
pytestmark = pytest.mark.usefixtures("torch_one_thread")


def n_params(model):
    return sum(p.numel() for p in model.parameters())


def test_full_flavor_is_resnet50_with_25_6m_parameters():
    model = resnet.build(SPEC.flavor("full"))
    assert n_params(model) == 25_557_032 == SPEC.parameters["full"]
    convs = [m for m in model.modules() if isinstance(m, nn.Conv2d)]
    assert len(convs) == 53  # 1 stem + 16 blocks x 3 + 4 shortcut projections
    assert len([m for m in model.modules() if isinstance(m, resnet.Bottleneck)]) == 16


def test_v1_5_puts_the_stride_on_the_3x3_convolution():
    model = resnet.build(SPEC.flavor("full"))
    first_of_stage2 = model.features[4 + 3]  # stem (conv, bn, relu, pool) then stage 1's 3 blocks
    conv1x1, conv3x3 = first_of_stage2.body[0], first_of_stage2.body[3]
    assert (conv1x1.kernel_size, conv1x1.stride) == ((1, 1), (1, 1))
    assert (conv3x3.kernel_size, conv3x3.stride) == ((3, 3), (2, 2))


def test_num_classes_from_the_data_overrides_the_flavor():
    model = resnet.build(SPEC.flavor("full"), num_classes=10)
    assert model.fc.out_features == 10


def test_debug_flavor_is_small_and_trains_on_small_images():
    cfg = SPEC.flavor("debug")
    model = resnet.build(cfg)
    assert n_params(model) < 200_000
    raw = IMAGES.synthetic(8, SPEC.synthetic_info(cfg), np.random.default_rng(0))
    assert raw["images"].dtype == np.uint8 and raw["images"].shape == (8, 16, 16, 3)  # NHWC
    assert raw["labels"].dtype == np.int64 and int(raw["labels"].max()) < 10
    batch = resnet.on_device({k: torch.from_numpy(v) for k, v in raw.items()}, torch.device("cpu"))
    assert batch["images"].dtype == torch.float32 and batch["images"].shape == (8, 3, 16, 16)  # NCHW
    assert abs(float(batch["images"].mean())) < 0.5  # normalised around 0
    x = batch["images"]
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses = []
    for _ in range(15):  # overfit one batch: the loss must fall
        loss, stats = resnet.loss_and_stats(model, {"images": x, "labels": batch["labels"]})
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    assert losses[-1] < losses[0] / 2
    assert int(stats["total"]) == 8 and 0 <= int(stats["correct"]) <= 8


def test_stats_count_correct_predictions():
    model = resnet.build(SPEC.flavor("debug")).eval()
    x = torch.randn(4, 3, 16, 16)
    with torch.no_grad():
        predicted = model(x).argmax(1)
        _, stats = resnet.loss_and_stats(model, {"images": x, "labels": predicted})
        _, wrong = resnet.loss_and_stats(model, {"images": x, "labels": (predicted + 1) % 10})
    assert (int(stats["correct"]), int(stats["total"]), int(wrong["correct"])) == (4, 4, 0)
