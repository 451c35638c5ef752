"""Typed run configuration for `hvdbench train`: strict loading, model defaults, NxGxBxA names.

A run is described by one `TrainConfig`. It is built from, in increasing priority: the field
defaults below, the model spec's defaults (`ModelSpec.defaults`, then that dict's entry for the
flavor), a YAML file (`hvdbench train resnet50 --config run.yaml`), and the command-line options.
Every source goes through `from_dict`, so an unknown key or a wrong type is a ConfigError naming
the key wherever it comes from. The resolved config is saved beside every run (`config.yaml` and
inside `result.json`).

Model spec defaults are flat TrainConfig field names, with optional per-flavor overrides under the
flavor's name, e.g. for ResNet-50:

    defaults={"batch_per_gpu": 256, "lr": 0.1, "lr_base_batch": 256, ...,
              "debug": {"batch_per_gpu": 32, "max_epochs": 12}}

Names carry units: `batch_per_gpu`, `warmup_epochs`, `max_epochs`; `eval_every` is in `eval_unit`
(epochs for ResNet, samples for BERT, as MLPerf evaluates them).
"""

from __future__ import annotations

import dataclasses
import os
import re
import reprlib
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from hvdbench.contracts import BUILD_OPTIONS, undeclared_option
from hvdbench.errors import ConfigError
from hvdbench.frameworks import default_engine
from hvdbench.topology import Layout

FRAMEWORKS = ("torch", "tensorflow")
FRAMEWORK_NAMES = {"torch": "PyTorch", "tensorflow": "TensorFlow"}  # as an error names them
# fp8: the linear layers' matmuls in float8 (torchao's Float8Linear, dynamic scales), the rest in
# bf16; CUDA GPUs of compute capability 8.9 or more (Ada, Hopper, Blackwell) only.
PRECISIONS = ("fp32", "bf16", "fp16", "fp8")
OPTIMIZERS = ("sgd", "adamw", "adam")  # each framework's Trainer implements these
LR_SCALINGS = ("linear", "sqrt", "none")  # how the learning rate grows with the global batch
EVAL_UNITS = ("epochs", "samples")
# torch.compile's modes (PyTorch): reduce-overhead also captures the step's kernels in CUDA graphs.
# auto: `default` where the step runs on a CUDA GPU, off elsewhere (a model spec's default: compiling
# ResNet-50 gained 45 % on an H200, benchmarks/gpu/README.md; on a CPU compiling costs minutes and wins
# nothing at the debug flavors' sizes).
COMPILE_MODES = ("off", "auto", "default", "max-autotune", "reduce-overhead")
# How a transformer's attention keeps the sequences of a row apart (PyTorch): a boolean mask through
# SDPA (the reference), or each sequence alone through SDPA on nested tensors (variable-length kernels).
ATTENTIONS = ("mask", "varlen")
# Recomputing a transformer's activations in backward (PyTorch LLMs, per decoder layer).
CHECKPOINTINGS = ("none", "selective", "full")
LEVERS = ("compile", "fused_optimizer", "attention", "channels_last", "overlap_copies", "activation_checkpointing",
          "loss_chunks")
DIVISIONS = ("open", "closed")
SUBMISSION_STATUSES = ("cloud", "onprem", "preview", "research")


@dataclass
class SubmissionConfig:
    """MLPerf submission fields written at the top of the event log (`submission_*` keys)."""

    org: str = "hvdbench"
    platform: str = ""  # empty: "<nodes>x<gpus per node> <device name>", filled by the worker
    division: str = "open"  # hvdbench's runs are not closed-division submissions
    status: str = "research"


def option(default, help: str, cli: bool = False, choices: tuple[str, ...] | None = None):
    """A TrainConfig field with its help text: `cli=True` makes it a `hvdbench train --<name>`
    option (hvdbench/train/options.py builds them from these fields); every field can be set with
    `--set name=value` or in a YAML file. `choices` are checked by `validate`."""
    return field(default=default, metadata={"help": help, "cli": cli, "choices": choices})


