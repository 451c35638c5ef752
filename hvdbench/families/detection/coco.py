"""`hvdbench prepare coco`'s writer of the `detection` kind: real COCO 2017 (the detection family;
its other writer, digit scenes, is scenes.py).

    hvdbench prepare coco --src /data/coco --out data/coco --image-size 800
    mpirun -np 4 hvdbench prepare coco --src /data/coco --out data/coco --no-masks --image-size 300

**COCO** (`prepare_coco`) reads the official layout: SRC/annotations/instances_{train,val}2017.json
and the images SRC/{train,val}2017/*.jpg. Each image is letterboxed onto the S x S canvas (scaled by
S / max(h, w), bilinear, placed top-left); each annotation's box (COCO xywh, original pixels) is
clipped to its image and scaled to canvas xyxy; category ids become contiguous class indices in
sorted id order (80 in COCO); iscrowd is kept as `crowd`. Images without annotations are kept (the
evaluator needs every val image; MLPerf's training sets drop them, which a model may do by skipping
samples whose num_objects is 0). Boxes of zero width or height (a few in COCO) are dropped and
counted; beyond --max-objects the M largest boxes of an image are kept and the rest counted.
Masks (polygons, or RLE for crowds) are rasterised by pycocotools at the original size, resized
with nearest neighbour onto the same canvas region as the image, and stored as compressed RLE;
`mask_bytes` (the masks field's width) is the longest RLE in the dataset, found by a first pass
over the masks alone (no image is decoded; a fraction of the JPEG work) that a rerun skips when
every shard is already written.

Every rank reads the annotation files itself and validates them before any shard is made: a box
with a non-finite value (NaN, infinity) or a negative width or height, a box outside its image by
more than 1 pixel, an image of no width or height, an unknown category id, an annotation of an
unknown image, a missing image file, a missing or corrupt JSON file each fail with one line naming
the file and the key (and the annotation's id). Shards (images in id order) are made in parallel
(workers, MPI ranks) and resumably.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path

import numpy as np

from hvdbench.data import manifest as mf
from hvdbench.data.parallel import PrepareOptions, ShardJob, World, finish, map_gathered, run_jobs, start
from hvdbench.data.shards import completed_shard, shard_name, write_shard
from hvdbench.errors import DatasetError
from hvdbench.families.detection.data import DETECTION, decode_rle, encode_masks, mask_width, rle_of

SPLITS = ("train", "val")
BOX_TOLERANCE = 1.0  # pixels a COCO box may stick out of its image (rounding in the annotations)


# --- COCO: reading and checking the annotations --------------------------------------------------

def annotation_file(src: Path, split: str) -> Path:
    return Path(src) / "annotations" / f"instances_{split}2017.json"


def load_annotations(path: Path) -> dict:
    """A COCO instances file, with its images, annotations and categories lists."""
    if not path.is_file():
        raise DatasetError(f"{path}: annotations file missing (expected SRC/annotations/{path.name})")
    try:
        with open(path, "rb") as f:
            data = json.load(f)
    except ValueError as e:
        raise DatasetError(f"{path}: not valid JSON ({getattr(e, 'msg', e)}"
                           f"{f' at line {e.lineno}' if hasattr(e, 'lineno') else ''})") from None
    if not isinstance(data, dict):
        raise DatasetError(f"{path}: not a COCO instances file (top level is not an object)")
    for key in ("images", "annotations", "categories"):
        if not isinstance(data.get(key), list):
            raise DatasetError(f"{path}: key {key!r} missing or not a list")
    return data


def _get(entry: dict, key: str, where: str, types):
    value = entry.get(key) if isinstance(entry, dict) else None
    if not isinstance(value, types) or isinstance(value, bool):
        raise DatasetError(f"{where}: key {key!r} missing or of the wrong type")
    return value


def read_categories(path: Path, data: dict) -> list[dict]:
    """The categories sorted by id: class index i is the i-th smallest id."""
    cats = []
    for k, cat in enumerate(data["categories"]):
        where = f"{path}: categories[{k}]"
        cats.append({"id": _get(cat, "id", where, int), "name": str(cat.get("name", cat.get("id")))})
    ids = [c["id"] for c in cats]
    if not cats or len(set(ids)) != len(ids):
        raise DatasetError(f"{path}: key 'categories' must list distinct ids (got {len(ids)}, "
                           f"{len(set(ids))} distinct)")
    return sorted(cats, key=lambda c: c["id"])


def scan_split(src: Path, split: str, data: dict, path: Path, class_of: dict[int, int], max_objects: int,
               masks: bool) -> dict:
    """The split's images in id order, each with its checked annotations; DatasetError naming the
    file and key for anything wrong. Returns {"images": [...], "dropped": n, "crowded_images": n,
    "degenerate": n}."""
    images = {}
    for k, im in enumerate(data["images"]):
        where = f"{path}: images[{k}]"
        image_id = _get(im, "id", where, int)
        if image_id in images:
            raise DatasetError(f"{path}: image id {image_id} is listed twice")
        file = f"{split}2017/{_get(im, 'file_name', where, str)}"
        try:
            st = os.stat(src / file)
        except FileNotFoundError:
            raise DatasetError(f"{src / file}: image file missing ({path.name} lists it as image {image_id})") from None
        width, height = _get(im, "width", where, int), _get(im, "height", where, int)
        if width < 1 or height < 1:
            raise DatasetError(f"{where}: image {image_id} is {width}x{height}; width and height must be positive")
        images[image_id] = {"id": image_id, "file": file, "width": width, "height": height, "bytes": st.st_size,
                            "mtime_ns": st.st_mtime_ns, "anns": []}
    degenerate = 0
    for k, ann in enumerate(data["annotations"]):
        ann_id = _get(ann, "id", f"{path}: annotations[{k}]", int)
        where = f"{path}: annotation {ann_id}"
        image_id = _get(ann, "image_id", where, int)
        if image_id not in images:
            raise DatasetError(f"{where}: image_id {image_id} is not in 'images'")
        im = images[image_id]
        category = _get(ann, "category_id", where, int)
        if category not in class_of:
            raise DatasetError(f"{where} ({im['file']}): category_id {category} is not in 'categories'")
        bbox = ann.get("bbox")
        if not (isinstance(bbox, list) and len(bbox) == 4
                and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in bbox)):
            raise DatasetError(f"{where} ({im['file']}): key 'bbox' must be [x, y, width, height]")
        x, y, w, h = (float(v) for v in bbox)
        # NaN passes every comparison below (each is false) and max/min clip it to the image's edge:
        # refuse it, and infinities, before them.
        if not all(math.isfinite(v) for v in (x, y, w, h)):
            raise DatasetError(f"{where} ({im['file']}): bbox {bbox} holds a non-finite value (NaN or infinity)")
        if w < 0 or h < 0:
            raise DatasetError(f"{where} ({im['file']}): bbox {bbox} has a negative width or height")
        W, H = im["width"], im["height"]
        if (x < -BOX_TOLERANCE or y < -BOX_TOLERANCE
                or x + w > W + BOX_TOLERANCE or y + h > H + BOX_TOLERANCE):
            raise DatasetError(f"{where} ({im['file']}): bbox {bbox} lies outside the {W}x{H} image")
        # Within the tolerance: clip to the image.
        x1, y1, x2, y2 = max(0.0, x), max(0.0, y), min(float(W), x + w), min(float(H), y + h)
        if x2 <= x1 or y2 <= y1:
            degenerate += 1
            continue
        entry = {"id": ann_id, "box": [x1, y1, x2, y2], "class": class_of[category],
                 "crowd": int(bool(ann.get("iscrowd", 0)))}
        if masks:
            segm = ann.get("segmentation")
            if not isinstance(segm, (list, dict)) or not segm:
                raise DatasetError(f"{where} ({im['file']}): key 'segmentation' missing or empty "
                                   f"(needed for masks; or prepare with --no-masks)")
            entry["segmentation"] = segm
        im["anns"].append(entry)
    dropped = crowded = 0
    for im in images.values():
        if len(im["anns"]) > max_objects:
            # Keep the largest boxes (ties: the lower annotation id), then restore the id order.
            kept = sorted(im["anns"], key=lambda a: (-_area(a["box"]), a["id"]))[:max_objects]
            dropped += len(im["anns"]) - max_objects
            crowded += 1
            im["anns"] = sorted(kept, key=lambda a: a["id"])
        else:
            im["anns"].sort(key=lambda a: a["id"])
    return {"images": [images[i] for i in sorted(images)], "dropped": dropped, "crowded_images": crowded,
            "degenerate": degenerate}


def _area(box: list[float]) -> float:
    return (box[2] - box[0]) * (box[3] - box[1])


# --- COCO: images and masks onto the canvas -----------------------------------------------------

def canvas_scale(width: int, height: int, size: int) -> tuple[float, int, int]:
    """(scale, new width, new height) of letterboxing a width x height image onto size x size."""
    scale = size / max(width, height)
    return scale, min(size, max(1, round(width * scale))), min(size, max(1, round(height * scale)))


def annotation_mask(segmentation, height: int, width: int) -> np.ndarray:
    """(height, width) uint8 mask of a COCO segmentation: polygons, uncompressed RLE (crowds) or
    compressed RLE."""
    from pycocotools import mask as mask_utils

    if isinstance(segmentation, list):  # polygons: one RLE each, merged into one mask
        rle = mask_utils.merge(mask_utils.frPyObjects(segmentation, height, width))
    elif isinstance(segmentation.get("counts"), list):  # uncompressed RLE
        rle = mask_utils.frPyObjects(segmentation, height, width)
    else:
        rle = segmentation
    return decode_rle(rle)


def canvas_mask(segmentation, width: int, height: int, size: int) -> np.ndarray:
    """The segmentation's mask on the size x size canvas: rasterised at the original size, resized
    with nearest neighbour onto the image's canvas region (top-left)."""
    from PIL import Image

    _, nw, nh = canvas_scale(width, height, size)
    mask = annotation_mask(segmentation, height, width)
    out = np.zeros((size, size), np.uint8)
    out[:nh, :nw] = np.asarray(Image.fromarray(mask).resize((nw, nh), Image.Resampling.NEAREST))
    return out


