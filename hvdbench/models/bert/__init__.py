"""BERT pre-training (masked LM + next sentence prediction), MLPerf's language benchmark.

    hvdbench train bert --flavor debug --data data/bert-pydoc --out runs/bert
    hvdbench train bert --flavor large --synthetic --steps 100 --warmup-steps 10 --out runs/bert-large

Trains on the `bert` (one sequence per row) and `bert_packed` (several sequences per row,
block-diagonal attention) kinds (`data.py`) written by `hvdbench prepare bert` / `hvdbench prepare
pack`. The network is in `torch.py` beside this file.
"""

from __future__ import annotations

from dataclasses import dataclass

from hvdbench.models.bert.data import BERT, BERT_PACKED
from hvdbench.models.contracts import ModelSpec, accuracy


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


FLAVORS = {
    "large": BertConfig(num_layers=24, hidden=1024, heads=16, intermediate=4096),  # MLPerf's
    "base": BertConfig(num_layers=12, hidden=768, heads=12, intermediate=3072),
    # Same family (post-LN, GELU, tied decoder, MLM + NSP) with ~3,000 times fewer encoder
    # parameters than large: trains on two CPU ranks in a minute on the built-in pydoc corpus.
    # No dropout: a model this small on a corpus this small learns markedly slower with it.
    "debug": BertConfig(num_layers=2, hidden=64, heads=2, intermediate=256, max_positions=128,
                        dropout=0.0, attention_dropout=0.0, max_seq_len=128, max_predictions=20),
}

SPEC = ModelSpec(
    name="bert",
    flavors=FLAVORS,
    default_flavor="large",
    frameworks=("torch",),
    kinds=(BERT, BERT_PACKED),
    metric=accuracy("masked_lm_accuracy"),
    mlperf_benchmark="bert",
    mlperf_target=0.720,
    # Measured with the debug defaults below on 2 CPU ranks (global batch 16) on
    # `hvdbench prepare bert --src builtin:pydoc --vocab-size 4000`: 0.12 is passed in ~1.2 epochs
    # (~50 s) with its 128 tokens, in ~0.5 epoch (~25 s) with --max-seq-len 64, packed or not;
    # always predicting the most frequent masked token scores 0.06, chance is 1/4000.
    flavor_targets={"debug": 0.12},
    defaults={
        # AdamW (Horovod's DistributedOptimizer wraps it; MLPerf's reference uses LAMB) at BERT's
        # 1e-4 per 256 sequences, grown with the square root of the global batch (the usual rule
        # for Adam-type optimizers); linear decay to 0, weight decay 0.01 off biases and
        # LayerNorms. MLPerf evaluates BERT every ~150k samples, not per epoch. With packed data a
        # "sample" (batch_per_gpu, eval_every) is a pack of up to max_seqs_per_pack sequences.
        "batch_per_gpu": 32,
        "optimizer": "adamw",
        "lr": 1e-4,
        "lr_base_batch": 256,
        "lr_scaling": "sqrt",
        "warmup_epochs": 0.01,
        "end_lr": 0.0,
        "decay_power": 1.0,
        "weight_decay": 0.01,
        "max_epochs": 1.0,
        "eval_every": 150000.0,
        "eval_unit": "samples",
        "debug": {"batch_per_gpu": 8, "lr": 3e-3, "lr_base_batch": 32, "warmup_epochs": 0.1,
                  "max_epochs": 3.0, "eval_every": 2000.0},
    },
    # Beside the common keys; the loop adds opt_learning_rate_warmup_steps/_training_steps.
    mllog_hyperparameters={
        "opt_learning_rate_warmup_epochs": "warmup_epochs",
        "opt_end_learning_rate": "end_lr",
        "opt_learning_rate_decay_poly_power": "decay_power",
        "opt_weight_decay": "weight_decay",
    },
    parameters={"large": 336_226_108},
    prepare_commands=("hvdbench.models.bert.cli:bert", "hvdbench.models.bert.cli:pack"),
)
