"""`hvdbench prepare images` and `prepare digits`: the `images` kind's writers on the command line
(listed in resnet50's SPEC.prepare_commands, added to `hvdbench prepare` by hvdbench/cli/prepare.py)."""

from pathlib import Path

import click

from hvdbench.cli.lists import FiniteRange
from hvdbench.cli.prepare import OUT, OVERWRITE, WORKERS, summary


@click.command()
@click.option("--src", required=True, type=click.Path(path_type=Path),
              help="ImageNet-style tree: SRC/train/<class>/*.JPEG and optionally SRC/val/<class>/*.")
@OUT
@click.option("--size", type=click.IntRange(min=1), default=224, show_default=True,
              help="Output images are SIZE x SIZE (shorter side resized, centre crop).")
@click.option("--samples-per-shard", type=click.IntRange(min=1), default=1024, show_default=True)
@click.option("--val-fraction", type=FiniteRange(0, 1, max_open=True), default=0.05, show_default=True,
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
    from hvdbench.data.parallel import PrepareOptions
    from hvdbench.families.images.prepare import prepare_images

    summary(prepare_images(src, out, size=size, samples_per_shard=samples_per_shard,
                            strict=strict, val_fraction=val_fraction, seed=seed,
                            options=PrepareOptions(workers=workers, overwrite=overwrite)), out)


@click.command()
@OUT
@click.option("--size", type=click.IntRange(min=8), default=16, show_default=True,
              help="Upsample 8x8 to SIZE x SIZE (16: the ResNet debug flavor's size, tuned to its target).")
@click.option("--val-fraction", type=FiniteRange(0, 1, min_open=True, max_open=True), default=0.2,
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
    from hvdbench.data.parallel import PrepareOptions
    from hvdbench.families.images.digits import prepare_digits

    summary(prepare_digits(out, size=size, val_fraction=val_fraction, samples_per_shard=samples_per_shard,
                            seed=seed, options=PrepareOptions(overwrite=overwrite)), out)
