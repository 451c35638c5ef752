"""`hvdbench prepare translation`: the `translation` kind's writer on the command line (listed in
the transformer SPEC's prepare_commands; gnmt trains on the same kind)."""

import click

from hvdbench.cli.lists import FiniteRange
from hvdbench.cli.prepare import OUT, OVERWRITE, summary

FILE = click.Path(path_type=str, dir_okay=False)


@click.command()
@click.option("--src", required=True, metavar="FILE|builtin:gettext-de",
              help="Source-language text, one sentence per line (WMT layout), or builtin:gettext-de: "
                   "the German message catalogs of the Debian packages `make setup` installs.")
@click.option("--tgt", type=FILE, help="Target-language text aligned line by line with --src.")
@click.option("--src-lang", default="en", show_default=True)
@click.option("--tgt-lang", default="de", show_default=True)
@OUT
@click.option("--val-src", type=FILE, help="Validation source (e.g. newstest2014.en); default: hold out --val-fraction.")
@click.option("--val-tgt", type=FILE, help="Validation target aligned with --val-src.")
@click.option("--vocab-size", type=click.IntRange(min=261), default=33708, show_default=True,
              help="Shared byte-level BPE vocabulary (MLPerf Transformer: 33,708; GNMT: 32,317; "
                   "4000 for the built-in corpus).")
@click.option("--max-len", type=click.IntRange(min=2), default=128, show_default=True,
              help="Subwords per sentence with EOS; longer pairs are dropped (counted), never cut.")
@click.option("--val-fraction", type=FiniteRange(0, 1, min_open=True, max_open=True), default=0.05,
              show_default=True, help="Seeded share of the pairs held out when no --val-src is given.")
@click.option("--bucket-samples", type=click.IntRange(min=1), default=128, show_default=True,
              help="Training pairs of similar length written together, the blocks in random order "
                   "(a batch per GPU or a few: batches then hold sentences of one length).")
@click.option("--samples-per-shard", type=click.IntRange(min=1), default=65536, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@OVERWRITE
def translation(src, tgt, src_lang, tgt_lang, out, val_src, val_tgt, vocab_size, max_len, val_fraction,
                bucket_samples, samples_per_shard, seed, overwrite):
    """Parallel text -> shared subword vocabulary -> length-bucketed HDF5 shards (transformer, gnmt).

    \b
    Example:
      hvdbench prepare translation --src builtin:gettext-de --vocab-size 4000 --max-len 64 --out data/gettext-de
      hvdbench prepare translation --src-lang en --tgt-lang de --src train.en --tgt train.de \\
          --val-src newstest2014.en --val-tgt newstest2014.de --out data/wmt14-en-de
    """
    from hvdbench.data.parallel import PrepareOptions
    from hvdbench.families.translation.prepare import TranslationOptions, prepare_translation

    opts = TranslationOptions(src_lang=src_lang, tgt_lang=tgt_lang, vocab_size=vocab_size, max_len=max_len,
                              val_fraction=val_fraction, bucket_samples=bucket_samples,
                              samples_per_shard=samples_per_shard, seed=seed)
    summary(prepare_translation(src, out, tgt=tgt, val_src=val_src, val_tgt=val_tgt, opts=opts,
                                options=PrepareOptions(overwrite=overwrite)), out)
