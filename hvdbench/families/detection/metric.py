"""COCO mAP for the detection models: box AP@[.50:.95] (and mask AP for Mask R-CNN), computed by
pycocotools' COCOeval over every rank's detections, as MLPerf's references score SSD, RetinaNet
and Mask R-CNN.

A model's `loss_and_stats`, in evaluation, returns host objects (numpy, Python numbers, bytes):

    {"images": [detections_record(image_id, size, target, boxes, scores, labels, masks), ...],
     "mask_floor": 0.339 | None}     # Mask R-CNN: MLPerf's mask AP target, which rides with the stats

where `target` is `data.objects(batch, i)` (the ground truth of sample i) and boxes/scores/labels
(and masks: (k, S, S) bool/uint8, or RLE bytes) are that image's detections in canvas pixels.
`CocoMap` gathers every rank's images, and its value is the box AP; `reached` also asks the last
evaluation's mask AP to be at or above `mask_floor` when a batch gave one (MLPerf's Mask R-CNN
target is box 0.377 AND mask 0.339).

Ground truth and detections are in canvas coordinates (the letterboxed S x S image); IoU does not
change with a uniform scale, so box AP matches scoring at the original size (the area ranges of
AP_small/medium/large would not, and are not reported). Masks are compared at canvas resolution.
"""

from __future__ import annotations

import contextlib
import io
import itertools

import numpy as np

from hvdbench.contracts import GatheredMetric
from hvdbench.output import line

MAX_DETECTIONS = 100  # per image, COCO's maxDets for AP@[.50:.95]


def _rle_list(masks) -> list[bytes] | None:
    """Masks as RLE counts bytes: (n, S, S) arrays are encoded, a list of bytes is kept."""
    from hvdbench.families.detection.data import rle_of

    if masks is None:
        return None
    if isinstance(masks, np.ndarray) and masks.ndim == 3:
        if masks.dtype.kind == "f":  # probabilities: COCO scores the mask at 0.5, as the references paste it
            masks = masks >= 0.5
        return [rle_of(m) for m in masks]
    return [bytes(m) for m in masks]


def detections_record(image_id: int, size: int, target: dict, boxes, scores, labels, masks=None,
                      max_detections: int = MAX_DETECTIONS) -> dict:
    """One evaluated image, as `CocoMap` reads it.

    target: `data.objects(batch, i)` ({"boxes", "labels", "crowd", "masks"}); boxes (k, 4) xyxy
    canvas pixels, scores (k,), labels (k,) class indices 0..C-1; masks: (k, S, S) canvas masks
    (bool, 0/1, or float probabilities, cut at 0.5), k RLE bytes, or None (box AP only; give an
    empty (0, S, S) array for an image without detections when the others have masks). Numpy
    arrays (call `.cpu().numpy()` on tensors first). Keeps the `max_detections` highest-scoring
    detections (COCO scores 100 per image)."""
    boxes = np.asarray(boxes, np.float32).reshape(-1, 4)
    scores = np.asarray(scores, np.float32).reshape(-1)
    labels = np.asarray(labels, np.int64).reshape(-1)
    keep = np.argsort(-scores, kind="stable")[:max_detections]
    rles = _rle_list(masks)
    return {"image_id": int(image_id), "size": int(size),
            "gt_boxes": np.asarray(target["boxes"], np.float32).reshape(-1, 4),
            "gt_labels": np.asarray(target["labels"], np.int64).reshape(-1),
            "gt_crowd": np.asarray(target["crowd"]).astype(bool).reshape(-1),
            "gt_masks": _rle_list(target.get("masks")),
            "boxes": boxes[keep], "scores": scores[keep], "labels": labels[keep],
            "masks": None if rles is None else [rles[k] for k in keep]}


def _xywh(box) -> list[float]:
    x1, y1, x2, y2 = (float(v) for v in box)
    return [x1, y1, x2 - x1, y2 - y1]


def _sorted_images(images: list[dict]) -> list[dict]:
    """The images by id (every rank builds the same COCO objects); ValueError for none or a repeat."""
    if not images:
        raise ValueError("COCO mAP of an empty evaluation: no validation image on any rank")
    ordered = sorted(images, key=lambda im: int(im["image_id"]))
    for a, b in itertools.pairwise(ordered):
        if int(a["image_id"]) == int(b["image_id"]):
            raise ValueError(f"image_id {a['image_id']} was evaluated twice (ids must be unique)")
    return ordered


