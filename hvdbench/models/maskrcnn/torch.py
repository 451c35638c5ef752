"""Mask R-CNN (R-50-FPN, MLPerf's `maskrcnn` benchmark) in PyTorch, built from torchvision's
detection classes: single-device code (Horovod is applied in frameworks/torch/dist.py).

    from hvdbench.contracts import get_spec
    model = build(get_spec("maskrcnn").flavor("full"), num_classes=80, mask_bytes=4096)   # 44,400,693 parameters
    loss, stats = loss_and_stats(model, on_device(batch, device))    # needs the data's masks

The full flavor is MLPerf's network: torchvision's ResNet-50 with frozen BatchNorm
(FrozenBatchNorm2d) and its stem and first stage frozen (the reference freezes the body at stage
2; 44,125,173 of its 44,347,573 parameters train), an FPN over C2-C5 with a max-pooled P6, an RPN with 3 anchors per
location (32..512 px), box and mask heads on RoIAlign features (7x7 and 14x14, sampling ratio 2)
and 81 classes (80 + background: labels are the data's + 1). Its transform resizes a canvas's
short side to 800 (long side at most 1333); a square canvas thus becomes 800x800, so the data is
best prepared at 800 (`prepare coco --image-size 800`, no second resize; the reference's images
are 800 on the short side, here on the long side).

The debug flavor is the same family at toy size: a narrow ResNet (regular BatchNorm, all trained,
from scratch), an FPN of 32 channels over two stages plus P6, smaller RPN/RoI sample counts, a
128-wide box head and a 2x16 mask head.

RoIAlign and NMS come from torchvision's native library, or on a CPU venv where it cannot load
from hvdbench/frameworks/torch/vision.py (pure PyTorch, the same results).
"""

from __future__ import annotations

from hvdbench.errors import DatasetError
from hvdbench.frameworks.torch import vision
from hvdbench.frameworks.torch.recipe import flush_denormals

vision.ensure_torchvision()  # before torchvision: its native ops cannot load beside a CPU torch

from torchvision.models import resnet50  # noqa: E402
from torchvision.models.detection.anchor_utils import AnchorGenerator  # noqa: E402
from torchvision.models.detection.backbone_utils import BackboneWithFPN, _resnet_fpn_extractor  # noqa: E402
from torchvision.models.detection.faster_rcnn import FastRCNNPredictor, TwoMLPHead  # noqa: E402
from torchvision.models.detection.mask_rcnn import MaskRCNN, MaskRCNNHeads, MaskRCNNPredictor  # noqa: E402
from torchvision.ops import MultiScaleRoIAlign  # noqa: E402
from torchvision.ops.misc import FrozenBatchNorm2d  # noqa: E402

# on_device: the trainer's preprocessing for this model (the detection family's normalisation).
from hvdbench.families.detection.torch import (  # noqa: E402
    NarrowResNet,
    detection_loss_and_stats,
    on_device,  # noqa: F401
)


def build(cfg, num_classes: int | None = None, image_size: int | None = None, mask_bytes: int | None = None,
          **_data_info) -> MaskRCNN:
    if mask_bytes is not None and mask_bytes <= 0:
        raise DatasetError("maskrcnn trains on instance masks and this dataset has none: prepare it with "
                           "masks (`hvdbench prepare coco ... --masks` or `hvdbench prepare digit-scenes --masks`)")
    flush_denormals()
    classes = (num_classes or cfg.num_classes) + 1  # + background
    common = {"min_size": cfg.min_size, "max_size": cfg.max_size, "image_mean": [0.0, 0.0, 0.0],
              "image_std": [1.0, 1.0, 1.0], "rpn_pre_nms_top_n_train": cfg.rpn_pre_nms_train,
              "rpn_post_nms_top_n_train": cfg.rpn_post_nms_train, "rpn_pre_nms_top_n_test": cfg.rpn_pre_nms_test,
              "rpn_post_nms_top_n_test": cfg.rpn_post_nms_test,
              "box_batch_size_per_image": cfg.box_batch_per_image,
              "box_detections_per_img": cfg.detections_per_img}
    if cfg.resnet50:
        body = resnet50(weights=None, norm_layer=FrozenBatchNorm2d if cfg.frozen_bn else None)
        fpn = _resnet_fpn_extractor(body, cfg.trainable_layers)  # C2-C5 + max-pooled P6, 256 channels
        model = MaskRCNN(fpn, classes, **common)
        model.mask_floor = cfg.mask_target
        return model
    # The debug family: the same heads, narrowed, over a NarrowResNet FPN.
    body = NarrowResNet(cfg.widths, cfg.blocks, cfg.strides)
    layers = {f"layer{k}": str(i) for i, k in enumerate(cfg.returned_layers)}
    fpn = BackboneWithFPN(body, layers, [cfg.widths[k - 1] for k in cfg.returned_layers], cfg.fpn_channels)
    levels = [str(i) for i in range(len(cfg.returned_layers))]  # the FPN's maps ("pool" is RPN-only)
    anchors = AnchorGenerator(tuple((s,) for s in cfg.anchor_sizes), ((0.5, 1.0, 2.0),) * len(cfg.anchor_sizes))
    c = fpn.out_channels
    model = MaskRCNN(
        fpn, None, rpn_anchor_generator=anchors,  # (the predictors below carry the classes)
        box_roi_pool=MultiScaleRoIAlign(levels, 7, 2),
        box_head=TwoMLPHead(c * 7 * 7, cfg.box_head),
        box_predictor=FastRCNNPredictor(cfg.box_head, classes),
        mask_roi_pool=MultiScaleRoIAlign(levels, 14, 2),
        mask_head=MaskRCNNHeads(c, list(cfg.mask_head), 1),
        mask_predictor=MaskRCNNPredictor(cfg.mask_head[-1], cfg.mask_head[-1], classes),
        **common)
    model.mask_floor = cfg.mask_target  # the evaluation's second condition (CocoMap reads it from the stats)
    return model


def loss_and_stats(model: MaskRCNN, batch: dict):
    # The mask target (MLPerf's 0.339 for the full flavor) rides with the stats to CocoMap.
    return detection_loss_and_stats(model, batch, background=True, masks=True, mask_floor=model.mask_floor)
