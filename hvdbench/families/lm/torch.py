"""The language models' shared PyTorch pieces (single-device code; never imports horovod): the
next-token loss over `lm_tokens` batches, the decoder layers as FSDP's and --compile's units,
transformers' initialisation of a meta-built model, parameter groups, and AdamW with the references'
gradient clipping and cosine schedule. Used by hvdbench/models/llama31_8b/torch.py and
gpt_oss_20b/torch.py (their optional functions are these), and for its levers and layers by
llama2_lora/torch.py.

    loss, stats = next_token_loss(model, batch)     # stats {"loss_sum", "count"}: every target token
    checkpoint_layers(model.model.layers, "selective")  # --activation-checkpointing
    model.loss_chunks = 8                           # --loss-chunks: the vocabulary's logits 1/8 at a time
    decoder_layers(model)                           # what fsdp shards and --compile compiles one by one
    groups = param_groups(model, cfg)               # weight decay on matrices only
    opt = make_optimizer(groups, cfg)               # AdamW (0.9, 0.95, 1e-5), clip 1.0, cosine
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

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


def decoder_layers(model) -> list[torch.nn.Module]:
    """A transformers causal LM's decoder layers: the repeated blocks `--engine fsdp` shards one by
    one (then the rest as one unit), and `--compile` compiles one by one in place of the whole step
    (regional compilation: the compile time of one layer, reused by the others of its shape)."""
    return list(model.model.layers)


def hf_init_weights(model) -> None:
    """Fill a transformers model built on the meta device (ModelSpec.build_on_meta) and moved to real
    memory with its own initialisation (`_init_weights`: Llama's normal 0.02 and unit RMSNorm weights,
    gpt-oss's normal of the flavor's init_std and zero expert biases; it also recomputes RoPE's
    frequency buffers, left uninitialised by the move). Built on meta, no module was marked
    initialised; marks are cleared anyway so every weight is drawn."""
    for module in model.modules():
        module.__dict__.pop("_is_hf_initialized", None)
        for p in module.parameters(recurse=False):
            p.__dict__.pop("_is_hf_initialized", None)
    model.initialize_weights()


def checkpoint_layers(layers, mode: str) -> None:
    """--activation-checkpointing: `full` recomputes every decoder layer's activations during
    backward (torch.utils.checkpoint, non-reentrant: each layer keeps only its input), `selective`
    every other layer (torchtitan's layer-level selective checkpointing at frequency 2: half the
    recompute for about half the saving), `none` keeps them all. The layer's forward is wrapped in
    place, so parameter names, FSDP's hooks and a regional compile (which then compiles the
    checkpointed layer, as torchtitan orders them) are unchanged."""
    for i, layer in enumerate(layers):
        if mode == "full" or (mode == "selective" and i % 2 == 1):
            layer.forward = functools.partial(checkpoint, layer.forward, use_reentrant=False)


def _chunk_loss(hidden: torch.Tensor, targets: torch.Tensor, head) -> torch.Tensor:
    return F.cross_entropy(head(hidden).float(), targets, reduction="sum")


def chunked_cross_entropy(hidden: torch.Tensor, targets: torch.Tensor, head, chunks: int) -> torch.Tensor:
    """The summed cross-entropy of `head(hidden)` (the output layer: hidden states to vocabulary
    logits) against `targets`, the tokens taken `chunks` pieces at a time: each piece's logits (and
    their fp32 copy) exist only while its loss is computed, and are recomputed in backward
    (checkpointed), so the whole sequence's fp32 logits never do (Llama's 8,192 tokens x 128,256
    entries: 4.2 GB a sequence). The same sum as one piece, up to the order of the additions."""
    total = None
    for h, t in zip(hidden.flatten(0, -2).chunk(chunks), targets.flatten().chunk(chunks)):
        piece = (checkpoint(_chunk_loss, h, t, head, use_reentrant=False) if torch.is_grad_enabled()
                 else _chunk_loss(h, t, head))
        total = piece if total is None else total + piece
    return total


def next_token_loss(model, batch, **forward) -> tuple[torch.Tensor, dict, object]:
    """Cross-entropy of every next token of the batch's sequences (`tokens`: seq_len + 1 ids; the
    first seq_len are the inputs, the last seq_len the targets); (mean loss, {"loss_sum", "count"},
    the model's output). The whole model's forward runs (an engine that shards it hooks it there).
    A model built with `loss_chunks` > 1 (--loss-chunks) runs its decoder, then the output layer and
    the loss over the vocabulary in that many pieces (chunked_cross_entropy); its output is then the
    decoder's (no logits; router logits when asked for)."""
    tokens = batch["tokens"].long()
    inputs, targets = tokens[:, :-1], tokens[:, 1:]
    chunks = getattr(model, "loss_chunks", 0)
    if chunks > 1:
        output = model.model(input_ids=inputs, use_cache=False, **forward)
        total = chunked_cross_entropy(output.last_hidden_state, targets, model.get_output_embeddings(), chunks)
        count = targets.numel()
        return total / count, {"loss_sum": total.detach(), "count": count}, output
    output = model(input_ids=inputs, use_cache=False, **forward)
    losses = F.cross_entropy(output.logits.flatten(0, 1).float(), targets.flatten(), reduction="none")
    return losses.mean(), {"loss_sum": losses.sum().detach(), "count": losses.numel()}, output


def apply_levers(model, layers, activation_checkpointing: str, loss_chunks: int) -> None:
    """A built model's per-run levers (hvdbench/train/config.py): checkpointing of `layers`, and the
    chunked loss (read by next_token_loss)."""
    checkpoint_layers(layers, activation_checkpointing)
    model.loss_chunks = loss_chunks


def param_groups(model, cfg) -> list[dict]:
    """Weight decay on weight matrices (2-D and more: embeddings, projections, stacked experts), not
    on biases, norms or attention sinks (Megatron's rule, the references'). Each group carries the
    clipping norm and the schedule the optimizer applies (`AdamW`), those of the flavor the model was
    built for (`lm_cfg`, which a build of this family sets)."""
    flavor = model.lm_cfg
    clip, schedule_steps, end_ratio = flavor.grad_clip, flavor.schedule_steps, flavor.end_ratio
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
