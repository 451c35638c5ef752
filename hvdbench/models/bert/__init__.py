"""BERT pre-training (masked LM + next sentence prediction), MLPerf's language benchmark.

    hvdbench train bert --flavor debug --data data/bert-pydoc --out runs/bert
    hvdbench train bert --flavor large --synthetic --steps 100 --warmup-steps 10 --out runs/bert-large

Trains on the `bert` (one sequence per row) and `bert_packed` (several sequences per row,
block-diagonal attention) kinds (`data.py`) written by `hvdbench prepare bert` / `hvdbench prepare
pack`. The network is in `torch.py` and `tf.py` beside this file (the same architecture and
parameter count in PyTorch and Keras 3), each with the reference's LAMB optimizer (`Lamb`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hvdbench.contracts import ModelSpec, PublishedFlops, accuracy, only_with
from hvdbench.models.bert.data import BERT, BERT_PACKED

# MLPerf's reference LAMB (training/language_model/tensorflow/bert: lamb_optimizer_v1.py, as
# optimization.py sets it up): betas, epsilon, and the global gradient norm clipped to 1.0 (after
# the allreduce, before the update). Weight decay and the trust ratio are off LayerNorms and biases.
# The LAMB of torch.py and tf.py (Lamb) use these; the MLLOG keys below log them.
LAMB_BETAS = (0.9, 0.999)
LAMB_EPSILON = 1e-6
LAMB_MAX_GRAD_NORM = 1.0
# AdamW as the reference's AdamWeightDecayOptimizer sets it up.
ADAMW_BETAS = (0.9, 0.999)
ADAMW_EPSILON = 1e-6


@dataclass(frozen=True)
class BertConfig:
    """The network's size. vocab_size and the sequence lengths of a real dataset come from its
    manifest (the worker passes them to `build`); the values here are the defaults for synthetic
    data, which are MLPerf's (uncased WordPiece vocabulary, 512 tokens, 76 predictions)."""

    num_layers: int
    hidden: int
    heads: int
    intermediate: int
    vocab_size: int = 30522
    max_positions: int = 512  # size of the position-embedding table
    type_vocab_size: int = 2  # segment A / B
    dropout: float = 0.1  # hidden-state dropout
    attention_dropout: float = 0.1
    layer_norm_eps: float = 1e-12
    init_std: float = 0.02
    max_seq_len: int = 512  # synthetic batches only
    max_predictions: int = 76  # synthetic batches only
    max_seqs_per_pack: int = 3  # synthetic packed rows only (--synthetic-kind bert_packed): MLPerf's


FLAVORS = {
    "large": BertConfig(num_layers=24, hidden=1024, heads=16, intermediate=4096),  # MLPerf's
    "base": BertConfig(num_layers=12, hidden=768, heads=12, intermediate=3072),
    # Same family (post-LN, GELU, tied decoder, MLM + NSP) with ~3,000 times fewer encoder
    # parameters than large: trains on two CPU ranks in a minute on the built-in pydoc corpus.
    # No dropout: a model this small on a corpus this small learns markedly slower with it.
    "debug": BertConfig(num_layers=2, hidden=64, heads=2, intermediate=256, max_positions=128,
                        dropout=0.0, attention_dropout=0.0, max_seq_len=128, max_predictions=20),
}

def eval_interval(batch: float) -> float:
    """MLPerf's rule: evaluate every floor(0.05 (230.23 B + 3,000,000) / 25,000) x 25,000 samples at global
    batch B (150,000 at B = 768, 200,000 at 4,608, as the published logs' eval_start show)."""
    return max(25_000.0, math.floor(0.05 * (230.23 * batch + 3_000_000) / 25_000) * 25_000)


