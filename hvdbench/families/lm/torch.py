"""The language models' shared PyTorch pieces (single-device code; never imports horovod): the
next-token loss over `lm_tokens` batches, parameter groups, and AdamW with the references' gradient
clipping and cosine schedule. Used by hvdbench/models/llama31_8b/torch.py and gpt_oss_20b/torch.py.

    loss, stats = next_token_loss(model, batch)     # stats {"loss_sum", "count"}: every target token
    groups = param_groups(model, cfg)               # weight decay on matrices only
    opt = make_optimizer(groups, cfg)               # AdamW (0.9, 0.95, 1e-5), clip 1.0, cosine
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from hvdbench.errors import ConfigError
from hvdbench.families.lm.recipe import ADAM_BETAS, ADAM_EPS
from hvdbench.frameworks.torch.recipe import clip_to_groups, fused


def build_device():
    """Where a model is built: the device a `with torch.device(...)` around `build` names (meta, for
    a model each rank materialises only a shard of), else the GPU when there is one (an 8B model is
    never staged in host memory), else the CPU."""
    here = torch.empty(0).device
    if here.type == "cpu" and torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    return here


def hf_init_weights(model) -> None:
    """Fill a transformers model built on the meta device and moved to real memory with its own
    initialisation (`_init_weights`, which also recomputes RoPE's frequency buffers, left
    uninitialised by the move). Built on meta, no module was marked initialised; marks are cleared
    anyway so every weight is drawn."""
    for module in model.modules():
        module.__dict__.pop("_is_hf_initialized", None)
        for p in module.parameters(recurse=False):
            p.__dict__.pop("_is_hf_initialized", None)
    model.initialize_weights()


def next_token_loss(model, batch, **forward) -> tuple[torch.Tensor, dict, object]:
    """Cross-entropy of every next token of the batch's sequences (`tokens`: seq_len + 1 ids; the
    first seq_len are the inputs, the last seq_len the targets); (mean loss, {"loss_sum", "count"},
    the model's output). The whole model's forward runs (an engine that shards it hooks it there)."""
    tokens = batch["tokens"].long()
    output = model(input_ids=tokens[:, :-1], use_cache=False, **forward)
    losses = F.cross_entropy(output.logits.flatten(0, 1).float(), tokens[:, 1:].flatten(), reduction="none")
    return losses.mean(), {"loss_sum": losses.sum().detach(), "count": losses.numel()}, output


def param_groups(model, cfg, clip: float, schedule_steps: int, end_ratio: float) -> list[dict]:
    """Weight decay on weight matrices (2-D and more: embeddings, projections, stacked experts), not
    on biases, norms or attention sinks (Megatron's rule, the references'). Each group carries the
    clipping norm and the schedule the optimizer applies (`AdamW`)."""
    decay, rest = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        (decay if p.ndim >= 2 and not name.endswith("bias") else rest).append(p)
    extra = {"max_grad_norm": clip, "schedule_steps": schedule_steps, "end_ratio": end_ratio}
    return [{"params": decay, "weight_decay": cfg.weight_decay, **extra},
            {"params": rest, "weight_decay": 0.0, **extra}]


class AdamW(torch.optim.AdamW):
    """torch's AdamW with the references' gradient clipping and learning-rate shape.

    Clipping: the global norm of the gradients is clipped to the groups' `max_grad_norm` first
    (`torch.nn.utils.clip_grad_norm_`, which also takes FSDP's sharded gradients). Under Horovod the
    DistributedOptimizer subclasses this class, so the clipping sees the averaged gradients.

    Schedule: the references warm up linearly, then decay along a cosine from the peak to
    `end_ratio` x the peak over `schedule_steps` - warm-up steps (MLPerf's llama31_8b and gpt_oss_20b:
    1,200,000 steps, ten times more than they train, so the rate barely moves). hvdbench's shared
    schedule does the warm-up; with `decay_power` 0 it then holds the peak, and this optimizer turns
    the held peak into the cosine: the decay counts from the first step whose rate equals the step's
    before (the warm-up's last step and the next both hand over the peak). The first step of a fresh
    optimizer is not counted: Horovod's broadcast_optimizer_state takes it with zero gradients to
    create the state, before the schedule starts.
    """

    def step(self, closure=None):
        if self.state:  # not the state-creating step of a fresh optimizer
            self._cosine()
        clip_to_groups(self)
        return super().step(closure)

    def _cosine(self) -> None:
        for group in self.param_groups:
            total = group.get("schedule_steps")
            if not total:
                continue
            handed, last = group["lr"], group.get("handed_lr")
            group["handed_lr"] = handed
            steps = group.setdefault("steps_taken", 0)
            group["steps_taken"] = steps + 1
            if last is None or not math.isclose(handed, last, rel_tol=1e-9):
                continue  # still warming up (or the first step): the handed rate stands
            start = group.setdefault("decay_from", steps)  # the first step at the held peak
            done = min(1.0, (steps - start) / max(1, total - start))
            end = group["end_ratio"] * handed
            group["lr"] = end + (handed - end) * 0.5 * (1.0 + math.cos(math.pi * done))


def make_optimizer(groups: list[dict], cfg, betas=ADAM_BETAS, eps: float = ADAM_EPS):
    """The references' AdamW (beta 0.9/0.95, epsilon 1e-5: MLPerf's closed division checks them)."""
    if cfg.optimizer != "adamw":
        raise ConfigError(f"optimizer {cfg.optimizer!r}: the language models train with their reference's adamw")
    return AdamW(groups, lr=cfg.lr, betas=betas, eps=eps, weight_decay=cfg.weight_decay, **fused(cfg))
