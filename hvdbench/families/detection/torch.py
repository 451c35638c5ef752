"""What the detection models' PyTorch code shares (hvdbench/models/ssd/, retinanet/ and maskrcnn/
torch.py import it): single-device code (Horovod is applied in frameworks/torch/dist.py).

    from hvdbench.families.detection.torch import detection_loss_and_stats, on_device
    batch = on_device(batch, device)                      # uint8 NHWC canvases -> normalised NCHW
    loss, stats = detection_loss_and_stats(model, batch, background=True)   # training: the losses' sum

`on_device` normalises the canvases as the references do; `targets` turns a detection-kind batch
into the per-image targets torchvision's detection models take; `evaluation_stats` turns their
detections into what the `CocoMap` metric (metric.py) reads; `NarrowResNet` is the narrow ResNet
of the debug flavors (and SSD's backbone).
"""

from __future__ import annotations

import torch
from torch import nn

from hvdbench.frameworks.torch import vision

vision.ensure_torchvision()  # before torchvision: its native ops cannot load beside a CPU torch

from torchvision.models.resnet import BasicBlock  # noqa: E402

from hvdbench.families.detection.data import decode_masks  # noqa: E402
from hvdbench.families.detection.metric import detections_record  # noqa: E402

# ImageNet's per-channel statistics in uint8 units: the references normalise with them.
MEAN = (0.485 * 255, 0.456 * 255, 0.406 * 255)
STD = (0.229 * 255, 0.224 * 255, 0.225 * 255)


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


__all__ = ["MEAN", "STD", "on_device", "targets", "evaluation_stats", "detection_loss_and_stats",
           "NarrowResNet"]
