"""Llama 3.1 405B continued pre-training on C4, MLPerf's `llama31_405b` benchmark (v5.0 to v6.0;
retired from v6.1; validation log-perplexity 5.6, lower is better). A spec only: its size, its recipe
and what it needs, so that `hvdbench train llama31_405b`, a sweep and a study say why it does not run
here (`refuse`) instead of not knowing it. There is no torch.py.

    hvdbench train llama31_405b --synthetic --out runs/l405     # refused, with the reason

The reference (mlcommons/training large_language_model_pretraining/nemo): NeMo / Megatron with
tensor, pipeline (virtual stages of 7) and context parallelism on 288 nodes x 8 GPUs; it starts from
Meta's Llama 3.1 405B bf16 checkpoint; C4 tokenized with the Mixtral 8x22B tokenizer (32,000 tokens),
8,192-token sequences, global batch 1,152, AdamW at 8e-5 x GBS/1152, warm-up 8,000 x ceil(1152/GBS)
steps, cosine over 1.2M x ceil(1152/GBS) steps, evaluation every 46,080 sequences on 5,760.
"""

from __future__ import annotations

from dataclasses import dataclass

from hvdbench.contracts import ModelSpec
from hvdbench.families.lm.data import LM_TOKENS
from hvdbench.families.lm.metric import log_perplexity


@dataclass(frozen=True)
class Llama405Config:
    """Llama 3.1 405B as the benchmark trains it (its README's table)."""

    layers: int = 126
    hidden: int = 16384
    intermediate: int = 53248
    heads: int = 128
    kv_heads: int = 8
    vocab_size: int = 32000  # the Mixtral 8x22B tokenizer replaces Llama 3's 128,256 tokens
    seq_len: int = 8192


FLAVORS = {"full": Llama405Config()}

# Exact, counted with transformers' LlamaForCausalLM on the meta device with the Mixtral tokenizer's
# 32,000 tokens (Llama 3.1's 128,256 give 405,853,388,800, the published 405B).
PARAMETERS = {"full": 402_699_272_192}


def refuse(cfg, env) -> str:
    """SPEC.refuse: every configuration, in one line."""
    return ("llama31_405b is a spec only, not trainable here: 403B parameters (805 GB of bf16 weights, ~6.4 TB "
            "with fp32 AdamW state) need tensor, pipeline and context parallelism (MLPerf's reference: NeMo on "
            "288 nodes x 8 GPUs) and Meta's Llama 3.1 405B checkpoint to start from; hvdbench's engines "
            "(horovod, ddp, fsdp) split only the batch and whole layers' weights")


SPEC = ModelSpec(
    name="llama31_405b",
    flavors=FLAVORS,
    default_flavor="full",
    # The reference's framework. There is no torch.py: `refuse` stops every run before one is needed.
    frameworks=("torch",),
    kinds=(LM_TOKENS,),  # the C4 token sequences of llama31_8b's prepare (Mixtral's tokenizer file)
    metric=log_perplexity(),
    mlperf_benchmark="llama31_405b",
    mlperf_target=5.6,
    defaults={"optimizer": "adamw", "eval_unit": "samples", "eval_every": 46080.0},
    parameters=dict(PARAMETERS),
    refuse=refuse,
)
