"""Mask R-CNN, R-50-FPN, MLPerf's `maskrcnn` benchmark (COCO box mAP 0.377 AND mask mAP 0.339).

    hvdbench prepare digit-scenes --out data/digit-scenes          # masks are stored by default
    horovodrun -np 2 -H localhost:2 hvdbench train maskrcnn --flavor debug --data data/digit-scenes --out runs/mr
    hvdbench prepare coco --src /data/coco --out data/coco800 --image-size 800
    hvdbench train maskrcnn --synthetic --steps 20 --out runs/maskrcnn-full

torchvision's `MaskRCNN` over a ResNet-50 FPN, 81 classes: 44,400,693 parameters (torch.py). It
shares the `detection` kind, the COCO mAP metric and the helpers of `hvdbench.families.detection`. The
metric's value is the box mAP (the `--target`); a run reaches its target only when the same
evaluation's mask mAP is at or above the flavor's `mask_target` too.
"""

from __future__ import annotations

from dataclasses import dataclass

from hvdbench.contracts import ModelSpec, only_with
from hvdbench.families.detection.data import DETECTION
from hvdbench.families.detection.metric import CocoMap


@dataclass(frozen=True)
class MaskRCNNConfig:
    resnet50: bool = True  # torchvision's ResNet-50 FPN; False: a NarrowResNet of the widths below
    frozen_bn: bool = True  # FrozenBatchNorm2d in the backbone, as the reference
    trainable_layers: int = 3  # the reference freezes the stem and layer1
    widths: tuple[int, ...] = ()
    blocks: tuple[int, ...] = ()
    strides: tuple[int, ...] = ()
    returned_layers: tuple[int, ...] = ()
    fpn_channels: int = 256
    anchor_sizes: tuple[int, ...] = ()  # one size per FPN map (x 3 aspect ratios)
    box_head: int = 1024
    mask_head: tuple[int, ...] = (256, 256, 256, 256)
    # The transform: short side to min_size, long side at most max_size (the reference's 800/1333).
    min_size: int = 800
    max_size: int = 1333
    # RPN proposals and RoI samples: torchvision's (the reference's) values.
    rpn_pre_nms_train: int = 2000
    rpn_post_nms_train: int = 2000
    rpn_pre_nms_test: int = 1000
    rpn_post_nms_test: int = 1000
    box_batch_per_image: int = 512
    detections_per_img: int = 100
    mask_target: float = 0.339  # MLPerf's mask mAP, required beside the box mAP target
    # The detection kind's info keys for --synthetic runs (a dataset's manifest gives its own).
    num_classes: int = 80
    image_size: int = 800
    max_objects: int = 100
    mask_bytes: int = 416  # synthetic rectangles up to 200 px wide


FLAVORS = {
    "full": MaskRCNNConfig(),
    # A narrow ResNet (stem stride 2; stages at strides 2, 4, 8), an FPN of 32 channels over the
    # last two (16x16, 8x8 at 64 px) plus the pooled P6 for the RPN, one anchor size per map for
    # 12-28 px digits, and fewer proposals and RoI samples (3 digits per scene at most).
    "debug": MaskRCNNConfig(resnet50=False, frozen_bn=False, trainable_layers=5, widths=(16, 32, 64),
                            blocks=(1, 1, 1), strides=(1, 2, 2), returned_layers=(2, 3), fpn_channels=32,
                            anchor_sizes=(16, 32, 64), box_head=128, mask_head=(16, 16), min_size=64,
                            max_size=64, rpn_pre_nms_train=300, rpn_post_nms_train=100, rpn_pre_nms_test=200,
                            rpn_post_nms_test=50, box_batch_per_image=64, detections_per_img=20,
                            mask_target=0.40, num_classes=10, image_size=64, max_objects=3, mask_bytes=144),
}

SPEC = ModelSpec(
    name="maskrcnn",
    flavors=FLAVORS,
    default_flavor="full",
    frameworks=("torch",),
    kinds=(DETECTION,),
    # Box mAP is the value (and --target); the flavor's mask_target rides with the stats and
    # CocoMap.reached requires it of the same evaluation.
    metric=CocoMap("box_map"),
    mlperf_benchmark="maskrcnn",
    mlperf_target=0.377,
    # The debug flavor on `prepare digit-scenes` at 2 ranks (2 CPU cores shared with ~10 other busy
    # processes, load ~12): box 0.56 and mask 0.49 at the first evaluation (epoch 1, 121 CPU-s;
    # seed 1: 0.58 / 0.47; alone: 0.61 / 0.49): box >= 0.50 and mask >= 0.40 pass there with margin,
    # and the integration test took 103 s against 169 s before (load ~6-9, run back to back).
    # After one epoch at the same load: 4 scenes per rank 0.50 / 0.39 (fails), 4 per rank at lr 2e-3
    # 0.54 / 0.46, 8 per rank (the defaults before, evaluated every 2 epochs) 0.40 and then
    # 0.62 / 0.47 at epoch 2 (68 s idle).
    flavor_targets={"debug": 0.50},
    defaults={
        # The reference (1x schedule): SGD momentum 0.9, lr 0.02 for 16 images (linear scaling),
        # weight decay 1e-4, linear warm-up over 500 iterations (here ~0.07 epoch of COCO at 16),
        # x0.1 at 60k and 80k of 90k iterations (the shared schedule has no steps: constant after
        # the warm-up); evaluated every epoch.
        "batch_per_gpu": 2,
        "optimizer": "sgd",
        "lr": 0.02,
        "lr_base_batch": 16,
        "lr_scaling": "linear",
        "momentum": 0.9,
        "weight_decay": 1e-4,
        "warmup_epochs": 0.07,
        "end_lr": 0.02,
        "decay_power": 0.0,
        "max_epochs": 13.0,
        "eval_every": 1.0,
        "eval_unit": "epochs",
        # From scratch on digit scenes: Adam 1e-3, 2 scenes per rank (500 updates an epoch at 2
        # ranks: the targets after one epoch, where 8 per rank needed two), evaluated every epoch.
        "debug": {"batch_per_gpu": 2, "eval_batch_per_gpu": 50, "optimizer": "adam", "lr": 1e-3,
                  "lr_base_batch": 4, "weight_decay": 0.0, "warmup_epochs": 0.0, "end_lr": 1e-3,
                  "max_epochs": 20.0, "eval_every": 1.0},
    },
    # The reference's keys beyond the common ones (training_1.0.0/closed_maskrcnn.yaml).
    mllog_hyperparameters={
        "opt_weight_decay": "weight_decay",
        "sgd_opt_momentum": only_with("sgd", "momentum"),
        "opt_learning_rate_warmup_steps": lambda cfg, facts: facts.warmup_steps,
        "min_image_size": lambda cfg, facts: _flavor(cfg).min_size,
        "max_image_size": lambda cfg, facts: _flavor(cfg).max_size,
    },
    parameters={"full": 44_125_173, "debug": 341_377},
)


def _flavor(cfg) -> MaskRCNNConfig:
    return FLAVORS[cfg.flavor]
