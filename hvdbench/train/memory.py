"""How much host memory a CPU run needs, known before it starts, so a run that cannot fit is refused
with an estimate and the batch that fits instead of being killed by the kernel mid-step.

    est = estimate(get_spec("resnet50"), cfg)   # cfg: a TrainConfig (flavor, framework, precision, optimizer,
    est.total       # bytes: fixed + batch x per_sample       engine, batch_per_gpu), or anything with those
    check_fits(spec, cfg, local_ranks=1)   # ConfigError "~25.6 GB for batch 256 ...; try ..."
    HVDBENCH_HOST_MEMORY_GB=8 hvdbench train ...   # what runs may use (default: available now)

The formula, per rank: the framework's runtime (libraries, allocator pools) + trained parameters x
(weights, gradients and optimizer state, 4 bytes each in fp32: SGD with momentum keeps one state,
Adam two) + frozen parameters x their weights alone, in the run's precision (a LoRA run's base:
`ModelSpec.frozen_parameters`) + Horovod's 64 MiB fusion buffer + batch x the bytes one sample's
activations take in a training step. That last figure is measured per flavor and framework
(`ModelSpec.memory_per_sample`, from benchmarks/bench_memory.py, which also prints estimate /
measured peak RSS); a flavor without one is checked on its weights alone when their count is known
(the spec's exact counts, or the built model's), and not at all otherwise. Measured in fp32 unless
the spec says otherwise: bf16/fp16 runs are estimated with it too, which errs towards "does not
fit" (their activations are smaller).

The worker checks before it builds the model when the spec has the flavor's exact counts
(`exact_counts`), so a run that cannot fit never allocates its weights; otherwise right after, with
the built model's counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

from hvdbench.contracts.engines import FUSION_BUFFER, engines, get_engine
from hvdbench.errors import ConfigError

GB = 1e9
# The frameworks' own footprint (interpreter, libraries, allocator pools), measured with the debug
# flavors (whose parameters and activations are a few MB): the fixed part of the peak RSS of 2-step
# synthetic runs (benchmarks/bench_memory.py: 0.36-0.43 GB torch, 0.78 GB TensorFlow).
RUNTIME_BYTES = {"torch": 0.45e9, "tensorflow": 0.8e9}
STATE_BYTES = {"sgd": 4, "adamw": 8, "adam": 8}  # optimizer state per parameter in fp32
# Copies of the per-parameter state a framework holds: measured on ResNet-50 full (25.6M parameters,
# SGD): torch 13 bytes per parameter (weights, gradients, momentum), TensorFlow 26 (its graph keeps
# a second copy of variables and gradients).
PARAM_COPIES = {"torch": 1.0, "tensorflow": 2.2}
# Bytes of one frozen weight: stored in the run's precision (no fp32 master copy: no optimizer
# updates it), as ModelSpec.frozen_parameters says a model keeps them.
FROZEN_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}


@dataclass(frozen=True)
class Estimate:
    fixed: int  # bytes that do not grow with the batch
    per_sample: int  # bytes per sample of the per-rank batch
    batch: int

    @property
    def total(self) -> int:
        return self.fixed + self.per_sample * self.batch

    def batch_within(self, limit: int) -> int:
        """The largest power-of-two batch whose estimate stays within `limit` bytes (0: none)."""
        b = 1
        while self.fixed + self.per_sample * b * 2 <= limit:
            b *= 2
        return b if self.fixed + self.per_sample * b <= limit else 0


def exact_counts(spec, flavor: str) -> tuple[int, int] | None:
    """(trained, frozen) parameters of a flavor from its spec, when the spec has them exactly (the
    check can then run before the model is built), else None."""
    if flavor not in spec.parameters or (spec.frozen_parameters and flavor not in spec.frozen_parameters):
        return None
    return spec.parameters[flavor], spec.frozen_parameters.get(flavor, 0)


def run_of(cfg, **changes):
    """The run the estimate reads (flavor, framework, precision, optimizer, engine, batch_per_gpu) of
    `cfg` (a TrainConfig, or anything with those attributes), with `changes` made: another flavor or
    engine a refusal weighs. An optimizer of None is the model's default."""
    return SimpleNamespace(**{**vars(cfg), **changes})


def state_bytes(spec, run, counts: tuple[int, int] | None = None, ranks: int = 1) -> float:
    """The bytes one rank of `ranks` holds for the model's weights, gradients and optimizer state: all
    of them under horovod and ddp (a whole replica per rank), 1/ranks of them under an engine that
    shards them (Engine.shards_state: fsdp; each rank keeps its shard, the one block gathered at a time
    is left to the activations' share). `counts`: (trained, frozen) parameters, else the spec's (0
    where it has none)."""
    params, frozen = counts or (spec.parameters.get(run.flavor, 0), spec.frozen_parameters.get(run.flavor, 0))
    optimizer = run.optimizer or spec.defaults.get("optimizer", "sgd")
    copies = PARAM_COPIES.get(run.framework, 1.0)
    whole = (params * (8 + STATE_BYTES.get(optimizer, 8)) + frozen * FROZEN_BYTES.get(run.precision, 4)) * copies
    return whole / max(1, ranks) if get_engine(run.engine).shards_state else whole


def estimate(spec, run, counts: tuple[int, int] | None = None, ranks: int = 1) -> Estimate:
    """The estimate for one rank of `ranks` of `run` (its batch_per_gpu); per_sample is 0 when the
    flavor's activations were not measured. The engine adds its buffer (Engine.buffer_bytes:
    Horovod's fusion buffer; ddp's gradient buckets are views of the gradients,
    gradient_as_bucket_view, and fsdp's reduce-scatter buffers are per block)."""
    fixed = (RUNTIME_BYTES.get(run.framework, RUNTIME_BYTES["torch"]) + state_bytes(spec, run, counts, ranks)
             + get_engine(run.engine).buffer_bytes)
    per_sample = spec.memory_per_sample.get(run.flavor, {}).get(run.framework, 0)
    return Estimate(int(fixed), int(per_sample), run.batch_per_gpu)