@dataclass
class TrainConfig:
    model: str = option("", "The model's registered name (the command's MODEL argument).")
    framework: str = option("torch", "Framework of the model's implementation.", cli=True, choices=FRAMEWORKS)
    # The engines are hvdbench/contracts/engines.py's registry (a package may add one), checked by
    # check_ranges rather than as click choices: the registry is read when a run resolves, not when
    # the command line is declared.
    engine: str = option("horovod", "How the ranks train together: horovod (Horovod's DistributedOptimizer), ddp "
                                    "(torch DistributedDataParallel), fsdp (torch FSDP2: parameters, gradients and "
                                    "optimizer state sharded over the ranks), or an engine an installed package "
                                    "registers; ddp/fsdp need --framework torch [default: horovod where Horovod is "
                                    "installed, else ddp].", cli=True)
    fsdp_reshard_after_forward: bool = option(
        True, "--engine fsdp: free each gathered layer's parameters after its forward and gather them again for "
              "backward (FSDP2's reshard_after_forward; --no-fsdp-reshard-after-forward keeps them: less "
              "communication, more memory).", cli=True)
    fsdp_offload: bool = option(False, "--engine fsdp: keep the sharded parameters, gradients and optimizer state "
                                       "in host memory (FSDP2's CPUOffloadPolicy) to fit a larger model.", cli=True)
    flavor: str = option("", "Network size, e.g. full/debug (resnet50), large/base/debug (bert) "
                             "[default: the model's].", cli=True)
    # data: a prepared dataset directory, or one fixed random batch kept on the device
    data: str = option("", "A dataset prepared by `hvdbench prepare`.", cli=True)
    synthetic: bool = option(False, "One fixed random batch kept on the device (takes the data pipeline out).",
                             cli=True)
    synthetic_kind: str = option("", "--synthetic: the dataset kind its batch is drawn as, one the model trains on "
                                      "(bert: bert_packed, MLPerf's packed rows of ~2 sequences, whose run reports "
                                      "sequences/s beside rows/s) [default: the model's first].", cli=True)
    # batch: each optimizer step sees batch_per_gpu x accum_steps x world size samples
    batch_per_gpu: int = option(32, "Samples per rank per micro-batch.", cli=True)
    eval_batch_per_gpu: int = option(0, "Samples per rank per evaluation batch (0: batch_per_gpu).")
    accum_steps: int = option(1, "Micro-batches per optimizer step (gradient accumulation).", cli=True)
    precision: str = option("fp32", "bf16/fp16: autocast (Keras mixed policy); fp16 on CUDA adds loss "
                                    "scaling; fp8 (PyTorch, CUDA compute capability >= 8.9, torchao installed: pip "
                                    "install 'hvdbench[fp8]'): the linear layers in float8, the rest in bf16, MFU "
                                    "against the bf16 peak.", cli=True, choices=PRECISIONS)
    fp16_allreduce: bool = option(False, "Compress gradients to fp16 on the wire.", cli=True)
    # optimizer; lr is the peak rate for a global batch of lr_base_batch, scaled by lr_scaling
    optimizer: str = option("sgd", f"Optimizer: {', '.join(OPTIMIZERS)}, or the one the model brings.")
    lr: float = option(0.1, "Peak learning rate for a global batch of lr_base_batch (scaled).", cli=True)
    lr_base_batch: int = option(256, "Global batch the peak learning rate is given for.")
    lr_scaling: str = option("linear", "How the learning rate grows with the global batch.",
                             choices=LR_SCALINGS)
    warmup_epochs: float = option(0.0, "Linear warm-up of the learning rate, in epochs.")
    end_lr: float = option(0.0001, "Polynomial decay from the peak down to this at the last step.")
    decay_power: float = option(2.0, "Power of the polynomial decay.")
    momentum: float = option(0.9, "SGD momentum.")
    weight_decay: float = option(5e-5, "Weight decay (not on biases and norms).")
    # the levers that close the gap to the hardware on GPUs (each measured on and off by
    # benchmarks/gpu/levers.sh; off by default, which is what wins on CPUs)
    compile: str = option("off", "PyTorch: torch.compile the step's forward and backward in this mode "
                                 "(reduce-overhead: with CUDA graphs; auto: default on a CUDA GPU, off elsewhere, "
                                 "ResNet-50's default); the warm-up covers the compile, whose seconds "
                                 "are recorded apart (compile_s), out of the throughput.", cli=True,
                          choices=COMPILE_MODES)
    fused_optimizer: bool = option(False, "PyTorch: the optimizer's update in fused kernels (torch's fused SGD, Adam, "
                                          "AdamW; LAMB's multi-tensor update compiled into a few).", cli=True)
    attention: str = option("mask", "PyTorch transformers that take it (BERT): mask (SDPA under a boolean mask that "
                                    "keeps a packed row's sequences apart, the reference) or varlen (each sequence "
                                    "attends alone: SDPA over nested tensors, variable-length kernels on GPUs, padding "
                                    "skipped).", cli=True, choices=ATTENTIONS)
    activation_checkpointing: str = option(
        "none", "PyTorch LLMs (llama31_8b, gpt_oss_20b): recompute decoder layers' activations in backward: full "
                "(every layer), selective (every other layer), none.", cli=True, choices=CHECKPOINTINGS)
    loss_chunks: int = option(0, "PyTorch LLMs: the output layer and cross-entropy over the vocabulary in this many "
                                 "pieces of the tokens, each recomputed in backward, so no whole-sequence fp32 "
                                 "logits exist (0 or 1: in one piece).", cli=True)
    channels_last: bool = option(False, "PyTorch: images and activations channels-last (NHWC), and the convolution "
                                        "weights too under ddp (Horovod and FSDP2 refuse non-contiguous gradients "
                                        "or parameters: theirs keep the default layout).", cli=True)
    overlap_copies: bool = option(False, "PyTorch on GPUs: copy each batch to the device on a side stream, so the copy "
                                         "runs while the step before it computes.", cli=True)
    # throughput mode (--steps; also the mode with --synthetic): warm-up steps are not timed
    steps: int = option(0, "Throughput mode: timed steps.", cli=True)
    warmup_steps: int = option(10, "Throughput mode: untimed steps first, at least (default 10); warm-up goes "
                                   "on until step times settle, up to --warmup-max-steps.", cli=True)
    warmup_max_steps: int = option(0, "Throughput mode: the most warm-up steps while step times have not "
                                      "settled (0: 5 x warmup_steps; the count is recorded).", cli=True)
    breakdown: bool = option(True, "Throughput mode: time each step's phases (data, compute, exposed "
                                   "communication, update; PyTorch).", cli=True)
    horovod_timeline: bool = option(False, "Throughput mode: record Horovod's timeline of the timed steps in "
                                   "OUT/timeline.json and summarise it in the record (negotiation and "
                                   "allreduce ms per step, cycles per step, fused MiB per cycle).", cli=True)
    # time-to-accuracy mode (--data without --steps)
    target: float = option(0.0, "Time-to-accuracy target (0: the model's MLPerf target).", cli=True)
    max_epochs: float = option(10.0, "Stop (status aborted) after this many epochs.", cli=True)
    eval_every: float = option(1.0, "Evaluate every N eval_units (epochs; BERT: samples).", cli=True)
    eval_unit: str = option("epochs", "Unit of eval_every.", choices=EVAL_UNITS)
    save_parameters: bool = option(False, "Write the trained parameters, whole, to OUT/parameters.npz (PyTorch; to "
                                          "compare runs, e.g. the same steps under two engines).", cli=True)
    # plumbing
    seed: int = option(0, "Seed of the weights, the shuffling and synthetic batches.", cli=True)
    prefetch: int = option(2, "Batches read ahead by the dataset loader's thread.")
    threads: int = option(0, "CPU math threads per rank (0: cores / local ranks).", cli=True)
    thread_share: int = option(0, "Share a machine's cores as if this many ranks ran on it (0: the ranks that "
                                  "do); a sweep sets the most of any of its layouts, so every layout's ranks get "
                                  "the same threads.", cli=True)
    out: str = option("", "Directory for result.json, mllog.txt, config.yaml.", cli=True)
    run_id: str = option("", "Label for the result record (default: time + random).", cli=True)
    sweep_name: str = option("", "Sweep this run belongs to (recorded).", cli=True)
    repeat: int = option(0, "Repeat index within the sweep (recorded).", cli=True)
    submission: SubmissionConfig = field(default_factory=SubmissionConfig,
                                         metadata={"help": "MLPerf submission fields of the event log."})

    @property
    def mode(self) -> str:
        return "throughput" if self.synthetic or self.steps > 0 else "time_to_accuracy"

    @property
    def dataset(self) -> str:
        """runs.csv's `dataset`: the folder, or "synthetic" (with its kind where --synthetic-kind named one)."""
        return self.data or " ".join(filter(None, ("synthetic", self.synthetic_kind)))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# --- strict loading --------------------------------------------------------------------------

