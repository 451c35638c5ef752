"""COCO mAP (hvdbench/families/detection/metric.py): the values pycocotools gives in cases worked out by hand,
crowd regions ignored, the gathered metric over two ranks, and Mask R-CNN's second condition."""

import numpy as np
import pytest

from hvdbench.families.detection.metric import CocoMap, coco_map, detections_record

S = 32  # canvas side


def box_mask(box) -> np.ndarray:
    x1, y1, x2, y2 = (int(v) for v in box)
    m = np.zeros((S, S), np.uint8)
    m[y1:y2, x1:x2] = 1
    return m


def target(boxes, labels, crowd=None, masks=False) -> dict:
    boxes = np.asarray(boxes, np.float32).reshape(-1, 4)
    return {"boxes": boxes, "labels": np.asarray(labels, np.int64),
            "crowd": np.zeros(len(boxes), bool) if crowd is None else np.asarray(crowd, bool),
            "masks": np.stack([box_mask(b) for b in boxes]) if masks else None}


def record(image_id, gt, boxes, scores, labels, masks=False):
    boxes = np.asarray(boxes, np.float32).reshape(-1, 4)
    det_masks = np.stack([box_mask(b) for b in boxes]) if masks else None
    return detections_record(image_id, S, gt, boxes, scores, labels, det_masks)


def perfect(image_id, boxes, labels, masks=False):
    return record(image_id, target(boxes, labels, masks=masks), boxes, np.linspace(0.9, 0.5, len(boxes)),
                  labels, masks)


def test_perfect_detections_score_one_for_boxes_and_masks():
    images = [perfect(1, [[2, 2, 12, 10], [15, 4, 30, 20]], [0, 3], masks=True),
              perfect(7, [[0, 0, 32, 32]], [1], masks=True)]
    assert coco_map(images, "bbox") == pytest.approx(1.0)
    assert coco_map(images, "segm") == pytest.approx(1.0)


def test_one_shifted_box_scores_the_share_of_iou_thresholds_it_passes():
    # GT [0,0,10,10], detection shifted by 1 px: IoU = 90 / 110 = 0.818, which passes the thresholds
    # .50, .55, ..., .80 (7 of COCO's 10): AP is 1 at those and 0 at the other three.
    images = [record(1, target([[0, 0, 10, 10]], [2]), [[1, 0, 11, 10]], [0.9], [2])]
    assert coco_map(images) == pytest.approx(7 / 10)


def test_a_missed_object_halves_recall():
    # Two objects of one class, one found exactly: precision 1 up to recall 0.5, then nothing. COCO
    # averages precision at 101 recall points 0, .01, ..., 1, so 51 of them (0 to .50) score 1.
    gt = target([[0, 0, 10, 10], [16, 16, 30, 30]], [4, 4])
    images = [record(3, gt, [[0, 0, 10, 10]], [0.8], [4])]
    assert coco_map(images) == pytest.approx(51 / 101)


def test_wrong_class_finds_nothing_and_images_without_detections_count():
    images = [record(1, target([[0, 0, 10, 10]], [0]), [[0, 0, 10, 10]], [0.9], [1]),
              record(2, target([[5, 5, 20, 20]], [0]), np.zeros((0, 4)), [], [])]
    assert coco_map(images) == 0.0
    both = [perfect(1, [[0, 0, 10, 10]], [0]), record(2, target([[5, 5, 20, 20]], [0]), np.zeros((0, 4)), [], [])]
    assert coco_map(both) == pytest.approx(51 / 101)  # the second image's object is missed


def test_crowd_regions_are_ignored():
    # A detection on the crowd region is neither a hit nor a false positive, and the crowd is no
    # missed object: only the real object counts.
    gt = target([[0, 0, 10, 10], [12, 12, 32, 32]], [1, 1], crowd=[False, True], masks=True)
    images = [record(5, gt, [[0, 0, 10, 10], [14, 14, 30, 30]], [0.6, 0.9], [1, 1], masks=True)]
    assert coco_map(images, "bbox") == pytest.approx(1.0)
    assert coco_map(images, "segm") == pytest.approx(1.0)
    gt_plain = target([[0, 0, 10, 10], [12, 12, 32, 32]], [1, 1])
    plain = [record(5, gt_plain, [[0, 0, 10, 10], [14, 14, 30, 30]], [0.6, 0.9], [1, 1])]
    assert coco_map(plain) < 1.0  # without the crowd flag the same detections score lower


def test_mask_probabilities_are_cut_at_one_half():
    gt = target([[4, 4, 12, 12]], [0], masks=True)
    probs = box_mask([4, 4, 12, 12]) * np.float32(0.6) + np.float32(0.3) * (1 - box_mask([4, 4, 12, 12]))
    rec = detections_record(1, S, gt, [[4, 4, 12, 12]], [0.9], [0], probs[None])
    assert rec["masks"] == rec["gt_masks"] and coco_map([rec], "segm") == pytest.approx(1.0)


