"""Llama 3.1 pre-training, single-device PyTorch code (transformers' Llama built from a config).

    from hvdbench.contracts import get_spec
    from hvdbench.models.llama31_8b import torch as llama
    model = llama.build(get_spec("llama31_8b").flavor("debug"), vocab_size=2048, seq_len=256)
    loss, stats = llama.loss_and_stats(model, {"tokens": tokens})   # (B, 257) int32 ids
    with torch.device("meta"):
        full = llama.build(get_spec("llama31_8b").flavor("full"))   # 8,030,261,248 parameters

The network is transformers' `LlamaForCausalLM` from a `LlamaConfig` (no download, no weights):
RMSNorm, SwiGLU, grouped-query attention through PyTorch's scaled_dot_product_attention, RoPE
(theta 5e5 with Llama 3.1's frequency scaling), untied output layer. Loss: the next-token
cross-entropy over every target token of the sequences; the eval metric adds token losses and
counts over every batch and rank (log-perplexity). Optimizer, parameter groups and the cosine
schedule: hvdbench/families/lm/torch.py.
"""

from __future__ import annotations

import torch

from hvdbench.errors import ConfigError
from hvdbench.families.lm import torch as lm
from hvdbench.frameworks.torch.recipe import flush_denormals, sized
from hvdbench.frameworks.torch.vision import ensure_torchvision

ensure_torchvision()  # transformers imports torchvision when it is installed


def llama_config(cfg):
    from transformers import LlamaConfig

    if cfg.hidden % cfg.heads or cfg.heads % cfg.kv_heads:
        raise ConfigError(f"llama31_8b: hidden {cfg.hidden} must divide into heads {cfg.heads}, and heads into "
                          f"kv_heads {cfg.kv_heads}")
    rope = {"rope_type": "default", "rope_theta": cfg.rope_theta}
    if cfg.rope_scaling:  # Llama 3.1's: its 131,072-token context stretched from 8,192
        rope = {"rope_type": "llama3", "rope_theta": cfg.rope_theta, "factor": 8.0, "low_freq_factor": 1.0,
                "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
    config = LlamaConfig(
        vocab_size=cfg.vocab_size, hidden_size=cfg.hidden, intermediate_size=cfg.intermediate,
        num_hidden_layers=cfg.layers, num_attention_heads=cfg.heads, num_key_value_heads=cfg.kv_heads,
        max_position_embeddings=max(cfg.seq_len, 131072 if cfg.rope_scaling else 8192), rms_norm_eps=cfg.rms_eps, rope_parameters=rope,
        tie_word_embeddings=cfg.tie_embeddings, attention_bias=False, mlp_bias=False, use_cache=False)
    config._attn_implementation = "sdpa"  # PyTorch's fused attention: flash / memory-efficient on GPUs
    return config


def build(cfg, vocab_size: int | None = None, seq_len: int | None = None, activation_checkpointing: str = "none",
          loss_chunks: int = 0, **_):
    """LlamaForCausalLM for a flavor; vocab_size and seq_len of a dataset's manifest override the
    flavor's; the run's --activation-checkpointing and --loss-chunks (hvdbench/families/lm/torch.py's
    apply_levers). Built where `torch.device(...)` says (meta: nothing allocated), else on the GPU."""
    from transformers import LlamaForCausalLM

    flush_denormals()
    cfg = sized(cfg, vocab_size=vocab_size, seq_len=seq_len)
    with torch.device(lm.build_device()):
        model = LlamaForCausalLM(llama_config(cfg))
    lm.apply_levers(model, lm.decoder_layers(model), activation_checkpointing, loss_chunks)
    model.lm_cfg = cfg
    return model


def loss_and_stats(model, batch):
    """(mean next-token loss, {"loss_sum", "count"}) over every target token of the batch."""
    loss, stats, _ = lm.next_token_loss(model, batch)
    return loss, stats


# The rest of what the trainer asks of the folder is the language-model family's
# (hvdbench/families/lm/torch.py): the decoder layers are the units --engine fsdp shards and --compile
# compiles one by one; a meta-built model gets transformers' own initialisation; weight decay on
# matrices, with the flavor's clipping and cosine schedule; the references' AdamW.
shard_units = compile_units = lm.decoder_layers
init_weights = lm.hf_init_weights
param_groups = lm.param_groups
make_optimizer = lm.make_optimizer
