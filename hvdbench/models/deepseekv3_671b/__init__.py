"""DeepSeek-V3 671B continued pre-training on C4, MLPerf's `deepseekv3_671b` benchmark (v6.0 and
v6.1; validation log-perplexity 3.6, lower is better). A spec only: its size, its recipe and what it
needs, so that `hvdbench train deepseekv3_671b`, a sweep and a study say why it does not run here
(`refuse`) instead of not knowing it. There is no torch.py: no hvdbench engine can run it.

    hvdbench train deepseekv3_671b --synthetic --out runs/dsv3     # refused, with the reason

The reference (mlcommons/training llm_moe_pretraining/nemo, README and config_GB300_64x4x256xtp1pp4cp1.sh):
NeMo / Megatron on 64 nodes x 4 GB300 GPUs, pipeline parallelism 4, expert parallelism 64, tensor and
context parallelism 1; it starts from MLCommons' 1.4 TB bf16 checkpoint (DeepSeek-V3's weights with
50 steps of router adaptation to the Llama 3.1 8B tokenizer; members only); global batch of at least
15,360 sequences of 4,096 tokens (the configs: 16,384), AdamW at 2.4e-5, warm-up 4 steps, cosine to
1e-8 over 12,000 steps, evaluation after every step on 1,024 sequences of the C4 validation file.
"""

from __future__ import annotations

from dataclasses import dataclass

from hvdbench.contracts import ModelSpec
from hvdbench.families.lm.data import LM_TOKENS
from hvdbench.families.lm.metric import log_perplexity


@dataclass(frozen=True)
class DeepSeekV3Config:
    """DeepSeek-V3 as the benchmark trains it (its README's table; transformers' DeepseekV3Config
    defaults are the same network)."""

    layers: int = 61  # the first 3 dense, the other 58 mixtures of experts
    hidden: int = 7168
    heads: int = 128  # multi-head latent attention (MLA)
    routed_experts: int = 256
    active_experts: int = 8
    shared_experts: int = 1
    expert_intermediate: int = 2048
    vocab_size: int = 128256  # the Llama 3.1 8B tokenizer replaces DeepSeek's 129,280 tokens
    seq_len: int = 4096
    active_parameters: int = 37_000_000_000  # published (README: 37B), not counted here


FLAVORS = {"full": DeepSeekV3Config()}

# Exact, counted with transformers' DeepseekV3ForCausalLM on the meta device (the multi-token
# prediction module left out) with the Llama 3.1 8B tokenizer's 128,256 tokens: DeepSeek's own
# 129,280 give 671,026,404,352, the published 671B.
PARAMETERS = {"full": 671_011_724_288}


def refuse(cfg, env) -> str:
    """SPEC.refuse: every configuration, in one line."""
    return ("deepseekv3_671b is a spec only, not trainable here: 671B parameters (37B active per token, 1.34 TB "
            "of bf16 weights) need expert and pipeline parallelism (MLPerf's reference: NeMo, expert parallel 64 "
            "x pipeline parallel 4 on 256 GB300 GPUs) and MLPerf's 1.4 TB starting checkpoint (members only); "
            "hvdbench's engines (horovod, ddp, fsdp) replicate or shard whole layers and run every expert on "
            "every rank")


SPEC = ModelSpec(
    name="deepseekv3_671b",
    flavors=FLAVORS,
    default_flavor="full",
    # The reference's framework. There is no torch.py: `refuse` stops every run before one is needed.
    frameworks=("torch",),
    kinds=(LM_TOKENS,),  # it trains on the C4 token sequences llama31_8b does (4,096 tokens)
    metric=log_perplexity(),
    mlperf_benchmark="deepseekv3_671b",
    mlperf_target=3.6,
    # What MLPerf logs: evaluation after every step, counted in sequences.
    defaults={"optimizer": "adamw", "eval_unit": "samples", "eval_every": 16384.0},
    parameters=dict(PARAMETERS),
    refuse=refuse,
)
