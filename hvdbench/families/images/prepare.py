"""ImageNet-style folder tree -> HDF5 shards of fixed-size uint8 images with integer labels.

    hvdbench prepare images --src /data/imagenet --out data/imagenet --size 224
    mpirun -np 4 hvdbench prepare images --src /data/imagenet --out data/imagenet

`SRC/train/<class>/*.JPEG` (and `SRC/val/<class>/...`; without `val/`, a seeded, per-class
`val_fraction` of train is held out). Class indices follow the sorted class folder names of `train/`.
Each image is decoded with Pillow, its shorter side resized to `size` and the centre cropped to a
square. The file list is shuffled with the seed before it is cut into shards, so every shard mixes
all classes and the readers' block-wise shuffling still gives well-mixed batches.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path

import numpy as np

from hvdbench.data import manifest as mf
from hvdbench.data.parallel import PrepareOptions, ShardJob, World, finish, run_jobs, start
from hvdbench.data.shards import shard_name, write_shard
from hvdbench.errors import DatasetError
from hvdbench.families.images.data import IMAGES

IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm"}
REPORT_FIRST = 5  # skipped paths named in the report


def decode_image(path: str | Path, size: int) -> np.ndarray:
    """(size, size, 3) uint8: shorter side resized to `size`, centre crop."""
    from PIL import Image, ImageOps

    with Image.open(path) as im:
        # JPEG only: decode at the smallest 1/2, 1/4, 1/8 scale still >= size (DCT scaling; much faster).
        im.draft("RGB", (size, size))
        rgb = im.convert("RGB")
    return np.asarray(ImageOps.fit(rgb, (size, size), Image.Resampling.BILINEAR))


def scan_tree(src: Path, val_fraction: float, seed: int) -> dict:
    """{class_names, items: {split: [(relpath, label, size, mtime_ns)]}, ignored: [relpath]}.

    One-line DatasetError for a missing train/, an empty class folder or a tree without images.
    """
    src = Path(src)
    train = src / "train"
    if not train.is_dir():
        raise DatasetError(f"{src}: no train/ folder (expected {src}/train/<class>/*.JPEG)")
    classes = sorted(p.name for p in train.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not classes:
        raise DatasetError(f"{train}: no class folders, so no images")
    index = {name: i for i, name in enumerate(classes)}
    items: dict[str, list] = {}
    ignored: list[str] = []
    splits = ["train"] + (["val"] if (src / "val").is_dir() else [])
    for split in splits:
        items[split] = []
        for cls in sorted(p.name for p in (src / split).iterdir() if p.is_dir() and not p.name.startswith(".")):
            if cls not in index:
                raise DatasetError(f"{src / split / cls}: class {cls!r} is not a class of {train}")
            found = 0
            for entry in sorted(os.scandir(src / split / cls), key=lambda e: e.name):
                if entry.name.startswith(".") or not entry.is_file():
                    continue
                rel = f"{split}/{cls}/{entry.name}"
                if Path(entry.name).suffix.lower() not in IMAGE_SUFFIXES:
                    ignored.append(rel)
                    continue
                st = entry.stat()
                items[split].append((rel, index[cls], st.st_size, st.st_mtime_ns))
                found += 1
            if not found:
                raise DatasetError(f"{src / split / cls}: empty class folder (no image files)")
    if not items["train"]:
        raise DatasetError(f"{train}: no images")
    if "val" not in items and val_fraction > 0:
        items["train"], items["val"] = _hold_out(items["train"], val_fraction, seed)
    return {"class_names": classes, "items": items, "ignored": ignored}


def _hold_out(train: list, fraction: float, seed: int) -> tuple[list, list]:
    """Seeded, per-class hold-out: round(fraction * n) of each class (at least one where n > 1)."""
    rng = np.random.default_rng([seed, 1])
    by_class: dict[int, list] = {}
    for item in train:
        by_class.setdefault(item[1], []).append(item)
    keep, held = [], []
    for label in sorted(by_class):
        group = by_class[label]
        k = min(len(group) - 1, max(1, round(fraction * len(group)))) if len(group) > 1 else 0
        chosen = set(rng.choice(len(group), size=k, replace=False).tolist())
        for i, item in enumerate(group):
            (held if i in chosen else keep).append(item)
    return keep, held


def plan_shards(items: dict[str, list], samples_per_shard: int, seed: int, params: dict) -> list[ShardJob]:
    """Shuffle each split's files with the seed and cut them into shards; names depend only on that."""
    ph = mf.params_hash(params)
    jobs = []
    for split, split_items in items.items():
        order = np.random.default_rng([seed, 0 if split == "train" else 2]).permutation(len(split_items))
        shuffled = [split_items[i] for i in order]
        count = math.ceil(len(shuffled) / samples_per_shard)
        for k in range(count):
            part = shuffled[k * samples_per_shard:(k + 1) * samples_per_shard]
            source = hashlib.sha256(json.dumps([ph, part]).encode()).hexdigest()
            jobs.append(ShardJob.single(split, shard_name(split, k, count), source, part))
    return jobs


def prepare_images(src: Path, out: Path, *, size: int = 224, samples_per_shard: int = 1024,
                   strict: bool = False, val_fraction: float = 0.05, seed: int = 0,
                   options: PrepareOptions = PrepareOptions()) -> dict:
    """Prepare an image tree; returns the manifest (on every rank)."""
    src, out = Path(src).resolve(), Path(out)
    if size < 1 or samples_per_shard < 1:
        raise DatasetError("--size and --samples-per-shard must be positive")
    world = World.detect()
    params = {"src": str(src), "size": size, "samples_per_shard": samples_per_shard,
              "val_fraction": val_fraction, "seed": seed}
    tree = world.on_root(lambda: scan_tree(src, val_fraction, seed))
    if tree["ignored"] and strict:
        raise DatasetError(f"{src / tree['ignored'][0]}: not an image file (--strict)")
    jobs = plan_shards(tree["items"], samples_per_shard, seed, params)
    for job in jobs:
        job.work = {"src": str(src), "size": size, "strict": strict,
                    "items": [(rel, label) for rel, label, *_ in job.work]}
    start(out, IMAGES.name, params, options.overwrite, world)
    records = run_jobs(out, jobs, _make_shard, world=world, workers=options.workers, label="images")
    skipped = list(tree["ignored"])
    for job in jobs:
        skipped += records[job.file]["info"].get("skipped", [])
    fields = IMAGES.fields({"image_size": size})
    manifest = mf.new_manifest(IMAGES.name, fields, seed, params, options.command,
                               num_classes=len(tree["class_names"]), class_names=tree["class_names"],
                               image_size=size, skipped={"count": len(skipped), "first": skipped[:REPORT_FIRST]})
    return finish(out, jobs, records, manifest, world)


def _make_shard(job: ShardJob, out: Path) -> dict:
    src, size, strict = Path(job.work["src"]), job.work["size"], job.work["strict"]
    items = job.work["items"]
    images = np.empty((len(items), size, size, 3), np.uint8)
    labels, skipped = [], []
    for rel, label in items:
        try:
            images[len(labels)] = decode_image(src / rel, size)
        except Exception as e:  # noqa: BLE001 - any decoder failure means "unreadable image": skip it
            if strict:
                raise DatasetError(f"{src / rel}: unreadable image ({type(e).__name__}: {e}) (--strict)") from None
            skipped.append(rel)
            continue
        labels.append(label)
    return write_shard(out / job.file, {"images": images[:len(labels)], "labels": np.asarray(labels, np.int64)},
                       job.source, info={"skipped": skipped})
