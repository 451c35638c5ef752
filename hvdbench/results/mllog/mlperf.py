"""What a benchmark's MLPerf logs mean where the log format leaves it to the benchmark: whether
`epoch_num` counts samples, and which number of a several-valued eval_accuracy is the score.

    hvdbench report --mllog training_results_v4.0/NVIDIA    # BERT, UNet3D, GPT-3, Mask R-CNN logs

For a benchmark hvdbench has a model for, the registry says (`hvdbench.contracts.counts_samples`:
the model's `eval_unit` default); the tables here hold MLPerf facts about benchmarks hvdbench has no
model for, so their published logs read right too, and MLPerf's own log format.
"""

from __future__ import annotations

# MLPerf benchmarks whose logs count samples, not epochs, in `epoch_num` (their reference
# convergence points are sample counts too), named here because hvdbench trains none of them as
# MLPerf does (no model, or a spec-only entry). Those hvdbench trains (BERT, Stable Diffusion,
# Llama 2 70B LoRA, Llama 3.1 8B, Flux.1, gpt-oss-20b...) say so in their spec; a log whose
# evaluations carry `samples_count` is sample-based whatever its benchmark.
SAMPLE_COUNTED_BENCHMARKS = frozenset({"unet3d", "gpt3", "llama31_405b", "deepseekv3_671b", "dlrmv4"})

# MLPerf benchmarks whose published logs put the steps per epoch, not the training set's size, under
# train_samples (NVIDIA's SSD and RetinaNet: 4572 at a global batch of 256, 464 at 2528, both ~1.17M
# OpenImages samples): their progress is counted in epochs (hvdbench.results.mllog.summary._trained).
TRAIN_SAMPLES_NOT_A_SIZE = frozenset({"ssd", "retinanet"})

# An eval_accuracy logged as several numbers is scored by this one: MLPerf's log format for Mask
# R-CNN is {"BBOX": box mAP, "SEGM": mask mAP} (the compliance checker's maskrcnn rules, which
# hvdbench's maskrcnn follows), and box mAP is the first of its two targets. The registry cannot
# say it: a model's Metric turns a value into what is logged (`Metric.logged`), not back.
SCORED_ACCURACY_KEY = "BBOX"


def counts_samples(benchmark: str) -> bool:
    """Whether a benchmark's `epoch_num` is a sample count (it evaluates every N samples)."""
    from hvdbench.contracts import counts_samples as registry_says  # lazily: the registry, only when a log is read

    return benchmark in SAMPLE_COUNTED_BENCHMARKS or registry_says(benchmark)


def accuracy_of(value) -> float | None:
    """An eval_accuracy's number: the value, or the scored one of several ({"BBOX": ..., "SEGM": ...})."""
    if isinstance(value, dict):
        value = value.get(SCORED_ACCURACY_KEY)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
