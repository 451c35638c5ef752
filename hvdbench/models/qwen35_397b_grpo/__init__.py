"""Qwen3.5-397B-A17B post-trained with GRPO on software-engineering tasks, MLPerf's
`qwen35_397b_grpo` benchmark (v6.1; validation pass@4 0.69, higher is better). A spec only: its
size, its recipe and what it needs, so that `hvdbench train qwen35_397b_grpo`, a sweep and a study
say why it does not run here (`refuse`) instead of not knowing it. There is no torch.py, and no
dataset kind: its "data" are R2E-Gym repositories that an agent edits inside containers.

    hvdbench train qwen35_397b_grpo --synthetic --out runs/grpo     # refused, with the reason

The reference (mlcommons/training llm_post_training: NVIDIA NeMo-RL, NeMo Gym, OpenHands): reinforcement
learning with verifiable rewards, Group Relative Policy Optimization; each rollout is a multi-turn
CodeAct agent editing a repository in an isolated container, rewarded 1 when its patch passes the
task's tests. 64 nodes x 4 GB300 GPUs: the policy trains on 16 nodes (Megatron TP4, PP2, EP32, CP1,
sequence parallelism, packed sequences, bf16) and vLLM generates on 48 (TP8, EP8), receiving the
policy's weights after every step; 65,536-token contexts. Quality: grouped pass@4 on 256 held-out tasks.
"""

from __future__ import annotations

from dataclasses import dataclass

from hvdbench.contracts import ModelSpec, accuracy


@dataclass(frozen=True)
class Qwen35Config:
    """Qwen3.5-397B-A17B's language model as the benchmark trains it (its README's table). Sizes
    are the published ones: the network (Gated DeltaNet layers, gated attention, 512 experts) was
    not built here, so no exact parameter count is claimed (ModelSpec.parameters stays empty)."""

    layers: int = 60  # 15 blocks of 3 Gated DeltaNet + MoE layers and 1 gated-attention + MoE layer
    hidden: int = 4096
    routed_experts: int = 512
    active_experts: int = 10
    shared_experts: int = 1
    expert_intermediate: int = 1024
    vocab_size: int = 248320
    seq_len: int = 65536  # the benchmark's context (native: 262,144)
    total_parameters: int = 397_000_000_000  # published
    active_parameters: int = 17_000_000_000  # published


FLAVORS = {"full": Qwen35Config()}


def refuse(cfg, env) -> str:
    """SPEC.refuse: every configuration, in one line."""
    return ("qwen35_397b_grpo is a spec only, not trainable here: GRPO post-training of Qwen3.5-397B-A17B needs "
            "a rollout engine (vLLM serving the policy and refitted with its weights every step), sandboxed "
            "software tasks that reward the agent's patches (R2E-Gym in containers), and tensor, pipeline and "
            "expert parallelism (MLPerf's reference: policy TP4 x PP2 x EP32 on 64 GB300 GPUs, generation on "
            "192 more); hvdbench trains supervised objectives under data-parallel engines")


SPEC = ModelSpec(
    name="qwen35_397b_grpo",
    flavors=FLAVORS,
    default_flavor="full",
    # The reference's framework. There is no torch.py: `refuse` stops every run before one is needed.
    frameworks=("torch",),
    kinds=(),  # no hvdbench dataset kind: rollouts in containers, not prepared shards
    metric=accuracy("pass_at_4"),  # tasks with a passing patch among 4 generations / tasks
    mlperf_benchmark="qwen35_397b_grpo",
    mlperf_target=0.69,
    defaults={"optimizer": "adamw"},
    refuse=refuse,
)
