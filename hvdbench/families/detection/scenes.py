"""`hvdbench prepare digit-scenes`'s writer of the `detection` kind: generated scenes of
scikit-learn's real digits (the detection family; its other writer, COCO, is coco.py).

    hvdbench prepare digit-scenes --out data/digit-scenes        # built in, no download (~1 s)

**Digit scenes** (`prepare_digit_scenes`) are generated: 1..max_objects of scikit-learn's real 8x8
handwritten digits (sklearn.datasets.load_digits), each upscaled to 12-28 px, placed on a dark S x S
canvas without heavy overlap, with light Gaussian noise. An object's mask is its digit's pixels
above 0.3 of the digit's maximum, its box the mask's tight bounds (pixel edges: x2 = last column +
1), its label the digit (10 classes, class_names "0".."9", category_ids 1..10 as COCO's start at 1).
Train scenes use a stratified train split of the digits, val scenes the rest: no digit scan is in
both. Every scene is seeded by (seed, split, index), so the data is the same for a seed on any
machine. The manifest says `generated: true`.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from hvdbench.data import manifest as mf
from hvdbench.data.parallel import PrepareOptions, ShardJob, World, finish, run_jobs, start
from hvdbench.data.shards import shard_name, write_shard
from hvdbench.errors import DatasetError
from hvdbench.families.detection.data import DETECTION, mask_width, rle_of

SPLITS = ("train", "val")
DIGIT_PX = (12, 28)  # a digit's side on the canvas, drawn uniformly
INK = 0.3  # a digit's pixels above this share of its maximum are its mask
MAX_OVERLAP = 0.2  # two digits' boxes may share at most this much of the smaller one
PLACE_TRIES = 20  # positions tried for a digit before it is left out of the scene
NOISE_STD = 8.0  # Gaussian noise on the 0-255 scale
DIGIT_VAL_FRACTION = 0.2  # the digits held out for val scenes, per class


@dataclass(frozen=True)
class SceneOptions:
    """What `prepare_digit_scenes` generates: training and validation scenes, the canvas side, 1 to
    max_objects digits a scene, whether their masks are stored, scenes per shard, and the seed of the
    digits' split and of every scene. `hvdbench prepare digit-scenes --out d --size 128 --max-objects 5`."""

    train: int = 2000
    val: int = 200
    size: int = 64
    max_objects: int = 3
    masks: bool = True
    samples_per_shard: int = 1024
    seed: int = 0