def from_dict(data: Any, cls=TrainConfig, base=None, where: str = "config", prefix: str = ""):
    """A `cls` instance: `base` (or the defaults) with `data`'s keys applied, checked strictly.

    Nested dataclass fields merge key by key, so `{"submission": {"org": "x"}}` keeps the other
    submission fields. Errors read "<where>: key 'submission.org' must be a string, got 3".
    """
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: {prefix.rstrip('.') or 'config'} must be a mapping, "
                          f"got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    out = base if base is not None else cls()
    values = {f.name: getattr(out, f.name) for f in fields(cls)}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if key not in values:
            raise ConfigError(f"{where}: unknown key {name!r} (valid: {', '.join(sorted(values))})")
        hint = hints[key]
        if dataclasses.is_dataclass(hint):
            values[key] = from_dict(value, hint, values[key], where, prefix=f"{name}.")
        else:
            values[key] = _check_type(where, name, value, hint)
    return cls(**values)


def _check_type(where: str, name: str, value: Any, hint) -> Any:
    if hint is bool:
        ok = isinstance(value, bool)
    elif hint is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif hint is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        value = float(value) if ok else value
    elif hint is str:
        ok = isinstance(value, str)
    else:  # a programming error in the dataclass, said clearly
        raise ConfigError(f"{where}: key {name!r} has unsupported type {hint}")
    if not ok:
        expected = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}[hint]
        raise ConfigError(f"{where}: key {name!r} must be {expected}, got {quote(value)}")
    return value


