"""What a model folder provides, in one place: `ModelSpec` and the framework modules' functions.
`docs/adding-a-model.md` walks through a complete folder.

    hvdbench/models/<name>/__init__.py   SPEC = ModelSpec(...)        (no framework imported)
    hvdbench/models/<name>/data.py       its DatasetKind(s)           (numpy only)
    hvdbench/models/<name>/torch.py      TorchModel functions          (single-device code)
    hvdbench/models/<name>/tf.py         TensorFlowModel functions     (optional)
    hvdbench/families/<family>/          what several folders share (a kind, a metric, writers,
                                         torch pieces), under the same rules: no folder imports another

The core (worker, readers, verify, synthetic data, events, report) reaches a model only through
these types, so it has no per-model or per-kind branch: adding a model never edits it.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from hvdbench.contracts.kinds import DatasetKind
from hvdbench.contracts.metrics import Metric
from hvdbench.errors import ConfigError

# The framework names of `--framework` and the module each one's network lives in.
FRAMEWORK_MODULES = {"torch": "torch", "tensorflow": "tf"}

# The run options a network's `build` gets only where it declares them (TorchModel.build), each with
# what a network that does not declare it lacks: a run that sets one for such a network is refused as
# its configuration resolves (train/config.validate: a sweep, before any launch), and by the trainer.
_LLMS = "llama31_8b's, gpt_oss_20b's and llama2_lora's base have"
BUILD_OPTIONS = {"attention": "has no attention to choose (BERT's has)",
                 "activation_checkpointing": f"has no decoder layers to recompute ({_LLMS})",
                 "loss_chunks": f"has no vocabulary loss to chunk ({_LLMS})"}


def undeclared_option(cfg, declared: set[str]) -> str | None:
    """The refusal of a BUILD_OPTIONS field `cfg` sets away from its default for a build that declares
    only `declared` (its named parameters); None where there is none."""
    defaults = type(cfg).__dataclass_fields__
    for name, lacks in BUILD_OPTIONS.items():
        if name not in declared and getattr(cfg, name) != defaults[name].default:
            return f"--{name.replace('_', '-')} {getattr(cfg, name)}: {cfg.model}'s network {lacks}"
    return None


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
class PublishedFlops:
    """The published MLPerf benchmark's training FLOPs per logged sample, as hvdbench counts its own
    network at the reference's size: what the report's MFU of published logs uses
    (hvdbench.results.analyses.efficiency). `flops_per_row`: `hvdbench bench flops --model M --flavor F`'s
    training figure (tests/unit/test_compute.py holds them equal); `rows_per_sample`: rows of that
    size one logged sample takes (BERT's packed sequences: ~0.5); `epoch_samples`: samples per epoch of
    the reference's data, for logs that count epochs; `sample`: what a sample is, in words."""

    flavor: str
    flops_per_row: float
    rows_per_sample: float = 1.0
    epoch_samples: int = 0
    sample: str = ""

    @property
    def per_sample(self) -> float:
        return self.flops_per_row * self.rows_per_sample


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
    # flavor -> exact count of the parameters a run holds but does not train (a LoRA run's frozen
    # base), kept in the run's precision. Why: the host-memory check (hvdbench/train/memory.py) must
    # count every weight a run holds, and with both exact counts it runs before the model is built
    # (a 7B base takes a minute to build). Once a spec lists a flavor here, one it leaves out is
    # counted from the built model instead.
    frozen_parameters: dict[str, int] = field(default_factory=dict)
    # flavor -> framework -> bytes one sample's activations take in a training step on a CPU (fp32
    # unless the model's comment says otherwise), measured by benchmarks/bench_memory.py
    # (hvdbench/train/memory.py refuses runs that cannot fit).
    memory_per_sample: dict[str, dict[str, int]] = field(default_factory=dict)
    # precision -> why the model cannot train in it on a CPU (an op with no CPU kernel for that
    # dtype, e.g. fp16 LSTMs in oneDNN). Why a spec field: which ops a network uses is the model's
    # fact, and the device is known only in the worker, which refuses such a run there in one line
    # before building it (a precision that runs but slowly on a CPU is the worker's general warning).
    unsupported_on_cpu: dict[str, str] = field(default_factory=dict)
    # Commands `hvdbench prepare` gains from this folder: "module:attribute" of click commands
    # that write its dataset kinds (the attribute is the command's name).
    prepare_commands: tuple[str, ...] = ()
    # Why a run of this model cannot run as configured, checked with the resolved TrainConfig before
    # anything starts (hvdbench.train.config.validate: `train`, and every layout of a sweep or study
    # up front): a one-line reason, or None when it can. For facts of the config and of the
    # environment the run's ranks will have (`env`: a sweep's own plus its --env; a flavor too large
    # for the way runs are distributed, a setting a run needs and lacks); what needs the device or
    # data is checked later.
    refuse: Callable[[Any, Mapping[str, str]], str | None] | None = None
    # Flavors too large to build whole in one process (a 70B base, an 8B model with its optimizer
    # state): under `--engine fsdp` they are built on the meta device and each rank materialises only
    # its shard (torch.py's `init_weights(model)` draws the values, else every module's
    # reset_parameters). Other flavors are built whole from the seed, so every engine starts equal.
    build_on_meta: tuple[str, ...] = ()
    # The MLPerf benchmark's FLOPs per logged sample (PublishedFlops), for published logs' MFU.
    published_flops: PublishedFlops | None = None
    # Where MLPerf's rules make the evaluation interval grow with the global batch: the samples between
    # two evaluations at a batch (the time-to-train predictor counts evaluations with it). None: the
    # interval is fixed in samples or epochs, whatever the batch.
    mlperf_eval_interval: Callable[[float], float] | None = None
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

    def synthetic_kind(self, name: str = "") -> DatasetKind:
        """The kind of --synthetic's batch: `name` (--synthetic-kind), else the first the model trains on."""
        return self.kind(name) if name else self.kinds[0]

    def synthetic_info(self, flavor_cfg, kind: DatasetKind | None = None) -> dict:
        """The data sizes of --synthetic runs of `kind` (default: the first): the flavor's own (its
        config has the info keys)."""
        kind = kind or self.kinds[0]
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

    def build_parameters(self, framework: str) -> set[str]:
        """The named parameters of `framework`'s build (what the trainer may hand it: rank, world,
        attention); imports the framework, so a caller asks only where an option depends on it."""
        return {name for name, p in inspect.signature(self.framework_module(framework).build).parameters.items()
                if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)}


