"""What the PyTorch model folders' single-device code shares around a reference's recipe (no
Horovod here): a build's first steps, the gradient clipping of their optimizers, and torch's fused
update where the run asks for it (--fused-optimizer).

    from hvdbench.frameworks.torch.recipe import clip_to_groups, flush_denormals, fused, sized

    torch.optim.AdamW(groups, lr=cfg.lr, **fused(cfg))         # fused=True with --fused-optimizer

    def build(cfg, vocab_size=None, max_len=None, **_):
        flush_denormals()                                      # on CPUs only
        cfg = sized(cfg, vocab_size=vocab_size, max_len=max_len)   # a dataset manifest's sizes

    class AdamW(torch.optim.AdamW):
        def step(self, closure=None):
            clip_to_groups(self)                               # the groups' max_grad_norm, if any
            return super().step(closure)
"""

from __future__ import annotations

from dataclasses import replace

import torch


def flush_denormals() -> None:
    """On CPUs, tiny gradients (the softmax of a tied output layer, detection heads) fall into
    denormal floats, which cost ~6x in the backward matmuls (measured:
    hvdbench/models/transformer/README.md): flush them to 0. GPUs are left as they are."""
    if not torch.cuda.is_available():
        torch.set_flush_denormal(True)


def sized(cfg, **sizes: int | None):
    """The flavor (a frozen dataclass) with a dataset manifest's sizes, those given (not None):
    `sized(cfg, vocab_size=32000, seq_len=None)` replaces vocab_size only."""
    return replace(cfg, **{name: int(value) for name, value in sizes.items() if value is not None})


def clip_to_groups(optimizer: torch.optim.Optimizer) -> None:
    """Clips the global norm of the gradients to the largest `max_grad_norm` of the optimizer's
    parameter groups (none, or 0: no clipping), with torch.nn.utils.clip_grad_norm_, which also takes
    FSDP2's sharded (DTensor) gradients. Called first in an optimizer's step: under Horovod the
    DistributedOptimizer subclasses the optimizer and steps after its allreduce, so the clipping sees
    the averaged gradients, as the references' does."""
    limit = max(float(g.get("max_grad_norm", 0.0)) for g in optimizer.param_groups)
    if limit > 0:
        params = [p for g in optimizer.param_groups for p in g["params"] if p.grad is not None]
        if params:
            torch.nn.utils.clip_grad_norm_(params, limit)


def fused(cfg) -> dict:
    """torch's fused update (one kernel family for every tensor, on GPUs and CPUs) for
    --fused-optimizer, as keyword arguments of torch's SGD, Adam and AdamW; without it torch picks its
    multi-tensor (foreach) update on GPUs. The option lives in the parameter groups, so it survives
    Horovod rebuilding the optimizer from them. (A stand-in config without the field: off.)"""
    return {"fused": True} if getattr(cfg, "fused_optimizer", False) else {}
