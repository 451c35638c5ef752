"""Built-in real images: scikit-learn's bundled handwritten digits, no download.

    hvdbench prepare digits --out data/digits --size 16

1,797 real 8x8 greyscale scans (values 0..16) of the digits 0-9 (the UCI "optdigits" test set, shipped
inside scikit-learn). Values are scaled to 0..255, upsampled to `size` x `size`, repeated over three
channels, split train/val stratified by class with the seed, and written in the `images` shard
format, so the quick start and the tests train ResNet on real data.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import numpy as np

from hvdbench.data import manifest as mf
from hvdbench.data.parallel import PrepareOptions, ShardJob, World, finish, run_jobs, start
from hvdbench.data.shards import shard_name, write_shard
from hvdbench.errors import DatasetError
from hvdbench.families.images.data import IMAGES


def load(size: int, val_fraction: float, seed: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """{split: (images (n, size, size, 3) uint8, labels (n,) int64)}."""
    from PIL import Image
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    pixels = np.round(digits.images * (255.0 / 16.0)).astype(np.uint8)
    up = np.stack([np.asarray(Image.fromarray(p, "L").resize((size, size), Image.Resampling.BILINEAR))
                   for p in pixels])
    images = np.repeat(up[..., None], 3, axis=-1)
    labels = digits.target.astype(np.int64)
    x_train, x_val, y_train, y_val = train_test_split(images, labels, test_size=val_fraction,
                                                      stratify=labels, random_state=seed)
    return {"train": (x_train, y_train), "val": (x_val, y_val)}


def prepare_digits(out: Path, *, size: int = 16, val_fraction: float = 0.2, samples_per_shard: int = 1024,
                   seed: int = 0, options: PrepareOptions = PrepareOptions()) -> dict:
    out = Path(out)
    if size < 8:
        raise DatasetError("--size must be at least 8 (the digits are 8x8)")
    if not 0 < val_fraction < 1:
        raise DatasetError("--val-fraction must be between 0 and 1")
    world = World.detect()
    params = {"size": size, "val_fraction": val_fraction, "samples_per_shard": samples_per_shard, "seed": seed}
    data = load(size, val_fraction, seed)
    jobs = []
    for split, (images, labels) in data.items():
        count = math.ceil(len(labels) / samples_per_shard)
        for k in range(count):
            part = slice(k * samples_per_shard, (k + 1) * samples_per_shard)
            arrays = {"images": images[part], "labels": labels[part]}
            source = hashlib.sha256((mf.params_hash(params) + str(k)).encode()).hexdigest()
            jobs.append(ShardJob.single(split, shard_name(split, k, count), source, arrays))
    start(out, IMAGES.name, params, options.overwrite, world)
    records = run_jobs(out, jobs, _write, world=world, workers=1, label="digits")
    fields = IMAGES.fields({"image_size": size})
    manifest = mf.new_manifest(IMAGES.name, fields, seed, params, options.command, num_classes=10,
                               class_names=[str(d) for d in range(10)], image_size=size,
                               source="sklearn.datasets.load_digits")
    return finish(out, jobs, records, manifest, world)


def _write(job: ShardJob, out: Path) -> dict:
    return write_shard(out / job.file, job.work, job.source)


def write_tree(root: Path, *, size: int = 32, per_class: int | None = None, val_fraction: float = 0.2,
               seed: int = 0) -> dict[str, int]:
    """Write the digits as an ImageNet-style tree (root/{train,val}/<digit>/NNNN.png|.JPEG, alternating
    formats): real image files for trying, testing and benchmarking `prepare images`. Returns the
    number of files per split."""
    from PIL import Image

    root = Path(root)
    written = {}
    for split, (images, labels) in load(size, val_fraction, seed).items():
        per = {}
        for i, (image, label) in enumerate(zip(images, labels)):
            label = int(label)
            if per_class is not None and per.get(label, 0) >= per_class:
                continue
            per[label] = per.get(label, 0) + 1
            folder = root / split / str(label)
            folder.mkdir(parents=True, exist_ok=True)
            jpeg = i % 2 == 1
            Image.fromarray(image).save(folder / f"{i:04d}.{'JPEG' if jpeg else 'png'}",
                                        **({"quality": 95} if jpeg else {}))
        written[split] = sum(per.values())
    return written
