"""What MLPerf's C4 pre-training references share beyond the network (llama31_8b, gpt_oss_20b): the
MLLOG keys the closed division checks, as the references log them (no framework imported).

    SPEC = ModelSpec(..., mllog_hyperparameters=mllog_keys(lambda cfg: FLAVORS[cfg.flavor]))

A flavor config here has `seq_len`, `grad_clip`, `schedule_steps` and `end_ratio` (the cosine's
length and its end as a share of the peak).
"""

from __future__ import annotations

from pathlib import Path

# The references' AdamW (mlperf-logging's closed_llama31_8b.yaml and closed_gpt_oss_20b.yaml check
# these values), used by hvdbench/families/lm/torch.py's make_optimizer.
ADAM_BETAS = (0.9, 0.95)
ADAM_EPS = 1e-5
DECAY_SCHEDULE = "cosine with linear warmup"


def seq_len_of(cfg, flavor) -> int:
    """The run's sequence length: its dataset's (the manifest's seq_len), or the flavor's for
    synthetic data."""
    if cfg.data:
        from hvdbench.data.manifest import read_manifest

        return int(read_manifest(Path(cfg.data))["seq_len"])
    return flavor.seq_len


def mllog_keys(flavor_of) -> dict:
    """`ModelSpec.mllog_hyperparameters` of the closed division for llama31_8b and gpt_oss_20b
    (ruleset 6.0.0), beyond hvdbench's common keys (global_batch_size, gradient_accumulation_steps,
    opt_name, opt_base_learning_rate) and the loop's (eval_samples, opt_learning_rate_warmup_steps).
    `flavor_of(cfg)`: the run's flavor config."""
    return {
        "max_sequence_length": lambda cfg, facts: seq_len_of(cfg, flavor_of(cfg)),
        "opt_end_learning_rate": lambda cfg, facts: flavor_of(cfg).end_ratio * facts.peak_lr,
        "opt_learning_rate_decay_steps": lambda cfg, facts: flavor_of(cfg).schedule_steps - facts.warmup_steps,
        "opt_learning_rate_decay_schedule": lambda cfg, facts: DECAY_SCHEDULE,
        "opt_adamw_beta_1": lambda cfg, facts: ADAM_BETAS[0],
        "opt_adamw_beta_2": lambda cfg, facts: ADAM_BETAS[1],
        "opt_adamw_epsilon": lambda cfg, facts: ADAM_EPS,
        "opt_adamw_weight_decay": "weight_decay",
        "opt_gradient_clip_norm": lambda cfg, facts: flavor_of(cfg).grad_clip,
        # The schedule's length, which the cosine runs over (the run's own limit, max_epochs, is
        # logged as opt_learning_rate_training_steps by the loop).
        "max_steps": lambda cfg, facts: flavor_of(cfg).schedule_steps,
    }