# What a YAML config (a run file, a sweep config, a study file, a --set value) may be: far more than
# any real one, far less than what would exhaust the machine. An alias repeats a node without
# copying it, so nine aliases of nine aliases of a list ("billion laughs") load in kilobytes and
# expand to gigabytes the moment anything walks them: the expanded size is what is bounded.
MAX_YAML_BYTES = 1 << 20
MAX_YAML_DEPTH = 64
MAX_YAML_NODES = 100_000


def quote(value: Any, limit: int = 60) -> str:
    """repr(value) cut to `limit` characters: an error line quotes a value, never all of it."""
    short = reprlib.Repr()
    short.maxstring = short.maxother = limit
    short.maxlist = short.maxdict = 6
    short.maxlevel = 3
    text = short.repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def parse_yaml(text: str, where: str) -> Any:
    """The value of a YAML text, bounded in size, nesting and expansion; ConfigError naming `where`."""
    import yaml

    if len(text) > MAX_YAML_BYTES:
        raise ConfigError(f"{where}: {len(text):,} characters; a YAML config is at most {MAX_YAML_BYTES:,}")

    class Bounded(yaml.SafeLoader):
        depth = 0

        def compose_node(self, parent, index):
            self.depth += 1
            if self.depth > MAX_YAML_DEPTH:
                mark = self.peek_event().start_mark
                raise ConfigError(f"{where}: nested deeper than {MAX_YAML_DEPTH} levels (line {mark.line + 1})")
            try:
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

    loader = None
    try:
        loader = Bounded(text)  # refuses a control character at once (a ReaderError)
        node = loader.get_single_node()
        if node is not None and _expanded_nodes(node, {}) > MAX_YAML_NODES:
            raise ConfigError(f"{where}: its aliases (*name) expand to more than {MAX_YAML_NODES:,} values")
        return loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark else ""
        raise ConfigError(f"{where}: not valid YAML{at}") from None
    finally:
        if loader is not None:
            loader.dispose()


