"""What the worker, the loop and the compute window ask of a framework's trainer, declared once, and
what a trainer asks of a model folder's framework module (no framework imported here).

    class Trainer(hvdbench.frameworks.trainer.Trainer):     # frameworks/torch/train.py, tf/train.py
        def train_step(self, micro_batches): ...
    hooks = hooks_of(TorchHooks, spec.framework_module("torch"))   # its functions, defaults filled

A trainer overrides what it can do; the base's defaults are what a trainer that cannot do it gives
(no compilation, no phase timing, no GPU memory figures, no FLOP count), so train/ calls every
method on any trainer and never asks which it has.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from hvdbench.errors import ConfigError


class Trainer:
    """One framework's trainer: a model folder's network and Horovod's (or torch.distributed's)
    optimizer, one optimizer step at a time, evaluation into the model's Metric."""

    # numpy batch -> the framework's tensors on the device (each trainer sets its DeviceBatches)
    device_batch: Callable[[dict], dict]
    # Whether the step's phases are timed (start_timing, stop_timing): the breakdown of a throughput run.
    times_phases: bool = False

    # --- what every trainer does (each framework's overrides them all) -----------------------

    def train_step(self, micro_batches: list) -> None:
        """One optimizer step over the micro-batches (on the device), gradients averaged over ranks."""
        raise NotImplementedError(f"{type(self).__name__}.train_step")

    def evaluate(self, batches, metric):
        """This rank's metric state over `batches` (numpy dicts), ready for `metric.reduce`."""
        raise NotImplementedError(f"{type(self).__name__}.evaluate")

    def set_lr(self, lr: float) -> None:
        """The learning rate of the next step."""
        raise NotImplementedError(f"{type(self).__name__}.set_lr")

    def num_parameters(self) -> int:
        """Every parameter of the whole model."""
        raise NotImplementedError(f"{type(self).__name__}.num_parameters")

    def num_trainable(self) -> int:
        """The parameters the optimizer updates (a LoRA run's adapters)."""
        raise NotImplementedError(f"{type(self).__name__}.num_trainable")

    def param_digest(self) -> str:
        """sha256 of every parameter, whole, in order: equal digests = equal models (every rank calls it)."""
        raise NotImplementedError(f"{type(self).__name__}.param_digest")

    # --- what a trainer may do; the defaults are a trainer that cannot ------------------------

    def compile(self, example: dict) -> None:
        """Prepare the step on a one-sample batch before the clock starts (TensorFlow traces its
        graphs); nothing by default (torch.compile compiles in the first steps, inside the warm-up)."""

    @property
    def compiles(self) -> bool:
        """Whether the step's first call compiles (the loop then warms up at least one step)."""
        return False

    @property
    def compile_s(self) -> float | None:
        """Seconds spent compiling in this trainer's steps so far (None: nothing compiles)."""
        return None

    def num_local(self) -> int:
        """The parameters this rank holds (fsdp: its shard)."""
        return self.num_parameters()

    def delay_compute(self, seconds: float) -> None:
        """HVDBENCH_INJECT_COMPUTE_DELAY_S (train/faults.py): slow this rank's forward and backward."""
        raise ConfigError("HVDBENCH_INJECT_COMPUTE_DELAY_S: this framework's trainer cannot delay its compute "
                          "(PyTorch's can)")

    def start_timing(self, probe: list | None = None) -> None:
        """Time every step's phases from now on (where times_phases); `probe`: one step's micro-batches."""

    def stop_timing(self) -> dict[str, float]:
        """The phases' seconds summed since start_timing ({} where nothing was timed)."""
        return {}

    def flops_per_sample(self, spec, flavor: str, kind) -> float | None:
        """Training FLOPs per sample of the run's network (None: not counted)."""
        return None

    def reset_peak_memory(self) -> None:
        """Start the device memory peaks afresh (a GPU's; nothing elsewhere)."""

    def peak_memory(self) -> dict[str, float]:
        """GB allocated and reserved at most since reset_peak_memory ({}: no device figures)."""
        return {}

    def parameters_by_name(self) -> dict:
        """Every parameter, whole, as numpy arrays (--save-parameters)."""
        raise ConfigError("--save-parameters: this framework's trainer cannot write its parameters (PyTorch's can)")


def hooks_of(declared, module):
    """A framework's model functions (`declared`: a dataclass, one field per function) from a model
    folder's module: each function the module defines, else the field's default; a required one it
    lacks is one line naming the module and the function. The one place a module's optional
    functions are looked up (docs/adding-a-model.md lists them)."""
    defined = vars(module)
    found = {}
    for f in dataclasses.fields(declared):
        if f.name in defined:
            found[f.name] = defined[f.name]
        elif f.default is dataclasses.MISSING:
            raise ConfigError(f"{module.__name__}: no {f.name}() (docs/adding-a-model.md: what the module defines)")
    return declared(**found)