def _image_rles(im: dict, size: int) -> list[bytes]:
    return [rle_of(canvas_mask(a["segmentation"], im["width"], im["height"], size)) for a in im["anns"]]


def _longest_rle(work: dict) -> int:
    """The longest canvas RLE among one job's masks (the sizing pass; a module-level function for
    worker processes)."""
    return max((len(r) for im in work["images"] for r in _image_rles(im, work["size"])), default=0)


def _sizing_pass(jobs: list[ShardJob], world: World, workers: int | None) -> int:
    """The longest mask RLE over all jobs: ranks split the jobs, worker processes split a rank's."""
    mine = [job.work for job in jobs[world.rank::world.size]]
    gathered = map_gathered(_longest_rle, mine, world, workers, "coco masks (sizing)")
    return max((n for part in gathered for n in part), default=0)


def _make_coco_shard(job: ShardJob, out: Path) -> dict:
    from PIL import Image

    w = job.work
    src, size, mask_bytes = Path(w["src"]), w["size"], w["mask_bytes"]
    # The fields' shapes (num_classes does not change them).
    info = {"image_size": size, "max_objects": w["max_objects"], "mask_bytes": mask_bytes, "num_classes": 1}
    n = len(w["images"])
    arrays = {name: np.zeros((n, *spec["shape"]), spec["dtype"]) for name, spec in DETECTION.fields(info).items()}
    arrays["labels"][:] = -1
    for i, im in enumerate(w["images"]):
        path = src / im["file"]
        scale, nw, nh = canvas_scale(im["width"], im["height"], size)
        try:
            with Image.open(path) as pil:
                if pil.size != (im["width"], im["height"]):
                    raise DatasetError(f"{path}: image is {pil.size[0]}x{pil.size[1]}, its annotations file "
                                       f"says {im['width']}x{im['height']}")
                pil.draft("RGB", (nw, nh))  # JPEG: decode at a reduced scale when that is still >= the target
                rgb = pil.convert("RGB").resize((nw, nh), Image.Resampling.BILINEAR)
        except FileNotFoundError:
            raise DatasetError(f"{path}: image file missing") from None
        except (OSError, ValueError) as e:
            raise DatasetError(f"{path}: unreadable image ({type(e).__name__}: {e})") from None
        arrays["images"][i, :nh, :nw] = np.asarray(rgb)
        k = len(im["anns"])
        arrays["num_objects"][i] = k
        arrays["image_id"][i] = im["id"]
        for j, ann in enumerate(im["anns"]):
            arrays["boxes"][i, j] = np.asarray(ann["box"], np.float64) * scale
            arrays["labels"][i, j] = ann["class"]
            arrays["crowd"][i, j] = ann["crowd"]
        if mask_bytes and k:
            masks = np.stack([canvas_mask(a["segmentation"], im["width"], im["height"], size) for a in im["anns"]])
            try:
                arrays["masks"][i, :k] = encode_masks(masks, mask_bytes)
            except ValueError as e:  # the sizing pass makes this impossible unless the inputs changed
                raise DatasetError(f"{path}: {e} (rerun with --overwrite)") from None
    np.clip(arrays["boxes"], 0, size, out=arrays["boxes"])  # float rounding at the canvas edge
    return write_shard(out / job.file, arrays, job.source, info={"mask_bytes": mask_bytes})


