"""`hvdbench prepare`: datasets into self-describing HDF5 shard directories (thin: options -> hvdbench.data)."""

from __future__ import annotations

from pathlib import Path

import click

WORKERS = click.option("--workers", type=click.IntRange(min=1), default=None,
                       help="Worker processes per rank (default: all cores, shared among local MPI ranks).")
OVERWRITE = click.option("--overwrite", is_flag=True,
                         help="Replace a different dataset already in --out (default: refuse).")
OUT = click.option("--out", required=True, type=click.Path(path_type=Path, file_okay=False),
                   help="Dataset directory to write (created; a rerun of the same command resumes).")


@click.group()
def prepare():
    """Prepare datasets into HDF5 shards with a manifest (images, BERT text, packed BERT, synthetic).

    Every command is resumable (rerun it after an interruption) and runs MPI-parallel under mpirun.

    \b
    Example:
      hvdbench prepare digits --out data/digits
      hvdbench prepare bert --src builtin:pydoc --vocab-size 4000 --out data/pydoc
      hvdbench prepare pack --src data/pydoc --out data/pydoc-packed
      hvdbench prepare verify data/pydoc-packed
    """


@prepare.command()
@click.option("--src", required=True, type=click.Path(path_type=Path),
              help="ImageNet-style tree: SRC/train/<class>/*.JPEG and optionally SRC/val/<class>/*.")
@OUT
@click.option("--size", type=click.IntRange(min=1), default=224, show_default=True,
              help="Output images are SIZE x SIZE (shorter side resized, centre crop).")
@click.option("--samples-per-shard", type=click.IntRange(min=1), default=1024, show_default=True)
@click.option("--val-fraction", type=click.FloatRange(0, 1, max_open=True), default=0.05, show_default=True,
              help="Held out per class when SRC has no val/ folder.")
@click.option("--strict", is_flag=True, help="Fail on the first unreadable or non-image file instead of skipping it.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seeds the shuffle of files into shards.")
@WORKERS
@OVERWRITE
def images(src, out, size, samples_per_shard, val_fraction, strict, seed, workers, overwrite):
    """An image folder tree -> HDF5 shards of uint8 images and int64 labels.

    \b
    Example:
      hvdbench prepare images --src /data/imagenet --out data/imagenet --size 224
      mpirun -np 8 hvdbench prepare images --src /data/imagenet --out data/imagenet
    """
    from hvdbench.data.images import prepare_images

    _summary(prepare_images(src, out, size=size, samples_per_shard=samples_per_shard, workers=workers,
                            strict=strict, val_fraction=val_fraction, seed=seed, overwrite=overwrite), out)


@prepare.command()
@OUT
@click.option("--size", type=click.IntRange(min=8), default=16, show_default=True,
              help="Upsample 8x8 to SIZE x SIZE (16: the ResNet debug flavor's size, tuned to its target).")
@click.option("--val-fraction", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.2,
              show_default=True, help="Stratified validation share.")
