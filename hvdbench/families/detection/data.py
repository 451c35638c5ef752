"""The `detection` dataset kind: images with boxes, labels and (optionally) instance masks, shared by
SSD, RetinaNet and Mask R-CNN (hvdbench/families/detection/; its writers are coco.py and scenes.py).

    hvdbench prepare coco --src /data/coco --out data/coco --image-size 800           # real COCO 2017
    hvdbench prepare digit-scenes --out data/digit-scenes                              # built-in, 64 px
    hvdbench prepare synthetic --like detection --samples 1000 --size 300 --out data/synth-det

Every sample is one image letterboxed onto a square S x S canvas and its first `num_objects` of M
object rows (the rest are padding), so every field has a fixed shape, as hvdbench's shards need:

    images      (S, S, 3) uint8    scaled by S / max(h, w) (aspect kept), placed top-left, rest 0
    boxes       (M, 4) float32     x1, y1, x2, y2 in canvas pixels; padding rows 0
    labels      (M,) int32         contiguous class index 0..C-1 (no background class); padding -1
    crowd       (M,) uint8         COCO's iscrowd: 1 = a crowd region, ignored by the evaluator and
                                   not trained on
    num_objects () int32           how many rows are real
    image_id    () int64           the source's image id (unique in the dataset; the evaluator's key)
    masks       (M, mask_bytes) uint8   only when mask_bytes > 0: each object's mask at canvas
                                   resolution as COCO compressed-RLE counts (pycocotools'
                                   `mask.encode(...)["counts"]`), NUL-padded to mask_bytes

RLE keeps masks small (a 28-pixel digit at 64 px is ~40 bytes, a whole-canvas rectangle 6 bytes)
and is what the COCO evaluator consumes. The helpers below turn rows into objects and back:

    objects(batch, i)                  -> sample i's real objects (boxes, labels, crowd, masks)
    encode_masks(masks, mask_bytes)    -> (n, mask_bytes) uint8 rows;  decode_masks(rows, size)
    rle_of(mask)                       -> one mask's RLE counts bytes;  decode_rle(rle dict) -> mask

The manifest also holds `class_names`, `category_ids` (the source's category id of each class
index) and `source`.
"""

from __future__ import annotations

import numpy as np

from hvdbench.contracts import DatasetKind
from hvdbench.data.manifest import field_spec

# A rectangle's RLE is one run pair per column plus a few longer counts at each end: at most
# 2 * width + RECT_RLE_SLACK bytes (measured for canvases up to 800 px). `synthetic` keeps its
# rectangles narrow enough to fit the mask_bytes it is given.
RECT_RLE_SLACK = 16
SYNTHETIC_MAX_OBJECTS = 10  # objects per random scene (at most M)
MASK_BYTES_ALIGN = 8  # a writer's masks field is its longest RLE rounded up to this


