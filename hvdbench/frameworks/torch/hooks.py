"""A model folder's torch.py as the PyTorch trainer, its engines and the FLOP count call it: the
functions it must define and the ones it may, each with the default it gets where it does not
(hvdbench/contracts/spec.py's TorchModel says what each does; docs/adding-a-model.md lists them).

    hooks = TorchHooks.of(spec.framework_module("torch"))
    model = hooks.build(flavor_cfg, **info)
    opt = hooks.make_optimizer(hooks.param_groups(model, cfg), cfg)
    for unit in hooks.shard_units(model): fully_shard(unit)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from hvdbench.contracts import engines as registry
from hvdbench.errors import ConfigError
from hvdbench.frameworks.torch.recipe import fused
from hvdbench.frameworks.trainer import hooks_of

# cfg.optimizer -> the optimizer over parameter groups (a model may bring its own: make_optimizer).
OPTIMIZERS = {
    # torch's fused SGD has no rule for FSDP2's sharded (DTensor) parameters (aten._fused_sgd_, torch
    # 2.13): under an engine that shards them SGD keeps its multi-tensor update. Fused Adam and AdamW have one.
    "sgd": lambda groups, cfg: torch.optim.SGD(groups, lr=cfg.lr, momentum=cfg.momentum,
                                               **(fused(cfg) if not registry.get_engine(cfg.engine).shards_state else {})),
    "adamw": lambda groups, cfg: torch.optim.AdamW(groups, lr=cfg.lr, betas=(0.9, 0.999), eps=1e-6, **fused(cfg)),
    "adam": lambda groups, cfg: torch.optim.Adam(groups, lr=cfg.lr, betas=(0.9, 0.999), eps=1e-8, **fused(cfg)),
}


def param_groups(model, cfg) -> list[dict]:
    """No weight decay on biases and BatchNorm/LayerNorm parameters (MLPerf's references); frozen
    parameters (a LoRA base) are left out."""
    params = [p for p in model.parameters() if p.requires_grad]
    return [{"params": [p for p in params if p.ndim > 1], "weight_decay": cfg.weight_decay},
            {"params": [p for p in params if p.ndim <= 1], "weight_decay": 0.0}]


def make_optimizer(groups: list[dict], cfg):
    if cfg.optimizer not in OPTIMIZERS:
        raise ConfigError(f"optimizer {cfg.optimizer!r} has no PyTorch implementation here; "
                          f"valid: {', '.join(OPTIMIZERS)}")
    return OPTIMIZERS[cfg.optimizer](groups, cfg)


def one_unit(model) -> list[torch.nn.Module]:
    """No repeated blocks: fsdp shards the model as one unit (the root)."""
    return []


def reset_each(model) -> None:
    """A model built on the meta device, moved to real memory: each module's own reset_parameters()."""
    for m in model.modules():
        if hasattr(m, "reset_parameters"):
            m.reset_parameters()


@dataclass(frozen=True)
class TorchHooks:
    build: Callable  # (flavor_cfg, **info) -> torch.nn.Module
    loss_and_stats: Callable  # (model, batch) -> (loss, stats)
    # (batch, device) -> batch: preprocessing after the copy to the device; None: none
    on_device: Callable | None = None
    param_groups: Callable = param_groups  # (model, cfg) -> [{"params": ..., options}]
    make_optimizer: Callable = make_optimizer  # (groups, cfg) -> torch.optim.Optimizer
    shard_units: Callable = one_unit  # model -> the blocks --engine fsdp shards one by one
    # model -> the blocks --compile compiles one by one (regional); None: the whole step
    compile_units: Callable | None = None
    init_weights: Callable = reset_each  # model -> None: fills a meta-built model (ModelSpec.build_on_meta)

    @classmethod
    def of(cls, module) -> TorchHooks:
        """The functions `module` (a model folder's torch.py) defines, the defaults for the rest."""
        return hooks_of(cls, module)