@click.option("--samples-per-shard", type=click.IntRange(min=1), default=1024, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@OVERWRITE
def digits(out, size, val_fraction, samples_per_shard, seed, overwrite):
    """scikit-learn's bundled handwritten digits (1,797 real images, 10 classes) as an image dataset.

    \b
    Example:
      hvdbench prepare digits --out data/digits
      hvdbench prepare digits --out data/digits64 --size 64 --seed 1
    """
    from hvdbench.data.digits import prepare_digits

    _summary(prepare_digits(out, size=size, val_fraction=val_fraction, samples_per_shard=samples_per_shard,
                            seed=seed, overwrite=overwrite), out)


@prepare.command()
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
@click.option("--masked-lm-prob", type=float, default=0.15, show_default=True)
@click.option("--short-seq-prob", type=float, default=0.1, show_default=True)
@click.option("--dupe-factor", type=int, default=5, show_default=True,
              help="Passes over the text, each with a different masking (MLPerf: 10).")
@click.option("--val-fraction", type=click.FloatRange(0, 1, max_open=True), default=0.05, show_default=True,
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
    from hvdbench.data.bert import BertOptions, prepare_bert

    opts = BertOptions(max_seq_len=max_seq_len, max_predictions=max_predictions, masked_lm_prob=masked_lm_prob,
                       short_seq_prob=short_seq_prob, dupe_factor=dupe_factor, seed=seed)
    _summary(prepare_bert(list(sources), out, vocab=vocab, vocab_size=vocab_size, lowercase=lowercase, opts=opts,
                          val_fraction=val_fraction, workers=workers, overwrite=overwrite), out)


@prepare.command()
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
    from hvdbench.data.packing import prepare_pack

    _summary(prepare_pack(src, out, strategy=strategy, max_seqs_per_pack=max_seqs_per_pack, seed=seed,
                          workers=workers, overwrite=overwrite), out)


@prepare.command()
@click.option("--like", required=True, type=click.Choice(["images", "bert"]))
@click.option("--samples", required=True, type=click.IntRange(min=1), help="Total samples (train + val).")
@OUT
@click.option("--size", type=click.IntRange(min=1), default=224, show_default=True, help="images: side length.")
@click.option("--num-classes", type=click.IntRange(min=1), default=1000, show_default=True)
@click.option("--vocab-size", type=click.IntRange(min=6), default=30522, show_default=True)
@click.option("--max-seq-len", type=int, default=128, show_default=True)
@click.option("--max-predictions", type=int, default=20, show_default=True)
@click.option("--samples-per-shard", type=click.IntRange(min=1), default=None,
              help="Default 1024 (images), 32768 (bert).")
@click.option("--val-fraction", type=click.FloatRange(0, 1, max_open=True), default=0.05, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@WORKERS
@OVERWRITE
def synthetic(like, samples, out, size, num_classes, vocab_size, max_seq_len, max_predictions, samples_per_shard,
              val_fraction, seed, workers, overwrite):
    """Seeded random data in the images or bert format, any size (storage tests at scale).

    \b
    Example:
      hvdbench prepare synthetic --like images --samples 100000 --out /scratch/synth
      hvdbench prepare synthetic --like bert --samples 1000000 --max-seq-len 512 \\
          --max-predictions 76 --out /scratch/synth-bert
    """
    from hvdbench.data.synthetic import prepare_synthetic

    _summary(prepare_synthetic(like, samples, out, size=size, num_classes=num_classes, vocab_size=vocab_size,
                               max_seq_len=max_seq_len, max_predictions=max_predictions,
                               samples_per_shard=samples_per_shard, val_fraction=val_fraction, seed=seed,
                               workers=workers, overwrite=overwrite), out)


@prepare.command()
@click.argument("directory", type=click.Path(path_type=Path))
def verify(directory):
    """Check every shard against the manifest (counts, shapes, dtypes, value ranges, checksums).

    Prints one row per shard; exits 1 naming the first bad shard and its problem.

    \b
    Example:
      hvdbench prepare verify data/digits
    """
    from rich.console import Console
    from rich.table import Table

    from hvdbench.data.verify import verify as run_verify
    from hvdbench.errors import DatasetError

    report = run_verify(directory)
    table = Table(title=f"{directory} ({report.kind})")
    for column in ("split", "file", "samples", "status"):
        table.add_column(column, justify="right" if column == "samples" else "left")
    for row in report.rows:
        table.add_row(row["split"], row["file"], str(row["samples"]), row["status"])
    Console().print(table)
    if report.problems:
        raise DatasetError(f"{len(report.problems)} problem(s); first: {report.problems[0]}")
    click.echo(f"ok: {sum(r['samples'] for r in report.rows)} samples in {len(report.rows)} shards")


def _summary(manifest: dict, out: Path) -> None:
    """What was made, on rank 0 only: samples per split, skipped inputs, the packing report."""
    from hvdbench.data.parallel import env_rank

    if env_rank() != 0:
        return
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table(title=f"{out} ({manifest['kind']})")
    for column in ("split", "samples", "shards"):
        table.add_column(column, justify="right" if column != "split" else "left")
    for split, info in manifest["splits"].items():
        table.add_row(split, str(info["samples"]), str(len(info["shards"])))
    console.print(table)
    skipped = manifest.get("skipped", {})
    if skipped.get("count"):
        console.print(f"skipped {skipped['count']} unreadable or non-image file(s), e.g.: "
                      + ", ".join(skipped["first"]))
    packing = manifest.get("packing")
    if packing:
        report = Table(title=f"packing ({packing['strategy']})")
        columns = ("sequences", "packs", "padding_before", "padding_after", "speedup", "efficiency",
                   "efficiency_bound")
        report.add_column("split")
        for column in columns:
            report.add_column(column.replace("_", " "), justify="right")
        for split in manifest["splits"]:
            row = packing[split]
            report.add_row(split, *(f"{row[c]:.4f}" if isinstance(row[c], float) else str(row[c]) for c in columns))
        console.print(report)
