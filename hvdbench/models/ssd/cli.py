"""`hvdbench prepare coco` and `prepare digit-scenes`: the `detection` kind's writers on the command
line (listed in the SSD spec's prepare_commands, added to `hvdbench prepare` by
hvdbench/cli/prepare.py; shared by SSD, RetinaNet and Mask R-CNN)."""

from pathlib import Path

import click

from hvdbench.cli.prepare import OUT, OVERWRITE, WORKERS, summary


def _splits(ctx, param, value: str) -> tuple[str, ...]:
    splits = tuple(s.strip() for s in value.split(",") if s.strip())
    bad = [s for s in splits if s not in ("train", "val")]
    if bad or not splits:
        raise click.BadParameter(f"{value!r}: a comma-separated list of train and val")
    return splits


@click.command()
@click.option("--src", required=True, type=click.Path(path_type=Path, file_okay=False),
              help="COCO 2017 folder: SRC/annotations/instances_{train,val}2017.json, SRC/{train,val}2017/*.jpg.")
@OUT
@click.option("--image-size", type=click.IntRange(min=2), default=800, show_default=True,
              help="Images are letterboxed onto IMAGE_SIZE x IMAGE_SIZE (aspect kept, top-left, zero padding); "
                   "300 for SSD, 800 for RetinaNet and Mask R-CNN.")
@click.option("--masks/--no-masks", default=True, show_default=True,
              help="Store instance masks as RLE (Mask R-CNN needs them; SSD and RetinaNet do not).")
@click.option("--max-objects", type=click.IntRange(min=1), default=100, show_default=True,
              help="Object rows per image; an image with more keeps its largest boxes (the count dropped is "
                   "in the manifest).")
@click.option("--splits", default="train,val", show_default=True, callback=_splits,
              help="Which annotation files to prepare.")
@click.option("--samples-per-shard", type=click.IntRange(min=1), default=256, show_default=True)
@WORKERS
@OVERWRITE
def coco(src, out, image_size, masks, max_objects, splits, samples_per_shard, workers, overwrite):
    """COCO 2017 instances -> HDF5 shards of letterboxed images, boxes, labels and RLE masks.

    \b
    Example:
      hvdbench prepare coco --src /data/coco --out data/coco
      hvdbench prepare coco --src /data/coco --out data/coco300 --image-size 300 --no-masks
      mpirun -np 8 hvdbench prepare coco --src /data/coco --out data/coco
    """
    from hvdbench.data.parallel import PrepareOptions, env_rank
    from hvdbench.families.detection.coco import prepare_coco

    manifest = prepare_coco(src, out, image_size=image_size, masks=masks, max_objects=max_objects, splits=splits,
                            samples_per_shard=samples_per_shard,
                            options=PrepareOptions(workers=workers, overwrite=overwrite))
    summary(manifest, out)
    dropped = manifest["dropped"]
    if env_rank() == 0 and (dropped["objects"] or dropped["degenerate_boxes"]):
        click.echo(f"dropped {dropped['objects']} object(s) beyond --max-objects {max_objects} in "
                   f"{dropped['images']} image(s), and {dropped['degenerate_boxes']} box(es) of zero width "
                   f"or height")


@click.command()
@OUT
@click.option("--train", type=click.IntRange(min=1), default=2000, show_default=True, help="Training scenes.")
@click.option("--val", type=click.IntRange(min=1), default=200, show_default=True, help="Validation scenes.")
@click.option("--size", type=click.IntRange(min=12), default=64, show_default=True,
              help="Scenes are SIZE x SIZE; digits are 12-28 px.")
@click.option("--max-objects", type=click.IntRange(min=1), default=3, show_default=True,
              help="Digits per scene: 1 to this many.")
@click.option("--masks/--no-masks", default=True, show_default=True, help="Store the digits' masks (RLE).")
@click.option("--samples-per-shard", type=click.IntRange(min=1), default=1024, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True,
              help="Seeds the digits' train/val split and every scene.")
@OVERWRITE
def digit_scenes(out, train, val, size, max_objects, masks, samples_per_shard, seed, overwrite):
    """Generated detection scenes of scikit-learn's real handwritten digits (10 classes, boxes, masks).

    Each scene holds 1 to --max-objects real 8x8 digit scans, upscaled to 12-28 px and placed with
    little overlap on a noisy dark canvas; train and val scenes use disjoint digits.

    \b
    Example:
      hvdbench prepare digit-scenes --out data/digit-scenes
      hvdbench prepare digit-scenes --out data/scenes128 --size 128 --max-objects 5 --seed 1
    """
    from hvdbench.data.parallel import PrepareOptions
    from hvdbench.families.detection.scenes import SceneOptions, prepare_digit_scenes

    opts = SceneOptions(train=train, val=val, size=size, max_objects=max_objects, masks=masks,
                        samples_per_shard=samples_per_shard, seed=seed)
    summary(prepare_digit_scenes(out, opts=opts, options=PrepareOptions(overwrite=overwrite)), out)