def prepare_coco(src: Path, out: Path, *, image_size: int = 800, masks: bool = True, max_objects: int = 100,
                 splits: tuple[str, ...] = SPLITS, samples_per_shard: int = 256,
                 options: PrepareOptions = PrepareOptions()) -> dict:
    """Prepare COCO 2017 (or anything in its layout); returns the manifest (on every rank)."""
    src, out = Path(src).resolve(), Path(out)
    splits = tuple(dict.fromkeys(splits))
    if not splits or any(s not in SPLITS for s in splits):
        raise DatasetError(f"--splits must be some of {', '.join(SPLITS)}, got {', '.join(splits) or 'none'}")
    if image_size < 2 or max_objects < 1 or samples_per_shard < 1:
        raise DatasetError("--image-size (>= 2), --max-objects and --samples-per-shard must be positive")
    world = World.detect()
    params = {"src": str(src), "image_size": image_size, "masks": masks, "max_objects": max_objects,
              "splits": list(splits), "samples_per_shard": samples_per_shard}
    # Every rank reads and checks the annotations itself (identically, so a bad file fails on all).
    categories, scans = None, {}
    for split in splits:
        path = annotation_file(src, split)
        data = load_annotations(path)
        cats = read_categories(path, data)
        if categories is None:
            categories = cats
        elif [c["id"] for c in cats] != [c["id"] for c in categories]:
            raise DatasetError(f"{path}: key 'categories' differs from {annotation_file(src, splits[0]).name}'s")
        class_of = {c["id"]: i for i, c in enumerate(categories)}
        scans[split] = scan_split(src, split, data, path, class_of, max_objects, masks)
        del data
    ph = mf.params_hash(params)
    jobs = []
    for split, scan in scans.items():
        items = scan["images"]
        count = math.ceil(len(items) / samples_per_shard)
        for k in range(count):
            part = items[k * samples_per_shard:(k + 1) * samples_per_shard]
            source = hashlib.sha256(json.dumps([ph, part]).encode()).hexdigest()
            jobs.append(ShardJob.single(split, shard_name(split, k, count), source,
                                        {"src": str(src), "size": image_size, "max_objects": max_objects,
                                         "images": part}))
    start(out, DETECTION.name, params, options.overwrite, world)
    mask_bytes = 0
    if masks:
        mask_bytes = world.on_root(lambda: _written_mask_bytes(out, jobs))
        if mask_bytes is None:
            mask_bytes = mask_width(_sizing_pass(jobs, world, options.workers))
    for job in jobs:
        job.work["mask_bytes"] = mask_bytes
    records = run_jobs(out, jobs, _make_coco_shard, world=world, workers=options.workers, label="coco")
    info = {"num_classes": len(categories), "image_size": image_size, "max_objects": max_objects,
            "mask_bytes": mask_bytes}
    dropped = {"objects": sum(s["dropped"] for s in scans.values()),
               "images": sum(s["crowded_images"] for s in scans.values()),
               "degenerate_boxes": sum(s["degenerate"] for s in scans.values())}
    manifest = mf.new_manifest(DETECTION.name, DETECTION.fields(info), 0, params, options.command, **info,
                               class_names=[c["name"] for c in categories],
                               category_ids=[c["id"] for c in categories], source=str(src),
                               dropped=dropped)
    return finish(out, jobs, records, manifest, world)


def _written_mask_bytes(out: Path, jobs: list[ShardJob]) -> int | None:
    """The mask width of an earlier run when every shard is already written, else None."""
    widths = set()
    for job in jobs:
        record = completed_shard(out / job.file, job.source)
        if record is None:
            return None
        widths.add(record["info"].get("mask_bytes"))
    return widths.pop() if len(widths) == 1 and None not in widths else None