def _expanded_nodes(node, memo: dict) -> int:
    """How many values the node holds once every alias is expanded (each node counted once per
    place it appears; computed once per node, so a billion-laughs graph costs a few hundred steps)."""
    import yaml

    if id(node) not in memo:
        if isinstance(node, yaml.SequenceNode):
            memo[id(node)] = 1 + sum(_expanded_nodes(child, memo) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            memo[id(node)] = 1 + sum(_expanded_nodes(k, memo) + _expanded_nodes(v, memo) for k, v in node.value)
        else:
            memo[id(node)] = 1
    return memo[id(node)]


def load_yaml(path: str | Path) -> dict:
    """The mapping in a YAML run file; ConfigError naming the file when it is missing, malformed
    or too large (see parse_yaml)."""
    path = Path(path)
    if path.exists() and not path.is_file():  # a folder, a FIFO or /dev/zero
        raise ConfigError(f"{path}: not a regular file (expected a YAML config file)")
    try:
        if path.stat().st_size > MAX_YAML_BYTES:
            raise ConfigError(f"{path}: {path.stat().st_size:,} bytes; a YAML config is at most {MAX_YAML_BYTES:,}")
        data = parse_yaml(path.read_text(), str(path))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not a YAML text file (byte {e.start} is not UTF-8)") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of config keys, got {type(data).__name__}")
    return data


def save_yaml(path: str | Path, cfg: TrainConfig) -> None:
    import yaml

    from hvdbench.files import atomic_write_text

    atomic_write_text(Path(path), yaml.safe_dump(cfg.to_dict(), sort_keys=False))


# --- resolution against the model spec -------------------------------------------------------

def spec_defaults(spec, flavor: str) -> dict:
    """The spec's defaults for `flavor`: top-level keys, then the flavor's own overrides."""
    flat = {k: v for k, v in spec.defaults.items() if k not in spec.flavors}
    flat.update(spec.defaults.get(flavor, {}))
    return flat


def levers_text(cfg: TrainConfig) -> str:
    """The levers `cfg` sets apart from its model's defaults, as runs.csv's `levers` column (part of
    a run's identity, as its engine and precision are): "compile=default;channels_last", "" for none.
    Against the model's defaults, so a plain ResNet-50 run (compile auto, its default) has none."""
    from hvdbench.contracts import get_spec

    base = {name: TrainConfig.__dataclass_fields__[name].default for name in LEVERS}
    base.update({k: v for k, v in spec_defaults(get_spec(cfg.model), cfg.flavor).items() if k in LEVERS})
    parts = []
    for name in LEVERS:
        value = getattr(cfg, name)
        if value != base[name]:
            parts.append(name if value is True else f"{name}=off" if value is False else f"{name}={value}")
    return ";".join(parts)


