"""`hvdbench prepare bert` and `prepare pack`: the BERT kinds' writers on the command line
(listed in SPEC.prepare_commands, added to `hvdbench prepare` by hvdbench/cli/prepare.py)."""

from pathlib import Path

import click

from hvdbench.cli.lists import FiniteRange
from hvdbench.cli.prepare import OUT, OVERWRITE, WORKERS, summary


@click.command()
@click.option("--src", "sources", required=True, multiple=True,
              help="Text file or folder (one sentence per line, blank line between documents), or "
                   "builtin:pydoc; repeat for several. Each file becomes one train and one val shard.")
@OUT
@click.option("--vocab", type=click.Path(path_type=Path, dir_okay=False, exists=True),
              help="A WordPiece vocab.txt to use as is.")
@click.option("--vocab-size", type=click.IntRange(min=16), help="Train a WordPiece vocabulary of this size on --src.")
@click.option("--lowercase/--cased", default=True, show_default=True)
@click.option("--max-seq-len", type=int, default=128, show_default=True)
@click.option("--max-predictions", type=int, default=20, show_default=True)
@click.option("--masked-lm-prob", type=FiniteRange(0, 1, min_open=True, max_open=True), default=0.15, show_default=True)
@click.option("--short-seq-prob", type=FiniteRange(0, 1), default=0.1, show_default=True)
@click.option("--dupe-factor", type=int, default=5, show_default=True,
              help="Passes over the text, each with a different masking (MLPerf: 10).")
@click.option("--val-fraction", type=FiniteRange(0, 1, max_open=True), default=0.05, show_default=True,
              help="Share of each file's documents held out for evaluation.")
@click.option("--seed", type=int, default=12345, show_default=True)
@WORKERS
@OVERWRITE
def bert(sources, out, vocab, vocab_size, lowercase, max_seq_len, max_predictions, masked_lm_prob,
         short_seq_prob, dupe_factor, val_fraction, seed, workers, overwrite):
    """Text -> WordPiece -> BERT pre-training instances (MLPerf HDF5 fields).

    \b
    Example:
      hvdbench prepare bert --src builtin:pydoc --vocab-size 4000 --out data/pydoc
      hvdbench prepare bert --src wiki/ --vocab vocab.txt --max-seq-len 512 \\
          --max-predictions 76 --dupe-factor 10 --out data/wiki
    """
    from hvdbench.data.parallel import PrepareOptions
    from hvdbench.models.bert.prepare import BertOptions, prepare_bert

    opts = BertOptions(max_seq_len=max_seq_len, max_predictions=max_predictions, masked_lm_prob=masked_lm_prob,
                       short_seq_prob=short_seq_prob, dupe_factor=dupe_factor, seed=seed)
    summary(prepare_bert(list(sources), out, vocab=vocab, vocab_size=vocab_size, lowercase=lowercase, opts=opts,
                          val_fraction=val_fraction, options=PrepareOptions(workers=workers, overwrite=overwrite)), out)


@click.command()
@click.option("--src", required=True, type=click.Path(path_type=Path, file_okay=False),
              help="A prepared bert dataset (from `hvdbench prepare bert`).")
@OUT
@click.option("--strategy", type=click.Choice(["spfhp", "nnlshp"]), default="spfhp", show_default=True,
              help="spfhp: shortest-pack-first (fast); nnlshp: non-negative least squares (fuller packs).")
@click.option("--max-seqs-per-pack", type=click.IntRange(min=1), default=3, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@WORKERS
@OVERWRITE
def pack(src, out, strategy, max_seqs_per_pack, seed, workers, overwrite):
    """Pack BERT sequences several to a sample (histogram -> strategy -> packed HDF5).

    Writes per_seqlen.json (the length histogram) and packing.json (the report) beside the shards.

    \b
    Example:
      hvdbench prepare pack --src data/pydoc --out data/pydoc-packed
      hvdbench prepare pack --src data/wiki --out data/wiki-packed --strategy nnlshp
    """
    from hvdbench.data.parallel import PrepareOptions
    from hvdbench.models.bert.packing import prepare_pack

    summary(prepare_pack(src, out, strategy=strategy, max_seqs_per_pack=max_seqs_per_pack, seed=seed,
                          options=PrepareOptions(workers=workers, overwrite=overwrite)), out)