# --- the framework modules (documentation of what torch.py / tf.py define) --------------------

class TorchModel(Protocol):
    """hvdbench/models/<name>/torch.py: single-device PyTorch code; never imports horovod."""

    def build(self, cfg, **info) -> "Any":
        """The torch.nn.Module for a flavor config; `info` = the dataset kind's info keys.

        The run's place, for a model that needs it (e.g. to seed a random stream per rank): the
        trainer also passes `rank` (this process's Horovod rank, 0..world-1) and `world` (the number
        of ranks), each only when `build` declares a parameter of that name (`**info` alone gets
        neither), so no model reads the launcher or imports the trainer for them. Give them
        defaults: a build outside the trainer (a test, a parameter count) passes none. No info key
        may be named `rank` or `world`. The same way, a build that declares `attention` gets the
        run's --attention (mask or varlen: how a transformer keeps a row's sequences apart), one
        that declares `activation_checkpointing` or `loss_chunks` those options (the LLMs); a run
        setting one for a build that does not declare it is refused.

            def build(cfg, num_items=None, rank=None, **_):   # rank: the trainer's; None outside it
        """

    def loss_and_stats(self, model, batch: dict) -> tuple["Any", dict]:
        """(scalar training loss, stats for the metric's update), e.g. {"correct", "total"}."""

    # Optional (hvdbench/frameworks/torch/hooks.py's TorchHooks declares them with their defaults):
    #   on_device(batch: dict[str, Tensor], device) -> dict   preprocessing after the copy to the
    #       device (e.g. uint8 NHWC images -> normalised float); default: none
    #   param_groups(model, cfg) -> list[dict]    default: weight decay off biases and norms
    #   make_optimizer(groups, cfg) -> torch.optim.Optimizer   default: by cfg.optimizer
    #   shard_units(model) -> list[nn.Module]     the repeated blocks `--engine fsdp` shards one by
    #       one (a transformer's layers), before the whole model; default: the model as one unit
    #   compile_units(model) -> list[nn.Module]   the blocks `--compile` compiles one by one
    #       (regional compilation: a transformer's decoder layers); default: the whole step
    #   init_weights(model) -> None               fills a model built on the meta device and moved
    #       to real memory (ModelSpec.build_on_meta); default: each module's reset_parameters()


class TensorFlowModel(Protocol):
    """hvdbench/models/<name>/tf.py: single-device Keras 3 code; never imports horovod."""

    def build(self, cfg, **info) -> "Any":
        """The keras.Model for a flavor config; `rank` and `world` as for TorchModel.build."""

    def loss_and_stats(self, model, batch: dict, training: bool) -> tuple["Any", dict]:
        """(scalar loss, stats for the metric's update); traced into a tf.function without AutoGraph:
        a branch on a tensor is tf.cond, not a Python `if`."""

    # Optional (hvdbench/frameworks/tf/train.py's TfHooks declares them with their defaults):
    #           on_device(batch: dict[str, tf.Tensor]) -> dict   (traced preprocessing)
    #           make_optimizer(cfg) -> keras optimizer          default: by cfg.optimizer