def coco_map(images: list[dict], iou_type: str = "bbox") -> float:
    """COCO AP@[.50:.95] (maxDets 100) of `images` (see `detections_record`), for iou_type "bbox"
    or "segm". 0.0 when there is no detection at all; ValueError when there are no images or no
    ground-truth object to find."""
    from pycocotools import mask as mask_utils
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    images = _sorted_images(images)
    segm = iou_type == "segm"
    if iou_type not in ("bbox", "segm"):
        raise ValueError(f"iou_type must be 'bbox' or 'segm', got {iou_type!r}")
    gt_anns, dets, classes = [], [], set()
    for im in images:
        size, image_id = int(im["size"]), int(im["image_id"])
        for j, (box, label, crowd) in enumerate(zip(im["gt_boxes"], im["gt_labels"], im["gt_crowd"])):
            x, y, w, h = _xywh(box)
            ann = {"id": len(gt_anns) + 1, "image_id": image_id, "category_id": int(label) + 1,
                   "bbox": [x, y, w, h], "area": w * h, "iscrowd": int(bool(crowd))}
            if segm:
                ann["segmentation"] = {"size": [size, size], "counts": im["gt_masks"][j]}
                ann["area"] = float(mask_utils.area(ann["segmentation"]))
            gt_anns.append(ann)
            classes.add(int(label))
        for j, (box, score, label) in enumerate(zip(im["boxes"], im["scores"], im["labels"])):
            det = {"image_id": image_id, "category_id": int(label) + 1, "score": float(score)}
            if segm:
                det["segmentation"] = {"size": [size, size], "counts": im["masks"][j]}
            else:
                det["bbox"] = _xywh(box)
            dets.append(det)
            classes.add(int(label))
    if not any(not a["iscrowd"] for a in gt_anns):
        raise ValueError(f"COCO mAP undefined: the {len(images)} evaluated images hold no (non-crowd) object")
    if not dets:
        return 0.0  # pycocotools' loadRes cannot take an empty list; no detection finds nothing
    gt = COCO()
    gt.dataset = {"images": [{"id": int(im["image_id"]), "width": int(im["size"]), "height": int(im["size"])}
                             for im in images],
                  "annotations": gt_anns,
                  "categories": [{"id": c + 1, "name": str(c)} for c in sorted(classes)]}
    with contextlib.redirect_stdout(io.StringIO()):  # pycocotools prints progress and its table
        gt.createIndex()
        evaluator = COCOeval(gt, gt.loadRes(dets), iou_type)
        evaluator.params.maxDets = [1, 10, MAX_DETECTIONS]
        evaluator.evaluate()
        evaluator.accumulate()
        evaluator.summarize()
    return max(0.0, float(evaluator.stats[0]))


def has_masks(images: list[dict]) -> bool:
    """Whether mask AP can be computed: every image has ground-truth and detection masks."""
    return bool(images) and all(im.get("gt_masks") is not None and im.get("masks") is not None for im in images)


class CocoMap(GatheredMetric):
    """Box AP@[.50:.95] (higher is better, targets in (0, 1]); mask AP too when masks are given."""

    def __init__(self, name: str = "box_map"):
        super().__init__(name, self._compute)
        self.last: dict | None = None  # the last evaluation: box_map, mask_map (or None), images
        self._speaker = True  # rank 0 prints the line (reduce() learns the rank)

    def reduce(self, local: list, dist) -> list:
        self._speaker = dist.rank == 0
        return super().reduce(local, dist)

    @staticmethod
    def images(reduced: list) -> list[dict]:
        return [im for stats in reduced for im in stats["images"]]

    @staticmethod
    def mask_floor(reduced: list) -> float | None:
        floors = [float(s["mask_floor"]) for s in reduced if s.get("mask_floor") is not None]
        return max(floors) if floors else None

    def _compute(self, reduced: list) -> float:
        images = self.images(reduced)
        box = coco_map(images, "bbox")
        mask = coco_map(images, "segm") if has_masks(images) else None
        floor = self.mask_floor(reduced)
        self.last = {"box_map": box, "mask_map": mask, "mask_floor": floor, "images": len(images)}
        if self._speaker:
            said = f"[hvdbench] {self.name} {box:.4f}"
            if mask is not None:
                said += f" and mask_map {mask:.4f}"
            if floor is not None:
                said += f" (mask_map needs >= {floor:g})"
            line(f"{said} over {len(images)} images")
        return box

    def samples(self, reduced: list) -> int:
        return len(self.images(reduced))

    def logged(self, value: float):
        """MLPerf's Mask R-CNN logs both numbers ({"BBOX": ..., "SEGM": ...}, what the compliance
        checker's maskrcnn rules require); box mAP alone otherwise."""
        last = self.last
        if last is not None and last["box_map"] == value and last["mask_map"] is not None:
            return {"BBOX": last["box_map"], "SEGM": last["mask_map"]}
        return value

    def reached(self, value: float, target: float) -> bool:
        """Box AP at or above the target and, when the evaluation carried a mask floor, the mask AP
        of that same evaluation at or above it."""
        if not super().reached(value, target):
            return False
        last = self.last
        if last is None or last["mask_floor"] is None:
            return True
        return last["box_map"] == value and last["mask_map"] is not None and last["mask_map"] >= last["mask_floor"]
