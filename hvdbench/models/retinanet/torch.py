"""RetinaNet (ResNeXt50-32x4d FPN, MLPerf's `ssd` benchmark since v2.0) in PyTorch, built from
torchvision's detection classes: single-device code (Horovod is applied in frameworks/torch/dist.py).

    from hvdbench.contracts import get_spec
    model = build(get_spec("retinanet").flavor("full"), num_classes=264)   # 37,060,652 parameters
    loss, stats = loss_and_stats(model, on_device(batch, device))          # detection-kind batch

The full flavor is MLPerf's network: torchvision's ResNeXt50-32x4d with frozen BatchNorm
(FrozenBatchNorm2d) and its stem and first stage frozen (the reference's `trainable_layers=3`;
36,849,004 parameters train), an FPN over C3-C5 with P6 and P7 from P5 (`LastLevelP6P7(256,
256)`), 9 anchors per location (3 sizes x 3 ratios, 32..512 px), torchvision's RetinaNet head
(4 conv layers per branch, no normalisation), trained with sigmoid focal loss on the classes and
L1 on the box deltas as torchvision's `RetinaNet` computes them. Classes have no
background: labels are the data's 0..C-1. The transform resizes every canvas to the flavor's
square size (800x800, as the reference resizes OpenImages) with mean 0 / std 1 (images arrive
normalised from `on_device`).

The debug flavor is the same family at toy size: a narrow ResNet (regular BatchNorm, all layers
trained: it starts from scratch), an FPN of 32 channels over two stages plus P6/P7, and 3 anchors
per location sized for 12-28 px digits.
"""

from __future__ import annotations

from hvdbench.frameworks.torch import vision
from hvdbench.frameworks.torch.recipe import flush_denormals

vision.ensure_torchvision()  # before torchvision: its native ops cannot load beside a CPU torch

from torchvision.models import resnext50_32x4d  # noqa: E402
from torchvision.models.detection.anchor_utils import AnchorGenerator  # noqa: E402
from torchvision.models.detection.backbone_utils import BackboneWithFPN, _resnet_fpn_extractor  # noqa: E402
from torchvision.models.detection.retinanet import RetinaNet, RetinaNetHead  # noqa: E402
from torchvision.ops.feature_pyramid_network import LastLevelP6P7  # noqa: E402
from torchvision.ops.misc import FrozenBatchNorm2d  # noqa: E402

# on_device: the trainer's preprocessing for this model (the detection family's normalisation).
from hvdbench.families.detection.torch import (  # noqa: E402
    NarrowResNet,
    detection_loss_and_stats,
    on_device,  # noqa: F401
)


def backbone(cfg):
    """The FPN backbone of a flavor: torchvision's ResNeXt50-32x4d (full) or a NarrowResNet."""
    if cfg.resnext:
        body = resnext50_32x4d(weights=None, norm_layer=FrozenBatchNorm2d if cfg.frozen_bn else None)
        return _resnet_fpn_extractor(body, cfg.trainable_layers, returned_layers=list(cfg.returned_layers),
                                     extra_blocks=LastLevelP6P7(cfg.fpn_channels, cfg.fpn_channels))
    body = NarrowResNet(cfg.widths, cfg.blocks, cfg.strides)
    layers = {f"layer{k}": str(i) for i, k in enumerate(cfg.returned_layers)}
    return BackboneWithFPN(body, layers, [cfg.widths[k - 1] for k in cfg.returned_layers], cfg.fpn_channels,
                           extra_blocks=LastLevelP6P7(cfg.fpn_channels, cfg.fpn_channels))


def build(cfg, num_classes: int | None = None, image_size: int | None = None, **_data_info) -> RetinaNet:
    flush_denormals()
    classes = num_classes or cfg.num_classes
    fpn = backbone(cfg)
    anchors = AnchorGenerator(tuple(tuple(s) for s in cfg.anchor_sizes),
                              (tuple(cfg.aspect_ratios),) * len(cfg.anchor_sizes))
    head = RetinaNetHead(fpn.out_channels, anchors.num_anchors_per_location()[0], classes)
    for branch in (head.classification_head, head.regression_head):
        branch.conv = branch.conv[:cfg.head_convs]
    return RetinaNet(fpn, classes, min_size=cfg.image_size, max_size=cfg.image_size,
                     image_mean=[0.0, 0.0, 0.0], image_std=[1.0, 1.0, 1.0], anchor_generator=anchors, head=head,
                     score_thresh=cfg.score_thresh, detections_per_img=cfg.detections_per_img,
                     topk_candidates=cfg.topk_candidates)


def loss_and_stats(model: RetinaNet, batch: dict):
    # RetinaNet's classes have no background: the data's labels as they are.
    return detection_loss_and_stats(model, batch, background=False)