def resolve(overrides: dict, config_file: str | Path | None = None, layout: dict | None = None,
            env: Mapping[str, str] = os.environ) -> TrainConfig:
    """The run's TrainConfig: field defaults < model spec defaults < YAML file < `overrides`.

    `overrides` are the command-line options the user gave (None values are ignored); `layout`,
    in place of a file, the settings a sweep writes to a run's layout.yaml (hvdbench.train.options
    resolves a planned run with it); `env`, the environment the run's ranks will have (default
    this process's: a sweep passes its own with its --env). Every check that does not need a
    framework or the dataset happens here, so all ranks fail the same way.
    """
    from hvdbench.contracts import get_spec

    overrides = {k: v for k, v in overrides.items() if v is not None}
    if type(overrides.get("steps")) is int and overrides["steps"] == 0:  # (not False: a type error below)
        # 0 is the field's "not given" (time-to-accuracy with --data, 100 steps with --synthetic),
        # so a 0 the user typed would silently mean something else: refuse it.
        raise ConfigError("--steps 0: give at least 1 timed step, or leave --steps out (time-to-accuracy "
                          "with --data; 100 steps with --synthetic)")
    if layout is not None:
        file_values, file_where = dict(layout), "the layout"
    else:
        file_values, file_where = (load_yaml(config_file) if config_file else {}), str(config_file)
    model = overrides.get("model") or file_values.get("model")
    if not model:
        raise ConfigError("no model given (e.g. `hvdbench train resnet50 ...`)")
    spec = get_spec(model)
    flavor = overrides.get("flavor") or file_values.get("flavor") or spec.default_flavor
    spec.flavor(flavor)  # unknown flavor: ConfigError listing the valid ones

    defaults = spec_defaults(spec, flavor)
    cfg = from_dict(defaults, where=f"model {model} defaults")
    cfg = from_dict(file_values, base=cfg, where=file_where)
    cfg = from_dict(overrides, base=cfg, where="options")
    cfg = dataclasses.replace(cfg, model=model, flavor=flavor)
    if not any("engine" in given for given in (defaults, file_values, overrides)):
        cfg.engine = default_engine(cfg.framework)  # horovod where Horovod is installed, else ddp
    if cfg.synthetic and cfg.steps == 0:
        cfg.steps = 100  # synthetic data has no epochs, so it can only measure throughput
    # Options given on the command line for the other mode are a mistake (a YAML file, e.g. a saved
    # config.yaml, may carry every key).
    mixed = sorted(k for k in ("target", "max_epochs", "eval_every") if k in overrides)
    if cfg.mode != "throughput" and cfg.horovod_timeline:
        raise ConfigError("--horovod-timeline records the timed steps of a throughput run (--steps or --synthetic)")
    if cfg.mode == "throughput" and mixed:
        raise ConfigError(f"{', '.join(mixed)} belong to time-to-accuracy runs (--data without --steps); "
                          f"this is a throughput run ({'--synthetic' if cfg.synthetic else '--steps'})")
    if cfg.target == 0.0:
        cfg.target = spec.target(flavor)
    if cfg.eval_batch_per_gpu == 0:
        cfg.eval_batch_per_gpu = cfg.batch_per_gpu
    validate(cfg, spec, env)
    return cfg


MAX_COUNT = 2**31 - 1  # the largest whole-number option (steps, chunks, batch, seeds): a signed 32-bit int


