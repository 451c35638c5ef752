"""gpt-oss pre-training, single-device PyTorch code (transformers' GptOss built from a config).

    from hvdbench.contracts import get_spec
    from hvdbench.models.gpt_oss_20b import torch as oss
    model = oss.build(get_spec("gpt_oss_20b").flavor("debug"), vocab_size=2048, seq_len=256)
    loss, stats = oss.loss_and_stats(model, {"tokens": tokens})   # evaluating: + {"expert_tokens", "top_k"}
    with torch.device("meta"):
        full = oss.build(get_spec("gpt_oss_20b").flavor("full"))  # 20,495,244,864 parameters

The network is transformers' `GptOssForCausalLM` from a `GptOssConfig` (no download, no weights):
per layer, attention with learnt sinks (a 128-token sliding window on every other layer) and a
mixture of experts (a linear router with bias, softmax over its top k scores; experts with biases and
gpt-oss's clamped SwiGLU, through transformers' grouped matmuls where PyTorch has them). Attention
runs eagerly on a CPU and through flex_attention on a GPU (scaled_dot_product_attention has no sinks).
Loss: next-token cross-entropy over every target token, no load-balancing term (the reference's
coefficient is 0). Evaluating, the stats also count the tokens each expert was routed (top k of
every layer's router logits, summed over layers), which the metric reduces and reports.
"""

from __future__ import annotations

import torch

from hvdbench.errors import ConfigError
from hvdbench.families.lm import torch as lm
from hvdbench.frameworks.torch.recipe import flush_denormals, sized
from hvdbench.frameworks.torch.vision import ensure_torchvision

ensure_torchvision()  # transformers imports torchvision when it is installed


def gpt_oss_config(cfg, device: torch.device | None = None):
    from transformers import GptOssConfig

    if cfg.heads % cfg.kv_heads or cfg.top_k > cfg.experts:
        raise ConfigError(f"gpt_oss_20b: heads {cfg.heads} must divide by kv_heads {cfg.kv_heads}, and top_k "
                          f"{cfg.top_k} be at most experts {cfg.experts}")
    config = GptOssConfig(
        vocab_size=cfg.vocab_size, hidden_size=cfg.hidden, intermediate_size=cfg.expert_intermediate,
        head_dim=cfg.head_dim, num_hidden_layers=cfg.layers, num_attention_heads=cfg.heads,
        num_key_value_heads=cfg.kv_heads, num_local_experts=cfg.experts, num_experts_per_tok=cfg.top_k,
        sliding_window=cfg.sliding_window, max_position_embeddings=max(cfg.seq_len, 8192), rms_norm_eps=cfg.rms_eps,
        rope_parameters={"rope_type": "default", "rope_theta": cfg.rope_theta}, initializer_range=cfg.init_std,
        router_aux_loss_coef=cfg.aux_loss, output_router_logits=False, tie_word_embeddings=False, use_cache=False)
    # Attention sinks rule out scaled_dot_product_attention: flex_attention (compiled) on GPUs, the
    # eager softmax elsewhere (and on the meta device, where nothing runs).
    config._attn_implementation = "flex_attention" if device is not None and device.type == "cuda" else "eager"
    return config


def build(cfg, vocab_size: int | None = None, seq_len: int | None = None, activation_checkpointing: str = "none",
          loss_chunks: int = 0, **_):
    """GptOssForCausalLM for a flavor; vocab_size and seq_len of a dataset's manifest override the
    flavor's; the run's --activation-checkpointing and --loss-chunks (hvdbench/families/lm/torch.py's
    apply_levers). Built where `torch.device(...)` says (meta: nothing allocated), else on the GPU."""
    from transformers import GptOssForCausalLM

    flush_denormals()
    cfg = sized(cfg, vocab_size=vocab_size, seq_len=seq_len)
    device = lm.build_device()
    run_on = torch.device("cuda") if device.type == "meta" and torch.cuda.is_available() else device
    with torch.device(device):
        model = GptOssForCausalLM(gpt_oss_config(cfg, run_on))
    if loss_chunks > 1 and cfg.aux_loss > 0:  # the chunked loss runs the decoder alone: no router loss
        raise ConfigError(f"--loss-chunks {loss_chunks}: gpt_oss_20b's auxiliary loss ({cfg.aux_loss}) needs the "
                          "whole model's output; leave --loss-chunks out")
    lm.apply_levers(model, lm.decoder_layers(model), activation_checkpointing, loss_chunks)
    model.lm_cfg = cfg
    return model


def top_k_of(model) -> int:
    """The router's k, from the model's own router (a wrapped or sharded model has no lm_cfg)."""
    return next(m.top_k for m in model.modules() if hasattr(m, "top_k") and hasattr(m, "num_experts"))


@torch.no_grad()
def expert_tokens(router_logits, top_k: int) -> torch.Tensor:
    """Tokens routed to each expert, summed over layers: every layer's (tokens, experts) logits,
    top k per token (the router's own choice: its logits include its bias)."""
    counts = None
    for logits in router_logits:
        chosen = logits.topk(top_k, dim=-1).indices.flatten()
        layer = torch.bincount(chosen, minlength=logits.shape[-1])
        counts = layer if counts is None else counts + layer
    return counts


def loss_and_stats(model, batch):
    """(mean next-token loss, {"loss_sum", "count"}); evaluating, also {"expert_tokens", "top_k"}.
    A flavor with an auxiliary loss (not the reference's) adds it while training."""
    evaluating = not model.training
    aux = getattr(getattr(model, "config", None), "router_aux_loss_coef", 0.0)
    loss, stats, out = lm.next_token_loss(model, batch, output_router_logits=evaluating or aux > 0)
    if aux > 0 and not evaluating and out.aux_loss is not None:
        loss = loss + aux * out.aux_loss
    if evaluating:
        k = top_k_of(model)
        stats["expert_tokens"], stats["top_k"] = expert_tokens(out.router_logits, k), k
    return loss, stats


# The rest of what the trainer asks of the folder is the language-model family's
# (hvdbench/families/lm/torch.py): the decoder layers are the units --engine fsdp shards and --compile
# compiles one by one; a meta-built model gets transformers' own initialisation; weight decay on
# matrices, with the flavor's clipping and cosine schedule; the references' AdamW.
shard_units = compile_units = lm.decoder_layers
init_weights = lm.hf_init_weights
param_groups = lm.param_groups
make_optimizer = lm.make_optimizer