def test_only_the_100_best_detections_per_image_are_kept():
    gt = target([[0, 0, 10, 10]], [0])
    boxes = np.tile([[20, 20, 30, 30]], (150, 1))
    rec = detections_record(1, S, gt, boxes, np.linspace(0.1, 0.9, 150), np.zeros(150), None)
    assert len(rec["boxes"]) == 100 and rec["scores"].min() == pytest.approx(np.linspace(0.1, 0.9, 150)[50])


def test_empty_evaluations_fail_clearly():
    with pytest.raises(ValueError, match="empty evaluation"):
        coco_map([])
    with pytest.raises(ValueError, match="no \\(non-crowd\\) object"):
        coco_map([record(1, target(np.zeros((0, 4)), []), [[0, 0, 4, 4]], [0.5], [0])])
    with pytest.raises(ValueError, match="image_id 4 was evaluated twice"):
        coco_map([perfect(4, [[0, 0, 5, 5]], [0]), perfect(4, [[0, 0, 5, 5]], [0])])


class TwoRanks:
    """A stand-in for the communicator only: rank `rank` of two whose allgather_object returns
    both ranks' objects in rank order, as Horovod's does."""

    def __init__(self, rank, parts):
        self.rank, self.parts = rank, parts

    def allgather_object(self, obj):
        assert obj is self.parts[self.rank]
        return list(self.parts)


class OneRank:
    """A single process's communicator."""

    rank = 0

    def __init__(self, parts):
        self.parts = parts

    def allgather_object(self, obj):
        return [obj]


def batches():
    imperfect = record(2, target([[0, 0, 10, 10]], [2], masks=True), [[1, 0, 11, 10]], [0.9], [2], masks=True)
    return [{"images": [perfect(1, [[2, 2, 12, 10]], [0], masks=True)], "mask_floor": None},
            {"images": [imperfect], "mask_floor": None},
            {"images": [perfect(3, [[4, 4, 20, 20], [22, 0, 30, 8]], [1, 2], masks=True)], "mask_floor": None}]


def run_metric(metric, per_rank, rank):
    locals_ = []
    for stats in per_rank:
        state = metric.start()
        for s in stats:
            state = metric.update(state, s)
        locals_.append(metric.local(state))
    reduced = metric.reduce(locals_[rank], TwoRanks(rank, locals_) if len(per_rank) == 2 else OneRank(locals_))
    return metric.value(reduced), reduced


def test_gathered_over_two_ranks_equals_one_rank(capsys):
    b = batches()
    single, reduced = run_metric(CocoMap(), [b], 0)
    assert CocoMap().samples(reduced) == 3
    for rank in (0, 1):
        metric = CocoMap()
        value, _ = run_metric(metric, [[b[2], b[0]], [b[1]]], rank)  # any split, any order
        assert value == single
        assert metric.last["mask_map"] == pytest.approx(coco_map([im for s in b for im in s["images"]], "segm"))
    out = capsys.readouterr().out
    assert out.count("[hvdbench] box_map") == 2  # rank 0 speaks: the single run and rank 0 of two
    assert "mask_map" in out


def test_reached_with_a_mask_floor_needs_both():
    metric = CocoMap()
    b = batches()
    value, _ = run_metric(metric, [b], 0)
    box, mask = metric.last["box_map"], metric.last["mask_map"]
    assert value == box and 0 < mask < 1
    assert metric.reached(value, box) and not metric.reached(value, box + 1e-6)
    floored = [{**s, "mask_floor": mask + 0.01} for s in b]
    metric = CocoMap()
    value, _ = run_metric(metric, [floored], 0)
    assert not metric.reached(value, 0.1)  # box above target, mask below its floor
    floored = [{**s, "mask_floor": mask - 0.01} for s in b]
    value, _ = run_metric(metric, [floored], 0)
    assert metric.reached(value, 0.1)
    # A floor with no masks at all: the mask condition cannot hold.
    no_masks = [{"images": [perfect(1, [[0, 0, 8, 8]], [0])], "mask_floor": 0.3}]
    value, _ = run_metric(metric, [no_masks], 0)
    assert value == pytest.approx(1.0) and metric.last["mask_map"] is None and not metric.reached(value, 0.5)


def test_metric_contract_bounds():
    metric = CocoMap()
    assert metric.name == "box_map" and metric.higher_is_better
    metric.check_target(0.377)
    with pytest.raises(Exception, match="box_map"):
        metric.check_target(1.5)
