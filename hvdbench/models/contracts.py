"""What a model folder provides, in one place: `ModelSpec`, `DatasetKind`, `Metric` and the
framework modules' functions. `docs/adding-a-model.md` walks through a complete folder.

    hvdbench/models/<name>/__init__.py   SPEC = ModelSpec(...)        (no framework imported)
    hvdbench/models/<name>/data.py       its DatasetKind(s)           (numpy only)
    hvdbench/models/<name>/torch.py      TorchModel functions          (single-device code)
    hvdbench/models/<name>/tf.py         TensorFlowModel functions     (optional)

The core (worker, readers, verify, synthetic data, events, report) reaches a model only through
these types, so it has no per-model or per-kind branch: adding a model never edits it.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from hvdbench.errors import ConfigError

if TYPE_CHECKING:
    from pathlib import Path

# The framework names of `--framework` and the module each one's network lives in.
FRAMEWORK_MODULES = {"torch": "torch", "tensorflow": "tf"}


# --- dataset kinds ---------------------------------------------------------------------------

class DatasetKind:
    """One kind of prepared dataset (the manifest's `kind`): its fields, the manifest keys a model
    needs, how `prepare verify` checks values, and random data shaped like it.

    Subclass it in the model folder's data.py and list the instance in `ModelSpec.kinds`.
    """

    name: str = ""
    # Manifest keys handed to the model (`build(cfg, **info)`) and to `synthetic()`: the data's
    # sizes (classes, image size, vocabulary, sequence length...). A missing one is a DatasetError.
    info_keys: tuple[str, ...] = ()
    # True when prepare wrote the samples in random order: readers may then shuffle runs of
    # consecutive samples (sequential reads) instead of single samples.
    shuffled_when_written: bool = False
    samples_per_shard: int = 1024  # `prepare synthetic`'s default
    synthetic_defaults: dict = {}  # info values `prepare synthetic --like NAME` uses unless given

    def fields(self, info: dict) -> dict[str, dict]:
        """The per-sample shape and dtype of every field, as the manifest's `fields` holds them."""
        raise NotImplementedError

    def limits(self, manifest: dict) -> dict[str, tuple[float, float]]:
        """Inclusive value range of the fields that have one (`prepare verify` checks every value)."""
        return {}

    def synthetic(self, n: int, info: dict, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """`n` random samples with the fields, shapes and dtypes of this kind's shards."""
        raise NotImplementedError

    def synthetic_files(self, out: "Path", info: dict) -> dict:
        """Write any side files a synthetic dataset needs (a vocabulary); its extra manifest keys."""
        return {}

    def host_decode(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The model's on-device preprocessing done with numpy on the host (what `hvdbench bench
        io` times as the host-side cost a loader would add); default: nothing to do."""
        return batch

    def data_info(self, manifest: dict, where: str) -> dict:
        """The `info_keys` of a manifest; DatasetError naming the file for a missing key."""
        from hvdbench.errors import DatasetError

        missing = [k for k in self.info_keys if k not in manifest]
        if missing:
            raise DatasetError(f"{where}: key {missing[0]!r} missing (a {self.name!r} dataset needs "
                               f"{', '.join(self.info_keys)})")
        return {k: manifest[k] for k in self.info_keys}

    def __repr__(self) -> str:
        return f"<dataset kind {self.name}>"


# --- metrics ---------------------------------------------------------------------------------

class Metric:
    """An evaluation metric: per-rank state over the validation batches -> reduced across ranks ->
    one value, and the direction in which the target is reached.

    The trainer calls `update(state, stats)` per batch with the `stats` dict the model's
    `loss_and_stats` returns (framework tensors; keep them on the device), then `local(state)`
    once; the worker calls `reduce(local, dist)` on every rank and `value(reduced)`.
    """

    name: str = ""
    higher_is_better: bool = True
    bounds: tuple[float, float] = (0.0, 1.0)  # the values a target may take

    def start(self) -> Any:
        raise NotImplementedError

    def update(self, state: Any, stats: dict) -> Any:
        raise NotImplementedError

    def local(self, state: Any) -> Any:
        """This rank's state in plain Python/numpy (what travels between ranks)."""
        return state

    def reduce(self, local: Any, dist) -> Any:
        raise NotImplementedError

    def value(self, reduced: Any) -> float:
        raise NotImplementedError

    def samples(self, reduced: Any) -> int | None:
        """How many samples the evaluation covered, when the metric knows."""
        return None

    def reached(self, value: float, target: float) -> bool:
        return value >= target if self.higher_is_better else value <= target

    def logged(self, value: float):
        """What MLLOG's eval_accuracy carries for the evaluation `value` just came from: the value,
        or the several numbers MLPerf logs for a benchmark (Mask R-CNN's {"BBOX", "SEGM"})."""
        return value

    def check_target(self, target: float) -> None:
        low, high = self.bounds
        if not (low < target <= high if self.higher_is_better else low <= target < high):
            raise ConfigError(f"target for {self.name} must be in "
                              f"{'(' if self.higher_is_better else '['}{low:g}, {high:g}"
                              f"{']' if self.higher_is_better else ')'}, got {target}")


class RatioMetric(Metric):
    """sum(numerator) / sum(denominator) over batches and ranks: accuracy (correct / total),
    HR@10 (hits / users), a mean eval loss (loss sum / tokens). Reduced by one allreduce of sums."""

    def __init__(self, name: str, numerator: str, denominator: str, higher_is_better: bool = True,
                 bounds: tuple[float, float] = (0.0, 1.0)):
        self.name, self.keys = name, (numerator, denominator)
        self.higher_is_better, self.bounds = higher_is_better, bounds

    def start(self) -> list:
        return [0, 0]  # ints: they add to int and float tensors of any framework alike

    def update(self, state: list, stats: dict) -> list:
        # Adds framework tensors without reading them back: no device synchronisation per batch.
        return [s + stats[k] for s, k in zip(state, self.keys)]

    def local(self, state: list) -> np.ndarray:
        return np.array([float(s) for s in state], dtype=np.float64)

    def reduce(self, local: np.ndarray, dist) -> np.ndarray:
        return np.asarray(dist.allreduce_sum(local), dtype=np.float64)

    def value(self, reduced: np.ndarray) -> float:
        return float(reduced[0] / max(reduced[1], 1e-12)) if reduced[1] else math.nan

    def samples(self, reduced: np.ndarray) -> int:
        return int(reduced[1])


class GatheredMetric(Metric):
    """A metric that needs every rank's raw results (COCO mAP over all detections): the per-batch
    stats (host objects) are gathered to every rank and `compute(list of all batches' stats)`."""

    def __init__(self, name: str, compute, higher_is_better: bool = True,
                 bounds: tuple[float, float] = (0.0, 1.0)):
        self.name, self.compute = name, compute
        self.higher_is_better, self.bounds = higher_is_better, bounds

    def start(self) -> list:
        return []

    def update(self, state: list, stats: dict) -> list:
        return [*state, stats]

    def reduce(self, local: list, dist) -> list:
        return [item for part in dist.allgather_object(local) for item in part]

    def value(self, reduced: list) -> float:
        return float(self.compute(reduced))


def accuracy(name: str) -> RatioMetric:
    """correct / total, from `loss_and_stats`'s stats {"correct", "total"}."""
    return RatioMetric(name, "correct", "total")


def eval_loss(name: str = "eval_loss") -> RatioMetric:
    """Mean loss, lower is better, from stats {"loss_sum", "count"}."""
    return RatioMetric(name, "loss_sum", "count", higher_is_better=False, bounds=(0.0, math.inf))


# --- the spec --------------------------------------------------------------------------------

@dataclass(frozen=True)
class RunFacts:
    """What a run's MLLOG hyperparameters may need beyond its config, known once the loop has laid
    the run out (the dataset's epoch in steps, the schedule's length)."""

    global_batch: int
    peak_lr: float  # the scaled peak learning rate
    steps_per_epoch: int | None  # None with --synthetic
    max_steps: int  # the schedule's last step (time-to-accuracy) or warm-up + timed steps
    warmup_steps: int  # of the learning rate


# An `mllog_hyperparameters` value: a TrainConfig field name, or a callable of (cfg, RunFacts) for a
# value known only once the run is laid out; a callable's None is not logged (e.g. a key of an
# optimizer the run does not use).
MllogValue = str | Callable[[Any, RunFacts], Any]


def only_with(optimizer: str, value: MllogValue) -> Callable[[Any, RunFacts], Any]:
    """An `mllog_hyperparameters` value logged only when the run trains with `optimizer` (the keys
    of that optimizer's own, e.g. MLPerf's `sgd_opt_momentum` or `opt_lamb_beta_1`)."""
    def get(cfg, facts):
        if cfg.optimizer != optimizer:
            return None
        return value(cfg, facts) if callable(value) else getattr(cfg, value)
    return get


@dataclass(frozen=True)
class ModelSpec:
    """Everything framework-neutral about a model; data only (cheap to import, no framework)."""

    name: str
    flavors: dict[str, Any]  # flavor name -> dataclass instance (the network's size)
    default_flavor: str
    frameworks: tuple[str, ...]  # "torch", "tensorflow": a torch.py / tf.py beside the spec
    kinds: tuple[DatasetKind, ...]  # dataset kinds it trains on; the first one for --synthetic
    metric: Metric
    mlperf_target: float  # MLPerf's quality target for the full-size flavors
    mlperf_benchmark: str = ""  # MLPerf's name (`submission_benchmark`); empty: not an MLPerf model
    flavor_targets: dict[str, float] = field(default_factory=dict)  # e.g. debug on built-in data
    # TrainConfig defaults with why-comments (batch_per_gpu, optimizer, lr, schedule, eval_every...),
    # with per-flavor overrides under the flavor's name.
    defaults: dict[str, Any] = field(default_factory=dict)
    # MLLOG hyperparameter key -> TrainConfig field or callable (see MllogValue), logged beyond the
    # common ones (seed, batch, optimizer name, base learning rate): what the reference logs for
    # this benchmark (MLPerf's closed division checks its optimizer's and schedule's keys).
    mllog_hyperparameters: dict[str, MllogValue] = field(default_factory=dict)
    # flavor -> exact count of the parameters a run trains (and allreduces): runs.csv's `parameters`
    parameters: dict[str, int] = field(default_factory=dict)
    # flavor -> framework -> bytes one sample's activations take in a fp32 training step on a CPU,
    # measured by benchmarks/bench_memory.py (hvdbench/train/memory.py refuses runs that cannot fit).
    memory_per_sample: dict[str, dict[str, int]] = field(default_factory=dict)
    # Commands `hvdbench prepare` gains from this folder: "module:attribute" of click commands
    # that write its dataset kinds (the attribute is the command's name).
    prepare_commands: tuple[str, ...] = ()
    package: str = ""  # the folder's module (set by the registry): torch.py / tf.py live there

    def flavor(self, name: str | None) -> Any:
        name = name or self.default_flavor
        if name not in self.flavors:
            raise ConfigError(f"model {self.name} has no flavor {name!r}; valid: {', '.join(self.flavors)}")
        return self.flavors[name]

    def target(self, flavor: str | None) -> float:
        return self.flavor_targets.get(flavor or self.default_flavor, self.mlperf_target)

    def mllog_values(self, cfg, facts: RunFacts) -> dict[str, Any]:
        """`mllog_hyperparameters` for one run: field names read from `cfg`, callables called with
        (cfg, facts); None values left out."""
        values = {}
        for key, source in self.mllog_hyperparameters.items():
            value = source(cfg, facts) if callable(source) else getattr(cfg, source)
            if value is not None:
                values[key] = value
        return values

    @property
    def data_kinds(self) -> tuple[str, ...]:
        return tuple(k.name for k in self.kinds)

    @property
    def benchmark(self) -> str:
        return self.mlperf_benchmark or self.name

    def kind(self, name: str) -> DatasetKind:
        for k in self.kinds:
            if k.name == name:
                return k
        raise ConfigError(f"{self.name} trains on {', '.join(self.data_kinds)}, not {name!r} data")

    def synthetic_info(self, flavor_cfg) -> dict:
        """The data sizes of --synthetic runs: the flavor's own (its config has the info keys)."""
        kind = self.kinds[0]
        missing = [k for k in kind.info_keys if not hasattr(flavor_cfg, k)]
        if missing:
            raise ConfigError(f"{self.name}: flavor config lacks {', '.join(missing)} for synthetic data")
        return {k: getattr(flavor_cfg, k) for k in kind.info_keys}

    def framework_module(self, framework: str):
        """The module with the network for `framework` (imports the framework: workers only)."""
        if framework not in self.frameworks:
            raise ConfigError(f"model {self.name} has no {framework} implementation "
                              f"(frameworks: {', '.join(self.frameworks)})")
        return importlib.import_module(f"{self.package}.{FRAMEWORK_MODULES[framework]}")


# --- the framework modules (documentation of what torch.py / tf.py define) --------------------

class TorchModel(Protocol):
    """hvdbench/models/<name>/torch.py: single-device PyTorch code; never imports horovod."""

    def build(self, cfg, **info) -> "Any":
        """The torch.nn.Module for a flavor config; `info` = the dataset kind's info keys."""

    def loss_and_stats(self, model, batch: dict) -> tuple["Any", dict]:
        """(scalar training loss, stats for the metric's update), e.g. {"correct", "total"}."""

    # Optional:
    #   on_device(batch: dict[str, Tensor], device) -> dict   preprocessing after the copy to the
    #       device (e.g. uint8 NHWC images -> normalised float); default: none
    #   param_groups(model, cfg) -> list[dict]    default: weight decay off biases and norms
    #   make_optimizer(groups, cfg) -> torch.optim.Optimizer   default: by cfg.optimizer


class TensorFlowModel(Protocol):
    """hvdbench/models/<name>/tf.py: single-device Keras 3 code; never imports horovod."""

    def build(self, cfg, **info) -> "Any":
        """The keras.Model for a flavor config."""

    def loss_and_stats(self, model, batch: dict, training: bool) -> tuple["Any", dict]:
        """(scalar loss, stats for the metric's update); traced into a tf.function."""

    # Optional: on_device(batch: dict[str, tf.Tensor]) -> dict   (traced preprocessing)
    #           make_optimizer(cfg) -> keras optimizer          default: by cfg.optimizer