SPEC = ModelSpec(
    name="bert",
    flavors=FLAVORS,
    default_flavor="large",
    frameworks=("torch", "tensorflow"),
    kinds=(BERT, BERT_PACKED),
    metric=accuracy("masked_lm_accuracy"),
    mlperf_benchmark="bert",
    # A 512-token row of BERT-large; the logs count sequences, packed about 2 to a row in today's
    # submissions (../shared/COMPUTE.md): a sequence is taken as half a row.
    published_flops=PublishedFlops("large", 1.0197e12, rows_per_sample=0.5,
                                   sample="sequence, ~2 per 512-token row (packed)"),
    mlperf_eval_interval=eval_interval,
    mlperf_target=0.720,
    # Measured with the debug defaults below on 2 CPU ranks (global batch 16) on
    # `hvdbench prepare bert --src builtin:pydoc --vocab-size 4000`: 0.12 is passed in ~1.2 epochs
    # (~50 s) with its 128 tokens, in ~0.4-0.5 epoch (~25 s) with --max-seq-len 64, packed or not,
    # with LAMB as with AdamW; always predicting the most frequent masked token scores 0.06,
    # chance is 1/4000.
    flavor_targets={"debug": 0.12},
    defaults={
        # MLPerf's reference: LAMB (`Lamb` in torch.py / tf.py; Horovod's DistributedOptimizer or
        # DistributedGradientTape averages the gradients first) at 3.5e-4 for 256 sequences, the
        # reference convergence point's (mlperf-logging's rcps_bert.json, bert_ref_256; 4.25e-4 at
        # 448), grown with the square root of the global batch; no warm-up (num_warmup_steps 0
        # up to 4k sequences), linear decay to 0, weight decay 0.01 off biases and LayerNorms.
        # `--set optimizer=adamw` trains with AdamW instead (then give its lr: 1e-4 per 256).
        # MLPerf evaluates BERT every ~150k samples, not per epoch. With packed data a "sample"
        # (batch_per_gpu, eval_every) is a pack of up to max_seqs_per_pack sequences.
        "batch_per_gpu": 32,
        "optimizer": "lamb",
        "lr": 3.5e-4,
        "lr_base_batch": 256,
        "lr_scaling": "sqrt",
        "warmup_epochs": 0.0,
        "end_lr": 0.0,
        "decay_power": 1.0,
        "weight_decay": 0.01,
        "max_epochs": 1.0,
        "eval_every": 150000.0,
        "eval_unit": "samples",
        # LAMB's step is a fraction (lr) of each weight's norm: 2e-2 per 32 sequences reaches 0.12
        # a little sooner than AdamW at its best (3e-3); 3e-3 with LAMB stalls near 0.08.
        "debug": {"batch_per_gpu": 8, "lr": 2e-2, "lr_base_batch": 32, "warmup_epochs": 0.1,
                  "max_epochs": 3.0, "eval_every": 2000.0},
    },
    # Beside the common keys (opt_name, opt_base_learning_rate...) and the loop's
    # opt_learning_rate_warmup_steps/_training_steps: the reference's LAMB and warm-up keys, which
    # the closed division requires (training_4.0.0/closed_bert.yaml). The warm-up starts at step 0.
    mllog_hyperparameters={
        "opt_learning_rate_warmup_epochs": "warmup_epochs",
        "num_warmup_steps": lambda cfg, facts: facts.warmup_steps,
        "start_warmup_step": lambda cfg, facts: 0,
        "opt_lamb_beta_1": only_with("lamb", lambda cfg, facts: LAMB_BETAS[0]),
        "opt_lamb_beta_2": only_with("lamb", lambda cfg, facts: LAMB_BETAS[1]),
        "opt_lamb_epsilon": only_with("lamb", lambda cfg, facts: LAMB_EPSILON),
        "opt_lamb_weight_decay_rate": only_with("lamb", "weight_decay"),
        "opt_lamb_learning_rate_decay_poly_power": only_with("lamb", "decay_power"),
        "opt_end_learning_rate": "end_lr",
        "opt_learning_rate_decay_poly_power": "decay_power",
        "opt_weight_decay": "weight_decay",
    },
    parameters={"large": 336_226_108},
    # Activations of one sequence in a fp32 training step on a CPU (benchmarks/bench_memory.py):
    # large at 512 tokens (2.1 GB: 16 heads of 512 x 512 attention in 24 layers), debug at 128
    # tokens with the synthetic 30,522-token vocabulary (real datasets' smaller ones take less).
    memory_per_sample={"large": {"torch": 2_115_000_000}, "debug": {"torch": 8_300_000}},
    prepare_commands=("hvdbench.models.bert.cli:bert", "hvdbench.models.bert.cli:pack"),
)
