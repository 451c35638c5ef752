"""ResNet-50 v1.5 in PyTorch: single-device code (Horovod is applied in frameworks/torch/dist.py).

    from hvdbench.contracts import get_spec
    cfg = get_spec("resnet50").flavor("full")
    model = build(cfg, num_classes=1000)      # 25,557,032 parameters
    batch = on_device({"images": uint8_nhwc, "labels": y}, device)   # normalised float NCHW
    loss, stats = loss_and_stats(model, batch)
"""

from __future__ import annotations

from functools import lru_cache

import torch
import torch.nn.functional as F
from torch import nn

from hvdbench.families.images.data import MEAN, STD


def _conv_bn(cin: int, cout: int, kernel: int, stride: int = 1) -> list[nn.Module]:
    # No conv bias: the BatchNorm that follows has its own shift.
    return [nn.Conv2d(cin, cout, kernel, stride=stride, padding=kernel // 2, bias=False),
            nn.BatchNorm2d(cout)]


class Bottleneck(nn.Module):
    """1x1 reduce -> 3x3 (carries the stride: v1.5) -> 1x1 expand, plus the shortcut."""

    def __init__(self, cin: int, width: int, cout: int, stride: int, zero_init_last_bn: bool):
        super().__init__()
        self.body = nn.Sequential(*_conv_bn(cin, width, 1), nn.ReLU(inplace=True),
                                  *_conv_bn(width, width, 3, stride), nn.ReLU(inplace=True),
                                  *_conv_bn(width, cout, 1))
        if zero_init_last_bn:
            nn.init.zeros_(self.body[-1].weight)
        self.shortcut = (nn.Sequential(*_conv_bn(cin, cout, 1, stride))
                         if stride != 1 or cin != cout else nn.Identity())

    def forward(self, x):
        return F.relu(self.body(x) + self.shortcut(x), inplace=True)


class ResNet(nn.Module):
    def __init__(self, cfg, num_classes: int):
        super().__init__()
        if cfg.stem == "imagenet":
            stem = [*_conv_bn(3, cfg.width, 7, 2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1)]
        elif cfg.stem == "small":
            stem = [*_conv_bn(3, cfg.width, 3, 1), nn.ReLU(inplace=True)]
        else:
            raise ValueError(f"unknown stem {cfg.stem!r}")
        blocks, cin = [], cfg.width
        for stage, depth in enumerate(cfg.layers):
            width = cfg.width * 2**stage
            for i in range(depth):
                stride = 2 if stage > 0 and i == 0 else 1
                blocks.append(Bottleneck(cin, width, width * cfg.expansion, stride,
                                         cfg.zero_init_last_bn))
                cin = width * cfg.expansion
        self.features = nn.Sequential(*stem, *blocks)
        self.fc = nn.Linear(cin, num_classes)
        self.label_smoothing = cfg.label_smoothing
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x):
        x = self.features(x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def build(cfg, num_classes: int | None = None, **_data_info) -> ResNet:
    return ResNet(cfg, num_classes or cfg.num_classes)


@lru_cache(maxsize=None)
def _mean_std(device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    return (torch.tensor(MEAN, device=device).view(1, 3, 1, 1),
            torch.tensor(STD, device=device).view(1, 3, 1, 1))


def on_device(batch: dict[str, torch.Tensor], device: torch.device) -> dict[str, torch.Tensor]:
    """uint8 NHWC images (a quarter of float32's bytes to copy) -> normalised float NCHW. On a GPU
    they stay channels-last in memory: cuDNN then runs its NHWC kernels and every activation stays
    NHWC (the parameters keep the default layout: Horovod refuses non-contiguous tensors)."""
    mean, std = _mean_std(device)
    x = batch["images"].permute(0, 3, 1, 2).float().sub_(mean).div_(std)
    # NHWC in memory is what tensor cores want; NCHW-contiguous is what the CPU kernels want.
    x = x.contiguous(memory_format=torch.channels_last if device.type == "cuda" else torch.contiguous_format)
    return {**batch, "images": x}


def loss_and_stats(model: ResNet, batch: dict[str, torch.Tensor]):
    logits = model(batch["images"])
    labels = batch["labels"]
    loss = F.cross_entropy(logits.float(), labels, label_smoothing=model.label_smoothing)
    correct = (logits.argmax(dim=1) == labels).sum()
    # The count is known on the host: a tensor made from it would be copied to the GPU every step,
    # and that copy waits for the queued forward pass (seen as ~5 % of a ResNet-50 step on an H100).
    return loss, {"correct": correct, "total": labels.numel()}