def check_ranges(cfg: TrainConfig) -> None:
    """The limits of single keys, whatever the rest of the run (also checked on a sweep config's
    layout settings when it is loaded): ConfigError naming the key and the value."""
    import math

    for f in fields(TrainConfig):
        valid = f.metadata.get("choices")
        if valid and getattr(cfg, f.name) not in valid:
            raise ConfigError(f"{f.name} {getattr(cfg, f.name)!r} is not one of {', '.join(valid)}")
    from hvdbench.contracts.engines import get_engine  # (as get_spec: hvdbench.contracts loads numpy)

    get_engine(cfg.engine)  # "engine 'zero3' is not one of horovod, ddp, fsdp"
    for key in ("batch_per_gpu", "eval_batch_per_gpu", "accum_steps", "lr_base_batch"):
        if getattr(cfg, key) < 1 and not (key == "eval_batch_per_gpu" and cfg.eval_batch_per_gpu == 0):
            raise ConfigError(f"{key} must be at least 1, got {getattr(cfg, key)}")
    for key in ("steps", "warmup_steps", "warmup_max_steps", "loss_chunks", "repeat", "threads", "thread_share",
                "prefetch"):
        if getattr(cfg, key) < 0:
            raise ConfigError(f"{key} must not be negative, got {getattr(cfg, key)}")
    for f in fields(TrainConfig):  # a count past 32 bits is no run's, and overflows where torch takes it
        value = getattr(cfg, f.name)
        if isinstance(value, int) and not isinstance(value, bool) and value > MAX_COUNT:
            raise ConfigError(f"{f.name} must be at most {MAX_COUNT}, got {value}")
    for f in fields(TrainConfig):  # nan and inf pass every comparison below but mean nothing
        value = getattr(cfg, f.name)
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{f.name} must be a finite number, got {value}")
    if not cfg.lr > 0:
        raise ConfigError(f"lr must be > 0, got {cfg.lr}")
    for key in ("end_lr", "warmup_epochs", "weight_decay"):
        if getattr(cfg, key) < 0:
            raise ConfigError(f"{key} must be >= 0, got {getattr(cfg, key)}")


def validate(cfg: TrainConfig, spec, env: Mapping[str, str] = os.environ) -> None:
    def choice(key, value, valid):
        if value not in valid:
            raise ConfigError(f"{key} {quote(value)} is not one of {', '.join(valid)}")

    check_ranges(cfg)  # the choices and limits of single keys
    # The model's own reason first (ModelSpec.refuse): a model that cannot run as configured (a
    # spec-only entry, a 70B base under a replica per rank) says why before any other complaint.
    reason = spec.refuse(cfg, env) if spec.refuse else None
    if reason:
        raise ConfigError(reason)
    if cfg.framework not in spec.frameworks:
        raise ConfigError(f"model {spec.name} has no {cfg.framework} implementation "
                          f"(frameworks: {', '.join(spec.frameworks)})")
    # A model folder may implement its reference's own optimizer (make_optimizer), named as its default.
    choice("optimizer", cfg.optimizer, tuple(dict.fromkeys([*OPTIMIZERS, spec.defaults.get("optimizer", "sgd")])))
    choice("submission.division", cfg.submission.division, DIVISIONS)
    choice("submission.status", cfg.submission.status, SUBMISSION_STATUSES)
    if bool(cfg.data) == cfg.synthetic:
        raise ConfigError("give exactly one of --data DIR and --synthetic")
    if cfg.synthetic_kind:
        if not cfg.synthetic:
            raise ConfigError("--synthetic-kind is the kind of --synthetic's batch; with --data the dataset's own "
                              "kind is used")
        try:
            spec.kind(cfg.synthetic_kind)
        except ConfigError as e:
            raise ConfigError(f"--synthetic-kind: {e}") from None
    if cfg.mode == "time_to_accuracy":
        spec.metric.check_target(cfg.target)
        if cfg.max_epochs <= 0 or cfg.eval_every <= 0:
            raise ConfigError("max_epochs and eval_every must be > 0")
        if cfg.eval_unit == "epochs" and cfg.eval_every != int(cfg.eval_every):
            raise ConfigError(f"eval_every is in whole epochs for {spec.name}, got {cfg.eval_every}")
    if not cfg.out:
        raise ConfigError("no output directory given (--out DIR)")
    if cfg.run_id and not re.fullmatch(r"[A-Za-z0-9_.:-]{1,128}", cfg.run_id):
        raise ConfigError(f"run_id {cfg.run_id!r}: use letters, digits and _.:- only")
    check_engine(cfg)
    if cfg.precision == "fp8" and cfg.framework != "torch":
        raise ConfigError(f"--precision fp8: float8 linears are PyTorch's (torchao); --framework {cfg.framework} "
                          "has bf16 and fp16")
    if cfg.save_parameters and cfg.framework != "torch":
        raise ConfigError("--save-parameters is implemented for --framework torch")
    levers = [name for name in LEVERS if getattr(cfg, name) != TrainConfig.__dataclass_fields__[name].default
              and not (name == "compile" and cfg.compile == "auto")]  # auto: nothing where nothing compiles
    if levers and cfg.framework != "torch":
        raise ConfigError(f"{', '.join(levers)}: levers of the PyTorch trainer; --framework {cfg.framework} has none")
    # Here, not only when the network is built: a sweep refuses them before launching any run.
    if any(getattr(cfg, name) != TrainConfig.__dataclass_fields__[name].default for name in BUILD_OPTIONS):
        refused = undeclared_option(cfg, spec.build_parameters(cfg.framework))
        if refused:
            raise ConfigError(refused)
    if cfg.compile == "reduce-overhead" and cfg.attention == "varlen":
        raise ConfigError("--compile reduce-overhead replays the step's kernels as CUDA graphs, which needs a static "
                          "step; --attention varlen's sizes change with every batch (--attention mask is static)")