def mask_width(longest: int) -> int:
    """The masks field's width (`mask_bytes`) for a dataset whose longest mask RLE is `longest`
    bytes: rounded up to MASK_BYTES_ALIGN, and at least that (what both writers store)."""
    return max(MASK_BYTES_ALIGN, -(-longest // MASK_BYTES_ALIGN) * MASK_BYTES_ALIGN)


def rle_of(mask: np.ndarray) -> bytes:
    """The COCO compressed-RLE counts of one (H, W) mask (bool or 0/1), column-major as COCO's."""
    from pycocotools import mask as mask_utils

    return mask_utils.encode(np.asfortranarray(mask, dtype=np.uint8))["counts"]


def decode_rle(rle: dict) -> np.ndarray:
    """pycocotools' `mask.decode` of one RLE dict ({"size": [h, w], "counts": ...}) -> (h, w) uint8.

    pycocotools 2.0.11 builds its array the pre-numpy-2 way, which numpy 2 answers with a
    DeprecationWarning on every call; the result is right, so that one warning is silenced here."""
    import warnings

    from pycocotools import mask as mask_utils

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="__array__ implementation doesn't accept a copy keyword",
                                category=DeprecationWarning)
        return mask_utils.decode(rle)


def encode_masks(masks: np.ndarray, mask_bytes: int) -> np.ndarray:
    """(n, H, W) masks -> (n, mask_bytes) uint8 rows of their RLE counts, NUL-padded. ValueError
    naming the length when a mask's RLE does not fit (RLE bytes are printable, never NUL)."""
    rows = np.zeros((len(masks), mask_bytes), np.uint8)
    for i, mask in enumerate(masks):
        counts = rle_of(mask)
        if len(counts) > mask_bytes:
            raise ValueError(f"mask {i}'s RLE is {len(counts)} bytes, over mask_bytes {mask_bytes}")
        rows[i, :len(counts)] = np.frombuffer(counts, np.uint8)
    return rows


def decode_masks(rows: np.ndarray, size: int) -> np.ndarray:
    """(n, mask_bytes) RLE rows -> (n, size, size) uint8 0/1 masks; an all-NUL row (padding) is
    an empty mask."""
    rows = np.asarray(rows, np.uint8)
    out = np.zeros((len(rows), size, size), np.uint8)
    for i, row in enumerate(rows):
        counts = row.tobytes().rstrip(b"\0")
        if counts:
            out[i] = decode_rle({"size": [size, size], "counts": counts})
    return out


def objects(batch: dict[str, np.ndarray], i: int) -> dict:
    """Sample i's real objects from a batch of this kind's fields (numpy): {"boxes": (n, 4)
    float32 xyxy, "labels": (n,) int64, "crowd": (n,) bool, "masks": (n, S, S) uint8 or None}."""
    n = int(batch["num_objects"][i])
    masks = None
    if "masks" in batch:
        masks = decode_masks(np.asarray(batch["masks"][i][:n]), int(batch["images"].shape[1]))
    return {"boxes": np.asarray(batch["boxes"][i][:n], np.float32),
            "labels": np.asarray(batch["labels"][i][:n], np.int64),
            "crowd": np.asarray(batch["crowd"][i][:n]).astype(bool),
            "masks": masks}


class Detection(DatasetKind):
    name = "detection"
    info_keys = ("num_classes", "image_size", "max_objects", "mask_bytes")
    # Shards follow the source's image order, so readers shuffle single samples.
    shuffled_when_written = False
    samples_per_shard = 256  # 800 px images are 1.9 MB: ~0.5 GB shards
    # COCO 2017 as SSD/RetinaNet/Mask R-CNN see it: 80 categories, 800 px, up to 100 objects kept;
    # no masks unless asked (--info mask_bytes=N).
    synthetic_defaults = {"num_classes": 80, "image_size": 800, "max_objects": 100, "mask_bytes": 0}
    synthetic_flags = {"size": "image_size", "num-classes": "num_classes"}  # as the images kind's

    def fields(self, info: dict) -> dict[str, dict]:
        s, m = int(info["image_size"]), int(info["max_objects"])
        fields = {"images": field_spec((s, s, 3), "uint8"), "boxes": field_spec((m, 4), "float32"),
                  "labels": field_spec((m,), "int32"), "crowd": field_spec((m,), "uint8"),
                  "num_objects": field_spec((), "int32"), "image_id": field_spec((), "int64")}
        if int(info["mask_bytes"]) > 0:
            fields["masks"] = field_spec((m, int(info["mask_bytes"])), "uint8")
        return fields

    def limits(self, manifest: dict) -> dict[str, tuple[int, int]]:
        return {"labels": (-1, manifest["num_classes"] - 1), "crowd": (0, 1),
                "num_objects": (0, manifest["max_objects"]), "boxes": (0, manifest["image_size"])}

    def synthetic(self, n: int, info: dict, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Random scenes: noise images with 1..min(M, 10) random integer-pixel boxes each, random
        labels, no crowd, random image ids (int63: collisions are negligible), and with
        mask_bytes > 0 each box's filled rectangle as its mask; boxes are then at most
        (mask_bytes - 16) / 2 pixels wide, so the rectangle's RLE fits."""
        s, m, c = int(info["image_size"]), int(info["max_objects"]), int(info["num_classes"])
        mask_bytes = int(info["mask_bytes"])
        if s < 2 or m < 1 or c < 1:
            raise ValueError(f"detection data needs image_size >= 2, max_objects >= 1 and num_classes >= 1, "
                             f"got {s}, {m}, {c}")
        widest = s
        if mask_bytes > 0:
            widest = min(s, (mask_bytes - RECT_RLE_SLACK) // 2)
            if widest < 1:
                raise ValueError(f"mask_bytes {mask_bytes} is too small for rectangle masks "
                                 f"(at least {RECT_RLE_SLACK + 2})")
        out = {"images": rng.integers(0, 256, (n, s, s, 3), dtype=np.uint8),
               "boxes": np.zeros((n, m, 4), np.float32), "labels": np.full((n, m), -1, np.int32),
               "crowd": np.zeros((n, m), np.uint8), "num_objects": np.zeros(n, np.int32),
               "image_id": rng.integers(0, 2**62, n, dtype=np.int64)}
        if mask_bytes > 0:
            out["masks"] = np.zeros((n, m, mask_bytes), np.uint8)
        for i in range(n):
            k = int(rng.integers(1, min(m, SYNTHETIC_MAX_OBJECTS) + 1))
            x1 = rng.integers(0, s - 1, k)
            y1 = rng.integers(0, s - 1, k)
            x2 = x1 + 1 + rng.integers(0, np.minimum(s - x1, widest))  # x1 < x2 <= min(s, x1 + widest)
            y2 = y1 + 1 + rng.integers(0, s - y1)
            out["boxes"][i, :k] = np.stack([x1, y1, x2, y2], axis=1)
            out["labels"][i, :k] = rng.integers(0, c, k)
            out["num_objects"][i] = k
            if mask_bytes > 0:
                rects = np.zeros((k, s, s), np.uint8)
                for j in range(k):
                    rects[j, y1[j]:y2[j], x1[j]:x2[j]] = 1
                out["masks"][i, :k] = encode_masks(rects, mask_bytes)
        return out

    def synthetic_files(self, out, info: dict) -> dict:
        c = int(info["num_classes"])
        return {"class_names": [str(k) for k in range(c)], "category_ids": list(range(1, c + 1))}


DETECTION = Detection()