def digit_pool(seed: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """{split: (digits (n, 8, 8) uint8 0..255, labels (n,))}: scikit-learn's 1,797 digits, split
    stratified by class with the seed."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    pixels = np.round(digits.images * (255.0 / 16.0)).astype(np.uint8)
    x_train, x_val, y_train, y_val = train_test_split(pixels, digits.target, test_size=DIGIT_VAL_FRACTION,
                                                      stratify=digits.target, random_state=seed)
    return {"train": (x_train, y_train), "val": (x_val, y_val)}


def _overlap(a: tuple, b: tuple) -> float:
    """Intersection of two xyxy boxes over the smaller one's area."""
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    if w <= 0 or h <= 0:
        return 0.0
    smaller = min((a[2] - a[0]) * (a[3] - a[1]), (b[2] - b[0]) * (b[3] - b[1]))
    return w * h / smaller


def digit_scene(digits: np.ndarray, labels: np.ndarray, size: int, max_objects: int,
                rng: np.random.Generator) -> dict:
    """One scene: {"image": (S, S, 3) uint8, "boxes": (k, 4) float32, "labels": (k,), "masks":
    (k, S, S) uint8}, 1 <= k <= max_objects (a digit with no free place is left out; the first
    always fits)."""
    from PIL import Image

    canvas = np.zeros((size, size), np.float32)
    boxes, classes, masks = [], [], []
    for _ in range(int(rng.integers(1, max_objects + 1))):
        d = int(rng.integers(len(digits)))
        side = int(rng.integers(DIGIT_PX[0], min(DIGIT_PX[1], size) + 1))
        patch = np.asarray(Image.fromarray(digits[d]).resize((side, side), Image.Resampling.BILINEAR),
                           np.float32) / 255.0
        ink = patch > INK * patch.max()
        ys, xs = np.nonzero(ink)
        for _ in range(PLACE_TRIES):
            x, y = (int(v) for v in rng.integers(0, size - side + 1, 2))
            box = (x + xs.min(), y + ys.min(), x + xs.max() + 1, y + ys.max() + 1)
            if all(_overlap(box, b) <= MAX_OVERLAP for b in boxes):
                break
        else:
            continue
        region = canvas[y:y + side, x:x + side]
        np.maximum(region, patch, out=region)  # light ink on a dark canvas, as the scans are
        mask = np.zeros((size, size), np.uint8)
        mask[y:y + side, x:x + side] = ink
        boxes.append(box)
        classes.append(int(labels[d]))
        masks.append(mask)
    noisy = canvas * 255.0 + rng.normal(0.0, NOISE_STD, canvas.shape)
    gray = np.clip(np.round(noisy), 0, 255).astype(np.uint8)
    return {"image": np.repeat(gray[..., None], 3, axis=-1), "boxes": np.asarray(boxes, np.float32),
            "labels": np.asarray(classes, np.int32), "masks": np.stack(masks)}


def digit_scenes(counts: dict[str, int], size: int, max_objects: int, seed: int) -> dict[str, list[dict]]:
    """{split: [scene, ...]} with scene["rles"] (the masks' RLE bytes) and scene["image_id"]:
    train scenes are ids 1..n_train, val scenes follow."""
    pool = digit_pool(seed)
    scenes, next_id = {}, 1
    for s, split in enumerate(SPLITS):
        digits, labels = pool[split]
        scenes[split] = []
        for i in range(counts[split]):
            scene = digit_scene(digits, labels, size, max_objects, np.random.default_rng([seed, s, i]))
            scene["rles"] = [rle_of(m) for m in scene.pop("masks")]
            scene["image_id"] = next_id
            next_id += 1
            scenes[split].append(scene)
    return scenes


def _scene_arrays(scenes: list[dict], size: int, max_objects: int, mask_bytes: int) -> dict[str, np.ndarray]:
    """The detection fields of a list of scenes (the masks already RLE-encoded)."""
    n = len(scenes)
    info = {"image_size": size, "max_objects": max_objects, "mask_bytes": mask_bytes, "num_classes": 10}
    arrays = {name: np.zeros((n, *spec["shape"]), spec["dtype"]) for name, spec in DETECTION.fields(info).items()}
    arrays["labels"][:] = -1
    for i, scene in enumerate(scenes):
        k = len(scene["labels"])
        arrays["images"][i] = scene["image"]
        arrays["boxes"][i, :k] = scene["boxes"]
        arrays["labels"][i, :k] = scene["labels"]
        arrays["num_objects"][i] = k
        arrays["image_id"][i] = scene["image_id"]
        if mask_bytes:
            for j, counts in enumerate(scene["rles"]):
                arrays["masks"][i, j, :len(counts)] = np.frombuffer(counts, np.uint8)
    return arrays


def prepare_digit_scenes(out: Path, *, opts: SceneOptions = SceneOptions(),
                         options: PrepareOptions = PrepareOptions()) -> dict:
    """Generate digit scenes into `out`; returns the manifest (on every rank)."""
    out = Path(out)
    if opts.size < DIGIT_PX[0]:
        raise DatasetError(f"--size must be at least {DIGIT_PX[0]} (the smallest digit)")
    if opts.train < 1 or opts.val < 1 or opts.max_objects < 1 or opts.samples_per_shard < 1:
        raise DatasetError("--train, --val, --max-objects and --samples-per-shard must be positive")
    world = World.detect()
    params = asdict(opts)  # its fields in the order the params always had: the shards keep their hashes
    # Every rank generates the scenes (about a second for the defaults): no data crosses ranks.
    scenes = digit_scenes({"train": opts.train, "val": opts.val}, opts.size, opts.max_objects, opts.seed)
    longest = max(len(c) for split in scenes.values() for scene in split for c in scene["rles"])
    mask_bytes = mask_width(longest) if opts.masks else 0
    jobs = []
    for split, items in scenes.items():
        count = math.ceil(len(items) / opts.samples_per_shard)
        for k in range(count):
            part = items[k * opts.samples_per_shard:(k + 1) * opts.samples_per_shard]
            arrays = _scene_arrays(part, opts.size, opts.max_objects, mask_bytes)
            source = hashlib.sha256((mf.params_hash(params) + f"/{split}/{k}").encode()).hexdigest()
            jobs.append(ShardJob.single(split, shard_name(split, k, count), source, arrays))
    start(out, DETECTION.name, params, options.overwrite, world)
    records = run_jobs(out, jobs, _write_arrays, world=world, workers=1, label="digit scenes")
    info = {"num_classes": 10, "image_size": opts.size, "max_objects": opts.max_objects, "mask_bytes": mask_bytes}
    manifest = mf.new_manifest(DETECTION.name, DETECTION.fields(info), opts.seed, params, options.command, **info,
                               class_names=[str(d) for d in range(10)], category_ids=list(range(1, 11)),
                               generated=True,
                               source="generated: scenes of scikit-learn's real 8x8 digits "
                                      "(sklearn.datasets.load_digits)")
    return finish(out, jobs, records, manifest, world)


def _write_arrays(job: ShardJob, out: Path) -> dict:
    return write_shard(out / job.file, job.work, job.source)
