"""FLOPs per sample of a model's training step, counted from the network itself.

    fl = count(spec, "full")                    # ResNet-50 at 224: forward 8.18e9, training 24.5e9
    fl = count_once(spec, "debug", info, kind)  # a run's count: made once per network, code and versions
    fl.forward, fl.training, fl.formula          # per sample; formula: 6N + attention (transformers)
    hvdbench bench flops                         # the table for every model and flavor

The network is built on the meta device (no weights are allocated: Llama 3.1 8B and gpt-oss-20b
are counted on a laptop) and one batch of the dataset kind's synthetic samples goes through the
folder's own `loss_and_stats` and backward under `torch.utils.flop_counter.FlopCounterMode`
(Lightning's and Composer's counter: a multiply-add counts 2 FLOPs; matrix products, convolutions
and attention kernels are counted, elementwise ops are not). These are *model* FLOPs: activation
recompute is not counted. Training = forward + backward as counted; the backward of the first
layer computes no input gradient, so training comes out a little under 3 x forward (ResNet-50:
2.97x), which is what MLPerf-style "3 x forward" conventions approximate.

A network whose forward needs the data's values (detection's box matching and NMS read tensors on
the host) cannot run on the meta device: its counts are None, and the run's TFLOP/s and MFU stay
empty rather than guessed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import importlib.metadata
import inspect
import logging
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils.flop_counter import FlopCounterMode, flop_registry, register_flop_formula

from hvdbench.bench.flops_report import FLOPS_COLUMNS
from hvdbench.contracts import get_spec
from hvdbench.contracts.registry import model_names
from hvdbench.errors import ConfigError
from hvdbench.files import cached_json
from hvdbench.frameworks.torch.hooks import TorchHooks

# Samples per counted batch: enough that per-sample figures do not hinge on batch-1 shapes; on the
# meta device the batch costs nothing.
COUNT_BATCH = 2

# Names a flavor's dataclass gives its transformer sizes (the formula's inputs), first found wins.
_LAYERS = ("n_layers", "num_layers", "layers", "depth", "num_hidden_layers")
_WIDTH = ("dim", "hidden", "hidden_size", "d_model", "width")
_TOKENS = ("seq_len", "max_seq_len", "seq_length", "max_len", "context")
_HEADS, _HEAD_DIM = ("heads", "num_heads", "n_heads"), ("head_dim",)
_EXPERTS, _TOP_K = ("experts", "num_experts", "n_experts"), ("top_k", "experts_per_token")


def _grouped_mm_flops(a_shape, b_shape, *args, out_shape=None, **kwargs) -> int:
    """FLOPs of torch._grouped_mm (a mixture of experts' per-expert products, which torch's counter
    does not know): 2 x every output element x the contracted length; when both operands are 2-D the
    groups split the contracted dimension (a weight gradient), so each output element sees 1/G of it."""
    total = 2 * math.prod(out_shape) * a_shape[-1]
    return total // out_shape[0] if len(a_shape) == 2 and len(b_shape) == 2 else total


# 2.11.0, 2.13.0 and 2.15.0 all have the op and no formula for it (so all register this one); a torch
# that brings its own formula keeps it, and one without the op has nothing to count.
if hasattr(torch.ops.aten, "_grouped_mm") and torch.ops.aten._grouped_mm not in flop_registry:
    register_flop_formula(torch.ops.aten._grouped_mm)(_grouped_mm_flops)


@dataclass(frozen=True)
class Flops:
    forward: float | None  # FLOPs per sample, forward pass
    training: float | None  # forward + backward per sample
    formula: float | None = None  # 6N + 12 L d T per sample (transformers), None elsewhere
    tokens: int | None = None  # tokens per sample the formula used
    note: str = ""

    @property
    def ratio(self) -> float | None:
        """counted training / formula."""
        return self.training / self.formula if self.training and self.formula else None


def transformer_formula(parameters: float, layers: int, width: int, tokens: int, causal_halved: bool = False,
                        embedding: float = 0, frozen: float = 0) -> float:
    """Training FLOPs per sample of `tokens` tokens: 6 x (N - embedding) per token (forward 2N,
    backward 4N: gradients of the activations and of the weights) plus attention's 12 x L x d x T per
    token (QK^T and AV, forward and backward), not halved for a causal mask (torchtitan, NeMo;
    Megatron since 2025 halves it: causal_halved). `frozen` parameters (a LoRA base) cost 4 per
    token: no weight gradient."""
    attention = 12 * layers * width * tokens * (0.5 if causal_halved else 1.0)
    return tokens * (6 * (parameters - embedding) + 4 * frozen + attention)


def _first(obj, names):
    for name in names:
        value = getattr(obj, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def _build_kwargs(build, info: dict) -> dict:
    declared = inspect.signature(build).parameters
    extra = {name: value for name, value in (("rank", 0), ("world", 1)) if name in declared}
    return {**info, **extra}


def _step_flops(hooks, model, data: dict, amp) -> tuple[float, float]:
    """(forward, backward) FLOPs of one step of `loss_and_stats` on `data`."""
    model.train()
    with FlopCounterMode(display=False) as fwd:
        with amp:
            loss, _ = hooks.loss_and_stats(model, data)
    with FlopCounterMode(display=False) as bwd:
        loss.backward()
    return fwd.get_total_flops(), bwd.get_total_flops()


def _on_meta(hooks, flavor_cfg, info, batch: dict, amp):
    """Built on the meta device (no weights allocated); the batch as fake tensors over meta ones, so
    libraries that skip value checks while tracing (transformers' packed-sequence check) skip them.
    The bf16 try casts the weights as well: the meta kernel of grouped matrix products (gpt-oss's
    experts) takes bf16 only, and autocast does not reach it."""
    with torch.device("meta"):
        model = hooks.build(flavor_cfg, **_build_kwargs(hooks.build, info))
    if not isinstance(amp, contextlib.nullcontext):
        model = model.to(torch.bfloat16)
    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        data = {k: mode.from_tensor(v.to("meta")) for k, v in batch.items()}
        if hooks.on_device:
            data = hooks.on_device(data, torch.device("meta"))
        return model, _step_flops(hooks, model, data, amp)


def _faked(hooks, flavor_cfg, info, batch: dict, amp):
    """Built and run under FakeTensorMode on a fake CPU (no storage either): for networks that make a
    torch.Generator on their parameters' device, which the meta device refuses."""
    overwrite = torch.__future__.get_overwrite_module_params_on_conversion()
    torch.__future__.set_overwrite_module_params_on_conversion(True)  # .to(dtype) of fake parameters
    try:
        with FakeTensorMode(allow_non_fake_inputs=True) as mode:
            model = hooks.build(flavor_cfg, **_build_kwargs(hooks.build, info))
            data = {k: mode.from_tensor(v) for k, v in batch.items()}
            if hooks.on_device:
                data = hooks.on_device(data, torch.device("cpu"))
            return model, _step_flops(hooks, model, data, amp)
    finally:
        torch.__future__.set_overwrite_module_params_on_conversion(overwrite)


def _real(hooks, flavor_cfg, info, batch: dict, amp):
    """Built and run for real on the CPU, one sample (the RNG restored after): for networks whose
    forward reads the data's values (translation trims to the longest sentence; detection matches
    boxes), only where the flavor is small enough (CPU_COUNT_PARAMETERS)."""
    state = torch.get_rng_state()
    try:
        model = hooks.build(flavor_cfg, **_build_kwargs(hooks.build, info))
        data = {k: v[:1] for k, v in batch.items()}
        if hooks.on_device:
            data = hooks.on_device(data, torch.device("cpu"))
        return model, _step_flops(hooks, model, data, amp)
    finally:
        torch.set_rng_state(state)


# The most parameters a flavor may have to be counted for real on the CPU when neither the meta
# device nor fake tensors can run it (a few GB and seconds; the full detection and translation
# networks are below it, the LLMs are counted on the meta device).
CPU_COUNT_PARAMETERS = 300_000_000


def count(spec, flavor: str | None = None, info: dict | None = None, batch: int = COUNT_BATCH,
          kind=None) -> Flops:
    """Per-sample FLOPs of `spec`'s flavor (see the module's docstring) built for `info` (a dataset's
    info keys; default: the flavor's synthetic sizes) on samples of `kind` (default: its first), with the transformer formula beside where the
    flavor names its layers, width and tokens. Tried on the meta device, then on fake tensors, then
    for real on the CPU (one sample, small flavors only); in fp32, then under bf16 autocast (a network
    whose kernels take bf16 only: gpt-oss's grouped experts)."""
    flavor_cfg = spec.flavor(flavor)
    if getattr(flavor_cfg, "gradient_checkpointing", False):
        # Model FLOPs, not hardware FLOPs: activation recompute (a second forward inside backward)
        # is the run's cost, not the model's (torchtitan and MLPerf count without it).
        flavor_cfg = dataclasses.replace(flavor_cfg, gradient_checkpointing=False)
    hooks = TorchHooks.of(spec.framework_module("torch"))
    info = info if info is not None else spec.synthetic_info(flavor_cfg)
    # A run's data may be another of the model's kinds than its first (Flux.1's and Stable
    # Diffusion's debug flavors train on images, their full flavors on latents): the run names it.
    kind = kind if kind is not None else spec.kinds[0]
    try:
        samples = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in
                   kind.synthetic(batch, info, np.random.default_rng(0)).items()}
    except Exception as e:  # noqa: BLE001 - a count never fails a run: its figures stay empty, saying why
        return Flops(None, None, note=f"not countable: no {kind.name} samples for these sizes "
                                      f"({type(e).__name__}: {(str(e).splitlines() or [''])[0][:100]})")
    try:
        with torch.device("meta"):  # the skeleton: parameter counts and the formula's sizes, nothing allocated
            skeleton = hooks.build(flavor_cfg, **_build_kwargs(hooks.build, info))
    except Exception as e:  # noqa: BLE001 - a count never fails a run: its figures stay empty, saying why
        return Flops(None, None, note=f"not countable: the network does not build on the meta device "
                                      f"({type(e).__name__}: {(str(e).splitlines() or [''])[0][:100]})")
    trained = sum(p.numel() for p in skeleton.parameters() if p.requires_grad)
    frozen = sum(p.numel() for p in skeleton.parameters() if not p.requires_grad)
    ways = [("meta", _on_meta), ("fake", _faked)] + ([("cpu", _real)] if trained + frozen <= CPU_COUNT_PARAMETERS else [])
    found, failures, per = None, [], batch
    # Fake tensors log every op they cannot run before raising it; the failure is in the note.
    fake_log = logging.getLogger("torch._subclasses.fake_tensor")
    level = fake_log.level
    fake_log.setLevel(logging.CRITICAL)
    try:
        for where, way in ways:
            for amp in (contextlib.nullcontext(), torch.autocast("cpu", dtype=torch.bfloat16)):
                try:
                    _, found = way(hooks, flavor_cfg, info, samples, amp)
                    per = 1 if where == "cpu" else batch
                    break
                except Exception as e:  # noqa: BLE001 - the next way; all failing is reported below
                    failures.append(f"{where}: {type(e).__name__}: {(str(e).splitlines() or [''])[0][:100]}")
            if found:
                break
    finally:
        fake_log.setLevel(level)
    note = ("counted on the CPU, one sample" if found and per == 1 else "") if found else (
        "not countable: " + "; ".join(dict.fromkeys(failures[::2])))  # each way's fp32 failure
    forward, training = (found[0] / per, (found[0] + found[1]) / per) if found else (None, None)
    layers, width, tokens = (_first(flavor_cfg, _LAYERS), _first(flavor_cfg, _WIDTH), _first(flavor_cfg, _TOKENS))
    formula = None
    if layers and width and tokens and _first(flavor_cfg, _HEADS):  # attention heads: a transformer
        embeddings = [m.weight for m in skeleton.modules() if isinstance(m, torch.nn.Embedding)]
        heads, head_dim = _first(flavor_cfg, _HEADS), _first(flavor_cfg, _HEAD_DIM)
        attention_width = heads * head_dim if heads and head_dim else width  # q heads x head dim (torchtitan)
        experts, top_k = _first(flavor_cfg, _EXPERTS), _first(flavor_cfg, _TOP_K)
        active = {True: float(trained), False: float(frozen)}  # parameters a token passes, by requires_grad
        for emb in embeddings:  # a lookup, no multiply-adds
            active[emb.requires_grad] -= emb.numel()
        if experts and top_k:  # a mixture of experts: a token passes top_k of the experts (active parameters)
            for name, p in skeleton.named_parameters():
                if ".experts." in f".{name}.":
                    active[p.requires_grad] -= p.numel() * (1 - top_k / experts)
        formula = transformer_formula(active[True], layers, attention_width, tokens, frozen=active[False])
    return Flops(forward or None, training or None, formula, tokens if formula else None, note)


