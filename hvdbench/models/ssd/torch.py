"""SSD300 with a ResNet-34 backbone (MLPerf v0.5's single-stage detector) in PyTorch, built from
torchvision's detection classes: single-device code (Horovod is applied in frameworks/torch/dist.py).

    from hvdbench.contracts import get_spec
    model = build(get_spec("ssd").flavor("full"), num_classes=80)     # 20,0xx,xxx parameters, 8,732 boxes
    loss, stats = loss_and_stats(model, on_device(batch, device))     # detection-kind batch

The network is MLPerf's: ResNet-34 up to conv4 (layer3) with conv4_1 unstrided, so the first
feature map is 38x38 at 300 px; five extra blocks (1x1 then 3x3 convolutions with biases, no
normalisation) down to 19, 10, 5, 3 and 1; a 3x3 classification and regression head on each of
the six maps with [4, 6, 6, 6, 4, 4] default boxes (8,732), MLPerf's box scales (21..315 px of 300)
and steps. torchvision's `SSD` adds the rest as the reference does it: matching at IoU 0.5, box
coding with weights (10, 10, 5, 5), smooth-L1 plus cross-entropy with 3:1 hard negative mining,
and per-class NMS at evaluation. No weight is downloaded (the reference starts from an
ImageNet-trained ResNet-34; hvdbench trains from scratch).

What the three detection models share (the image normalisation `on_device`, the targets and
evaluation stats, `NarrowResNet`) is hvdbench/families/detection/torch.py.
"""

from __future__ import annotations

from collections import OrderedDict

import torch
from torch import nn

from hvdbench.frameworks.torch import vision
from hvdbench.frameworks.torch.recipe import flush_denormals

vision.ensure_torchvision()  # before torchvision: its native ops cannot load beside a CPU torch

from torchvision.models.detection.anchor_utils import DefaultBoxGenerator  # noqa: E402
from torchvision.models.detection.ssd import SSD, SSDHead  # noqa: E402

# on_device: the trainer's preprocessing for this model (the family's normalisation).
from hvdbench.families.detection.torch import (  # noqa: E402
    NarrowResNet,
    detection_loss_and_stats,
    on_device,
)


class SSDBackbone(nn.Module):
    """ResNet to conv4 (the last stage unstrided) and the extra blocks; returns every map the heads
    read, first the backbone's, then each extra block's."""

    def __init__(self, cfg):
        super().__init__()
        self.body = NarrowResNet(cfg.widths, cfg.blocks, cfg.strides, stem_kernel=cfg.stem_kernel,
                                 stem_pool=cfg.stem_pool)
        channels = self.body.out_channels
        self.extra = nn.ModuleList()
        for middle, out, stride, padding in cfg.extra_blocks:
            self.extra.append(nn.Sequential(
                nn.Conv2d(channels, middle, 1), nn.ReLU(inplace=True),
                nn.Conv2d(middle, out, 3, stride=stride, padding=padding), nn.ReLU(inplace=True)))
            channels = out
        for block in self.extra:  # the reference's initialisation of the extra layers
            for p in block.parameters():
                if p.dim() > 1:
                    nn.init.xavier_uniform_(p)
        self.out_channels = [self.body.out_channels, *(e[2].out_channels for e in self.extra)]

    def forward(self, x):
        x = self.body(x)
        maps = OrderedDict([("0", x)])
        for k, block in enumerate(self.extra):
            x = block(x)
            maps[str(k + 1)] = x
        return maps


def build(cfg, num_classes: int | None = None, image_size: int | None = None, **_data_info) -> SSD:
    """torchvision's SSD over the flavor's backbone; `num_classes` object classes (+1 background).
    The transform resizes any canvas to the flavor's size (300 for SSD300), as the reference does."""
    flush_denormals()
    classes = (num_classes or cfg.num_classes) + 1
    backbone = SSDBackbone(cfg)
    anchors = DefaultBoxGenerator([list(a) for a in cfg.aspect_ratios], scales=list(cfg.scales),
                                  steps=list(cfg.steps) if cfg.steps else None)
    head = SSDHead(backbone.out_channels, anchors.num_anchors_per_location(), classes)
    return SSD(backbone, anchors, (cfg.image_size, cfg.image_size), classes,
               image_mean=[0.0, 0.0, 0.0], image_std=[1.0, 1.0, 1.0], head=head,
               score_thresh=cfg.score_thresh, nms_thresh=cfg.nms_thresh,
               detections_per_img=cfg.detections_per_img, topk_candidates=cfg.topk_candidates)


def loss_and_stats(model: SSD, batch: dict):
    return detection_loss_and_stats(model, batch, background=True)


def num_default_boxes(model: SSD, image_size: int) -> int:
    """How many default boxes the model places on an image_size canvas (8,732 for SSD300)."""
    with torch.no_grad():
        maps = model.backbone(torch.zeros(1, 3, image_size, image_size))
    return sum(m.shape[-1] * m.shape[-2] * k for m, k in
               zip(maps.values(), model.anchor_generator.num_anchors_per_location()))


__all__ = ["build", "loss_and_stats", "on_device", "num_default_boxes"]
