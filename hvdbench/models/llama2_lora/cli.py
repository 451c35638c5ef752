"""`hvdbench prepare lm-base` and `hvdbench prepare summaries`: llama2_lora's writers on the command
line (listed in the SPEC's prepare_commands)."""

import click

from hvdbench.cli.lists import FiniteRange
from hvdbench.cli.prepare import OUT, OVERWRITE, summary
from hvdbench.models.llama2_lora import Pretraining, warmup_steps

FILE = click.Path(path_type=str, dir_okay=False)


@click.command("lm-base")
@OUT
@click.option("--vocab-size", type=click.IntRange(min=261), default=4000, show_default=True,
              help="Byte-level BPE vocabulary trained on the corpus (the debug flavor's 4,000).")
@click.option("--steps", type=click.IntRange(min=1), default=Pretraining.steps, show_default=True,
              help="Optimizer steps of pre-training.")
@click.option("--batch", type=click.IntRange(min=1), default=Pretraining.batch, show_default=True,
              help="Windows per step.")
@click.option("--seq-len", type=click.IntRange(min=8), default=128, show_default=True,
              help="Tokens per window (the corpus end to end, cut into windows).")
@click.option("--lr", type=FiniteRange(min=0, min_open=True), default=Pretraining.lr, show_default=True,
              help="Peak learning rate (linear warm-up over the first 5 % of the steps, cosine decay).")
@click.option("--seed", type=int, default=Pretraining.seed, show_default=True)
@click.option("--threads", type=click.IntRange(min=0), default=Pretraining.threads, show_default=True,
              help="CPU math threads (0: PyTorch's default; 1 is steady on a shared machine).")
@OVERWRITE
def lm_base(out, vocab_size, steps, batch, seq_len, lr, seed, threads, overwrite):
    """Pre-train llama2_lora's debug base on CPython's pydoc text (stands in for Llama-2's weights).

    Trains a BPE vocabulary and the debug flavor's network (no adapters) as a language model on
    builtin:pydoc, on the CPU, and writes base.safetensors, tokenizer.json and base.json to --out.
    The weights are hvdbench's own, not Meta's. A rerun with the same options finds it done.

    \b
    Example:
      hvdbench prepare lm-base --out data/lm-base
      hvdbench prepare summaries --src builtin:stdlib-docstrings --base data/lm-base --out data/summaries
    """
    from hvdbench.data.parallel import env_rank
    from hvdbench.models.llama2_lora.prepare import prepare_lm_base
    from hvdbench.output import line

    if env_rank() != 0:  # one process trains; more ranks would only write the same files
        return
    training = Pretraining(steps=steps, batch=batch, lr=lr, warmup=warmup_steps(steps), seed=seed, threads=threads)
    info = prepare_lm_base(out, vocab_size=vocab_size, seq_len=seq_len, training=training, overwrite=overwrite,
                           log=lambda message: line(f"[lm-base] {message}"))
    line(f"{out}: base of {info['parameters']:,} parameters, pydoc LM loss {info['val_loss_before']:.2f} -> "
         f"{info['val_loss']:.2f} (held-out windows) in {info['train_seconds']:.0f} s; {info['note']}")


@click.command()
@click.option("--src", required=True, metavar="FILE|builtin:stdlib-docstrings",
              help="GovReport-style JSON lines (document under 'input'/'report'/'document', summary under "
                   "'output'/'summary'), or builtin:stdlib-docstrings: the summary lines and bodies of the "
                   "standard library's docstrings.")
@click.option("--base", required=True, type=click.Path(path_type=str, file_okay=False, exists=True),
              help="A folder made by `hvdbench prepare lm-base`: its tokenizer encodes the pairs, its "
                   "weights are copied beside the shards.")
@OUT
@click.option("--val-src", type=FILE, help="Validation pairs, JSON lines like --src; default: hold out --val-fraction.")
@click.option("--max-len", type=click.IntRange(min=16), default=256, show_default=True,
              help="Tokens per sequence (the reference: 8192); longer documents are cut at the end, "
                   "summaries never.")
@click.option("--val-fraction", type=FiniteRange(0, 1, min_open=True, max_open=True), default=0.1,
              show_default=True, help="Seeded share of the pairs held out when no --val-src is given.")
@click.option("--samples-per-shard", type=click.IntRange(min=1), default=16384, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@OVERWRITE
def summaries(src, base, out, val_src, max_len, val_fraction, samples_per_shard, seed, overwrite):
    """(document -> summary) pairs -> prompt-masked token sequences in HDF5 (llama2_lora).

    The labels are -100 on the prompt: the loss and the eval loss count summary tokens only, as
    MLPerf's Llama2-70B LoRA on GovReport.

    \b
    Example:
      hvdbench prepare summaries --src builtin:stdlib-docstrings --base data/lm-base --out data/summaries
      hvdbench prepare summaries --src gov_report/train.jsonl --val-src gov_report/validation.jsonl \\
          --base data/lm-base --max-len 8192 --out data/gov-report
    """
    from hvdbench.data.parallel import PrepareOptions
    from hvdbench.models.llama2_lora.prepare import SummaryOptions, prepare_summaries

    opts = SummaryOptions(max_len=max_len, val_fraction=val_fraction, samples_per_shard=samples_per_shard, seed=seed)
    summary(prepare_summaries(src, out, base=base, val_src=val_src, opts=opts,
                              options=PrepareOptions(overwrite=overwrite)), out)