# The libraries a network is built from: a count is made again when any of them changes.
_LIBRARIES = ("torch", "torchvision", "transformers", "diffusers", "peft")


@functools.cache
def _code_version() -> dict:
    """What a count depends on besides its inputs: hvdbench's own source (every .py of the package,
    hashed: a changed network is counted again) and the libraries' versions."""
    root = Path(__file__).resolve().parents[2]
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(path.read_bytes())
    versions = {}
    for name in _LIBRARIES:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            versions[name] = importlib.metadata.version(name)
    return {"hvdbench_source": digest.hexdigest(), **versions}


def count_once(spec, flavor: str | None, info: dict | None = None, kind=None) -> Flops:
    """count(spec, flavor, info, kind=kind), made once and kept in the user's cache
    (hvdbench.files.cached_json, folder flops/) for every later run of the same network on the same
    data sizes, code and library versions: a sweep's launches and repeats count once, not each (a
    count is ~2 CPU-seconds for a debug flavor, 10 for Llama 2 LoRA's, before the run's first step)."""
    kind = kind if kind is not None else spec.kinds[0]
    key = {"model": spec.name, "flavor": flavor, "config": repr(spec.flavor(flavor)), "info": info,
           "kind": kind.name, "batch": COUNT_BATCH, **_code_version()}
    return Flops(**cached_json("flops", key, lambda: dataclasses.asdict(count(spec, flavor, info, kind=kind))))


