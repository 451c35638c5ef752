"""SSD300 with a ResNet-34 backbone (MLPerf v0.5's single-stage detector) in PyTorch, built from
torchvision's detection classes: single-device code (Horovod is applied in frameworks/torch/dist.py).

    from hvdbench.models import get_spec
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

This module also holds what the three detection models share (RetinaNet's and Mask R-CNN's
torch.py import it): the image normalisation (`on_device`), the targets torchvision's models take
(`targets`), a narrow ResNet for the debug flavors (`NarrowResNet`) and the evaluation stats the
`CocoMap` metric reads (`evaluation_stats`).
"""

from __future__ import annotations

from collections import OrderedDict

import torch
from torch import nn

from hvdbench.frameworks.torch import vision

vision.ensure_torchvision()  # before torchvision: its native ops cannot load beside a CPU torch

from torchvision.models.detection.anchor_utils import DefaultBoxGenerator  # noqa: E402
from torchvision.models.detection.ssd import SSD, SSDHead  # noqa: E402
from torchvision.models.resnet import BasicBlock  # noqa: E402

from hvdbench.models.ssd.data import decode_masks  # noqa: E402
from hvdbench.models.ssd.metric import detections_record  # noqa: E402

# ImageNet's per-channel statistics in uint8 units: the references normalise with them.
MEAN = (0.485 * 255, 0.456 * 255, 0.406 * 255)
STD = (0.229 * 255, 0.224 * 255, 0.225 * 255)


# --- shared by the detection models ----------------------------------------------------------------

def on_device(batch: dict, device) -> dict:
    """uint8 NHWC canvases -> normalised float NCHW (the models' transforms are told mean 0, std 1)."""
    images = batch["images"].permute(0, 3, 1, 2).float()
    mean = torch.tensor(MEAN, device=images.device).view(1, 3, 1, 1)
    std = torch.tensor(STD, device=images.device).view(1, 3, 1, 1)
    return {**batch, "images": (images - mean) / std}


def targets(batch: dict, background: bool, masks: bool = False) -> list[dict]:
    """torchvision's per-image targets from a batch: the real, non-crowd objects with a positive
    area (a COCO box can shrink to nothing on a small canvas), labels + 1 where the model reserves
    class 0 for the background (`background`), and decoded instance masks when asked."""
    out = []
    num_objects = batch["num_objects"].tolist()
    size = batch["images"].shape[-1]
    for i, n in enumerate(num_objects):
        boxes = batch["boxes"][i, :n].float()
        keep = ((batch["crowd"][i, :n] == 0) & (boxes[:, 2] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 1]))
        target = {"boxes": boxes[keep], "labels": batch["labels"][i, :n][keep].long() + int(background)}
        if masks:
            rows = batch["masks"][i, :n][keep].cpu().numpy()
            target["masks"] = torch.from_numpy(decode_masks(rows, size)).to(boxes.device)
        out.append(target)
    return out


def evaluation_stats(batch: dict, detections: list[dict], background: bool,
                     mask_floor: float | None = None) -> dict:
    """The `CocoMap` stats of one evaluated batch: each image's ground truth (crowd regions kept:
    the evaluator ignores detections on them) and detections in canvas pixels, as host objects;
    soft masks are thresholded at 0.5 (then RLE-encoded by the metric's record)."""
    size = int(batch["images"].shape[-1])
    num_objects = batch["num_objects"].tolist()
    images = []
    for i, (n, found) in enumerate(zip(num_objects, detections)):
        truth = {"boxes": batch["boxes"][i, :n].float().cpu().numpy(),
                 "labels": batch["labels"][i, :n].long().cpu().numpy(),
                 "crowd": batch["crowd"][i, :n].cpu().numpy().astype(bool),
                 "masks": None}
        masks = None
        if "masks" in found:
            rows = batch["masks"][i, :n].cpu().numpy()
            truth["masks"] = [row.tobytes().rstrip(b"\0") for row in rows]
            masks = (found["masks"][:, 0] > 0.5).to(torch.uint8).cpu().numpy()
        images.append(detections_record(int(batch["image_id"][i]), size, truth,
                                        found["boxes"].float().cpu().numpy(),
                                        found["scores"].float().cpu().numpy(),
                                        found["labels"].cpu().numpy() - int(background), masks))
    return {"images": images, "mask_floor": mask_floor}


def detection_loss_and_stats(model, batch: dict, background: bool, masks: bool = False,
                             mask_floor: float | None = None):
    """Training: the sum of the model's losses; evaluation: (0, CocoMap stats)."""
    images = list(batch["images"].unbind(0))
    if model.training:
        losses = model(images, targets(batch, background, masks))
        loss = sum(losses.values())
        return loss, {"loss_sum": loss.detach() * len(images), "count": len(images)}
    detections = model(images)
    return batch["images"].new_zeros(()), evaluation_stats(batch, detections, background, mask_floor)


def cpu_setup() -> None:
    """Flush denormals on CPUs: tiny gradients of the heads otherwise slow the math several-fold."""
    if not torch.cuda.is_available():
        torch.set_flush_denormal(True)


class NarrowResNet(nn.Module):
    """A ResNet of BasicBlocks with chosen widths, for the debug flavors: a stem (3x3 or 7x7 conv,
    stride 2, optional 3x3 max pool) and one stage per width; `strides` per stage. Its children run
    in order, so torchvision's IntermediateLayerGetter (FPN backbones) can take its stages."""

    def __init__(self, widths, blocks, strides, stem_kernel: int = 3, stem_pool: bool = False,
                 norm_layer=nn.BatchNorm2d):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, widths[0], stem_kernel, stride=2, padding=stem_kernel // 2, bias=False),
            norm_layer(widths[0]), nn.ReLU(inplace=True),
            *([nn.MaxPool2d(3, stride=2, padding=1)] if stem_pool else []))
        channels = widths[0]
        for k, (width, count, stride) in enumerate(zip(widths, blocks, strides)):
            self.add_module(f"layer{k + 1}", _stage(channels, width, count, stride, norm_layer))
            channels = width
        self.out_channels = channels

    def forward(self, x):
        for child in self.children():
            x = child(x)
        return x


def _stage(channels: int, width: int, count: int, stride: int, norm_layer) -> nn.Sequential:
    """`count` BasicBlocks as torchvision's ResNet makes them (a 1x1 projection where the shape changes)."""
    downsample = None
    if stride != 1 or channels != width:
        downsample = nn.Sequential(nn.Conv2d(channels, width, 1, stride=stride, bias=False), norm_layer(width))
    blocks = [BasicBlock(channels, width, stride, downsample, norm_layer=norm_layer)]
    blocks += [BasicBlock(width, width, norm_layer=norm_layer) for _ in range(count - 1)]
    return nn.Sequential(*blocks)


# --- SSD ---------------------------------------------------------------------------------------

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
    cpu_setup()
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


__all__ = ["build", "loss_and_stats", "on_device", "targets", "evaluation_stats", "NarrowResNet",
           "detection_loss_and_stats", "num_default_boxes"]