# TrainConfig fields some engines take and the others refuse (Engine.options says which engine takes
# which): the refusal, with {engine} the run's engine and {owners} the engines that take the field.
ENGINE_OPTIONS = {
    "fsdp_offload": "fsdp_offload needs --engine {owners}",
    "fsdp_reshard_after_forward": "--no-fsdp-reshard-after-forward: FSDP2's option; --engine {engine} does not shard",
    "horovod_timeline": "--horovod-timeline records Horovod's own timeline; --engine {engine} has none",
}


def check_engine(cfg: TrainConfig) -> None:
    """The engine implements the run's framework, and no option of another engine is set
    (ENGINE_OPTIONS): ConfigError in one line."""
    from hvdbench.contracts.engines import engines, get_engine

    engine = get_engine(cfg.engine)
    if cfg.framework not in engine.frameworks:
        able = " or ".join(e.name for e in engines() if cfg.framework in e.frameworks)
        raise ConfigError(f"--engine {engine.name} is {' and '.join(FRAMEWORK_NAMES[f] for f in engine.frameworks)}'s; "
                          f"{cfg.framework} models train under --engine {able}")
    defaults = TrainConfig.__dataclass_fields__
    for name, refusal in ENGINE_OPTIONS.items():
        if getattr(cfg, name) != defaults[name].default and name not in engine.options:
            owners = " or ".join(e.name for e in engines() if name in e.options)
            raise ConfigError(refusal.format(engine=engine.name, owners=owners))


# --- NxGxBxA names ---------------------------------------------------------------------------

_RUN_NAME = re.compile(r"^([1-9][0-9]*)x([1-9][0-9]*)x([1-9][0-9]*)x([1-9][0-9]*)$")


def run_name(nodes: int, gpus_per_node: int, batch_per_gpu: int, accum_steps: int) -> str:
    """The per-layout config name used in launch/ (NODESxGPUSxBATCHxACCUM), e.g. '2x8x256x1'."""
    return f"{Layout(nodes, gpus_per_node)}x{batch_per_gpu}x{accum_steps}"


def parse_run_name(name: str) -> tuple[int, int, int, int]:
    m = _RUN_NAME.match(name)
    if not m:
        raise ConfigError(f"{name!r} is not NODESxGPUSxBATCHxACCUM (e.g. 2x8x256x1)")
    return tuple(int(g) for g in m.groups())  # type: ignore[return-value]
