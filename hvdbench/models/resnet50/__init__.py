"""ResNet-50 v1.5 image classification, MLPerf's vision benchmark (top-1 accuracy 0.759 on ImageNet).

    hvdbench train resnet50 --flavor debug --data data/digits --out runs/r50-debug
    hvdbench train resnet50 --framework tensorflow --synthetic --steps 100 --warmup-steps 10 --out runs/r50

v1.5 puts the stride of a down-sampling bottleneck on its 3x3 convolution (v1 put it on the first
1x1). The network is in `torch.py` and `tf.py` beside this file; both build exactly 25,557,032
parameters for the full flavor with 1000 classes. It trains on the `images` kind, which the images family
(hvdbench/families/images/) defines and writes (`hvdbench prepare images`, `prepare digits`).
"""

from __future__ import annotations

from dataclasses import dataclass

from hvdbench.contracts import ModelSpec, PublishedFlops, accuracy, only_with
from hvdbench.families.images.data import IMAGES


@dataclass(frozen=True)
class ResNetConfig:
    layers: tuple[int, ...] = (3, 4, 6, 3)  # bottleneck blocks per stage
    width: int = 64  # channels of the first stage's 3x3 convolutions; doubles every stage
    expansion: int = 4  # a bottleneck's output channels = expansion x width
    stem: str = "imagenet"  # "imagenet": 7x7/2 conv + 3x3/2 max-pool; "small": one 3x3/1 conv
    num_classes: int = 1000  # synthetic data; a dataset's manifest gives its own
    image_size: int = 224  # synthetic images (square)
    label_smoothing: float = 0.1  # MLPerf's reference value
    zero_init_last_bn: bool = True  # each block starts as the identity (helps large batches)


FLAVORS = {
    "full": ResNetConfig(),
    # Same family (bottlenecks, v1.5 strides, BN, 4 stages), a hundred times smaller: trains on a
    # CPU in seconds on 16x16 digits.
    "debug": ResNetConfig(layers=(1, 1, 1, 1), width=8, stem="small", num_classes=10, image_size=16,
                          label_smoothing=0.0),
}

SPEC = ModelSpec(
    name="resnet50",
    flavors=FLAVORS,
    default_flavor="full",
    frameworks=("torch", "tensorflow"),
    kinds=(IMAGES,),
    metric=accuracy("top1_accuracy"),
    mlperf_benchmark="resnet",
    # 8.18 GFLOP forward at 224x224 (torchvision's 4.089 G multiply-adds) + backward; ImageNet-1k's
    # training images per epoch (the logs count epochs).
    published_flops=PublishedFlops("full", 24.298e9, epoch_samples=1_281_167, sample="224x224 image"),
    mlperf_target=0.759,
    # The debug flavor on the built-in digits (`hvdbench prepare digits`) reaches 0.95 in a few epochs.
    flavor_targets={"debug": 0.95},
    defaults={
        # MLPerf's SGD reference: peak 0.1 per 256 images scaled linearly, 5 warm-up epochs,
        # polynomial (power 2) decay to 1e-4, momentum 0.9, weight decay 5e-5, eval every 4 epochs.
        "batch_per_gpu": 256,
        "optimizer": "sgd",
        "lr": 0.1,
        "lr_base_batch": 256,
        "lr_scaling": "linear",
        "warmup_epochs": 5.0,
        "end_lr": 0.0001,
        "decay_power": 2.0,
        "momentum": 0.9,
        "weight_decay": 5e-5,
        "max_epochs": 45.0,
        "eval_every": 4.0,
        "eval_unit": "epochs",
        # torch.compile on GPUs: 6,615 vs 4,546 images/s eager at batch 256, bf16, one H200
        # (benchmarks/gpu/README.md); CPUs stay eager.
        "compile": "auto",
        # Tuned on 16x16 digits at 2 ranks (global batch 32, lr 0.1): >= 0.95 after ~5 epochs.
        "debug": {"batch_per_gpu": 16, "lr": 0.8, "warmup_epochs": 0.5, "max_epochs": 12.0,
                  "eval_every": 1.0},
    },
    # What MLPerf's ResNet reference logs beside the common keys (seed, batch, optimizer, base lr):
    # its SGD's own keys, which the closed division requires (training_4.0.0/closed_resnet.yaml ->
    # closed_resnet_sgd.yaml), and the batch BatchNorm's statistics span (one rank's: Horovod
    # does not synchronise BatchNorm). Another optimizer (`--set optimizer=adamw`) logs only the
    # common keys and the warm-up.
    mllog_hyperparameters={
        "opt_learning_rate_warmup_epochs": "warmup_epochs",
        "sgd_opt_base_learning_rate": only_with("sgd", lambda cfg, facts: facts.peak_lr),
        "sgd_opt_end_learning_rate": only_with("sgd", "end_lr"),
        "sgd_opt_learning_rate_decay_poly_power": only_with("sgd", "decay_power"),
        # The polynomial decay runs from the end of the warm-up to the last step.
        "sgd_opt_learning_rate_decay_steps": only_with("sgd", lambda cfg, facts: facts.max_steps - facts.warmup_steps),
        "sgd_opt_weight_decay": only_with("sgd", "weight_decay"),
        "sgd_opt_momentum": only_with("sgd", "momentum"),
        "model_bn_span": lambda cfg, facts: cfg.batch_per_gpu,
    },
    parameters={"full": 25_557_032, "debug": 130_002},
    # Activations of one sample in a fp32 training step on a CPU (benchmarks/bench_memory.py: peak
    # RSS at two batch sizes); 224 px for full, 16 px for debug.
    memory_per_sample={"full": {"torch": 98_000_000, "tensorflow": 94_000_000},
                       "debug": {"torch": 800_000, "tensorflow": 400_000}},
    prepare_commands=("hvdbench.models.resnet50.cli:images", "hvdbench.models.resnet50.cli:digits"),
)