def available_bytes(env=None) -> int:
    """The memory runs may use: HVDBENCH_HOST_MEMORY_GB when set (a share of a shared machine),
    else what the kernel reports available now."""
    import os

    import psutil

    env = os.environ if env is None else env
    if env.get("HVDBENCH_HOST_MEMORY_GB"):
        try:
            return int(float(env["HVDBENCH_HOST_MEMORY_GB"]) * GB)
        except ValueError:
            raise ConfigError(f"HVDBENCH_HOST_MEMORY_GB={env['HVDBENCH_HOST_MEMORY_GB']!r}: give a number of GB") from None
    return int(psutil.virtual_memory().available)


def check_fits(spec, cfg, local_ranks: int, parameters: int | None = None, available: int | None = None,
               frozen: int | None = None, ranks: int = 1) -> None:
    """On a machine without GPUs: refuse a run whose estimate exceeds this rank's share of the
    available memory, naming the estimate and a batch (or flavor) that fits. `parameters` (trained)
    and `frozen`: the built model's counts, else the spec's; `ranks`: the job's (fsdp shards over them)."""
    counts = _counts(spec, cfg.flavor, parameters, frozen)
    est = estimate(spec, cfg, counts, ranks)
    weights_known = parameters is not None or cfg.flavor in spec.parameters
    if not est.per_sample and not weights_known:
        return  # neither activations nor weights known for this flavor: nothing to say
    share = (available if available is not None else available_bytes()) // max(1, local_ranks)
    if est.total <= share:
        return
    fits = est.batch_within(share) if est.per_sample else 0
    hint = (f"try --batch-per-gpu {fits}" if fits else "it does not fit at any batch")
    smallest = min(spec.flavors, key=lambda f: estimate(spec, run_of(cfg, flavor=f, batch_per_gpu=1,
                                                                     optimizer=None)).total)
    if smallest != cfg.flavor:
        hint = f"try --flavor {smallest}" + (f" or --batch-per-gpu {fits}" if fits else "")
    need = (f"for batch {cfg.batch_per_gpu} per rank" if est.per_sample
            else f"for its weights alone in {cfg.precision} (activations not measured)")
    sharding = _sharding(cfg)
    if sharding and not get_engine(cfg.engine).shards_state and ranks > 1 and not fits and estimate(
            spec, run_of(cfg, engine=sharding), counts, ranks).total <= share:
        hint += f"; or --engine {sharding}, which shards the weights over the {ranks} ranks"
    raise ConfigError(f"{spec.name}/{cfg.flavor} ({cfg.framework}, {cfg.engine}) needs ~{est.total / GB:.1f} GB "
                      f"{need}, and this machine has {share / GB:.1f} GB available per rank ({local_ranks} on "
                      f"this host); {hint}")


def _counts(spec, flavor: str, parameters: int | None, frozen: int | None) -> tuple[int, int] | None:
    """(trained, frozen) of the built model where the caller has its counts, else None (the spec's):
    either one given, the other is the spec's."""
    if parameters is None and frozen is None:
        return None
    return (parameters if parameters is not None else spec.parameters.get(flavor, 0),
            frozen if frozen is not None else spec.frozen_parameters.get(flavor, 0))


def _sharding(cfg) -> str | None:
    """The first engine (in the registry's order) that shards the state and implements the run's
    framework: the one a refusal suggests ("--engine fsdp, which shards ..."); None where none does."""
    return next((e.name for e in engines() if e.shards_state and cfg.framework in e.frameworks), None)


# The share of a GPU's memory the weights, gradients and optimizer state may take; the rest is the
# activations', the framework's and the communication buffers' (the check below knows no activations
# per GPU, so it keeps this margin rather than claim a fit).
GPU_STATE_SHARE = 0.75


def check_device_fits(spec, cfg, ranks: int, device_bytes: int, device_name: str = "GPU",
                      parameters: int | None = None, frozen: int | None = None) -> None:
    """On GPUs: refuse a run whose weights, gradients and optimizer state alone take more than
    GPU_STATE_SHARE of one GPU, saying what would hold them: --engine fsdp (how many GPUs of this
    size) under horovod/ddp, more GPUs under fsdp."""
    import math

    counts = _counts(spec, cfg.flavor, parameters, frozen)
    mine = state_bytes(spec, cfg, counts, ranks)
    room = GPU_STATE_SHARE * device_bytes
    if not mine or mine <= room:
        return
    whole = state_bytes(spec, cfg, counts)  # ranks=1: all of it
    gpus = math.ceil(whole / room)
    size = f"{device_bytes / GB:.0f} GB"
    sharding = _sharding(cfg)
    if get_engine(cfg.engine).shards_state or not sharding:
        advice = f"it needs at least {gpus} GPUs of {size} (this job has {ranks})"
    else:
        advice = f"--engine {sharding} shards them: at least {gpus} GPUs of {size}"
    raise ConfigError(f"{spec.name}/{cfg.flavor} under --engine {cfg.engine} holds ~{mine / GB:.0f} GB of weights, "
                      f"gradients and optimizer state per GPU ({whole / GB:.0f} GB in all), more than "
                      f"{GPU_STATE_SHARE:.0%} of one {device_name} ({size}); {advice}")