# --- the rows of `hvdbench bench flops` (its table and CSV: hvdbench.bench.flops_report) ---------



def flops_rows(models=(), flavors=()) -> list[dict]:
    """One row per model (every registered model with a PyTorch network, or `models`) and flavor
    (all, or those in `flavors`: of every model, the models that have one of them); an unknown model,
    a flavor a named model lacks, or flavors no model has are a ConfigError naming them."""
    models, flavors = list(dict.fromkeys(models)), list(dict.fromkeys(flavors))  # a repeat counts once
    torch_models = [n for n in model_names() if "torch" in get_spec(n).frameworks]
    unknown = [f for f in flavors if not any(f in get_spec(n).flavors for n in models or torch_models)]
    if unknown and not models:  # (a named model's own error below lists its flavors)
        raise ConfigError(f"no model has flavor {', '.join(unknown)}")
    names = models or [n for n in torch_models if not flavors or set(flavors) & set(get_spec(n).flavors)]
    rows = []
    for name in names:
        spec = get_spec(name)
        chosen = [f for f in spec.flavors if not flavors or f in flavors]
        if flavors and models:
            for f in flavors:
                spec.flavor(f)  # a flavor a named model lacks: its error names the valid ones
        try:
            spec.framework_module("torch")
        except ModuleNotFoundError:  # a spec-only entry (deepseekv3_671b, ...): no network to count
            rows.append({**dict.fromkeys(FLOPS_COLUMNS, ""), "model": name, "note": "spec only: no PyTorch network"})
            continue
        for flavor in chosen:
            fl = count(spec, flavor)
            rows.append({"model": name, "flavor": flavor, "forward_gflop": _g(fl.forward),
                         "training_gflop": _g(fl.training), "formula_gflop": _g(fl.formula),
                         "tokens": fl.tokens or "", "ratio": f"{fl.ratio:.4f}" if fl.ratio else "", "note": fl.note})
    return rows


def _g(value: float | None) -> str:
    return f"{value / 1e9:.6g}" if value else ""
