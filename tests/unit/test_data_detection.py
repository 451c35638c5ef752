"""The `detection` dataset kind (hvdbench/families/detection/data.py) and the digit scenes
(hvdbench/families/detection/scenes.py): RLE masks, fields and limits, random samples, generated scenes,
and `prepare verify` / the readers on prepared and synthetic data."""

import json

import numpy as np
import pytest

from hvdbench.data.parallel import PrepareOptions
from hvdbench.families.detection import scenes as scenes_mod
from hvdbench.families.detection.data import DETECTION, decode_masks, encode_masks, objects, rle_of
from hvdbench.families.detection.scenes import SceneOptions, digit_pool, digit_scene, prepare_digit_scenes

INFO = {"num_classes": 7, "image_size": 48, "max_objects": 5, "mask_bytes": 120}
SMALL = SceneOptions(train=60, val=20, samples_per_shard=25, seed=1)  # the scenes fixture's: 3 train, 1 val shard


def test_masks_round_trip_exactly():
    rng = np.random.default_rng(0)
    masks = np.stack([rng.random((40, 40)) < 0.02,  # scattered pixels: a long RLE
                      np.zeros((40, 40), bool), np.ones((40, 40), bool)]).astype(np.uint8)
    masks[1, 3:9, 30:38] = 1  # a rectangle near the right edge
    longest = max(len(rle_of(m)) for m in masks)
    rows = encode_masks(masks, longest + 5)
    assert rows.shape == (3, longest + 5) and rows.dtype == np.uint8
    assert np.array_equal(decode_masks(rows, 40), masks)
    assert np.array_equal(decode_masks(np.zeros((2, 9), np.uint8), 40), np.zeros((2, 40, 40), np.uint8))
    with pytest.raises(ValueError, match=f"mask 0's RLE is {longest} bytes, over mask_bytes {longest - 1}"):
        encode_masks(masks[:1], longest - 1)


def test_fields_and_limits():
    fields = DETECTION.fields(INFO)
    assert fields["images"] == {"shape": [48, 48, 3], "dtype": "uint8"}
    assert fields["boxes"] == {"shape": [5, 4], "dtype": "float32"}
    assert fields["masks"] == {"shape": [5, 120], "dtype": "uint8"}
    assert {k: fields[k]["dtype"] for k in ("labels", "crowd", "num_objects", "image_id")} == \
        {"labels": "int32", "crowd": "uint8", "num_objects": "int32", "image_id": "int64"}
    assert "masks" not in DETECTION.fields({**INFO, "mask_bytes": 0})
    assert DETECTION.limits(INFO) == {"labels": (-1, 6), "crowd": (0, 1), "num_objects": (0, 5), "boxes": (0, 48)}


def check_sample(batch, i, info):
    """One sample is a valid scene: in-canvas boxes with x1 < x2, y1 < y2, labels in range,
    padding rows empty; returns its objects."""
    s, m = info["image_size"], info["max_objects"]
    n = int(batch["num_objects"][i])
    assert 1 <= n <= m
    obj = objects(batch, i)
    b = obj["boxes"]
    assert b.shape == (n, 4) and obj["labels"].dtype == np.int64 and obj["crowd"].dtype == bool
    assert (b[:, 0] < b[:, 2]).all() and (b[:, 1] < b[:, 3]).all() and b.min() >= 0 and b.max() <= s
    assert ((obj["labels"] >= 0) & (obj["labels"] < info["num_classes"])).all()
    assert (batch["labels"][i][n:] == -1).all() and not batch["boxes"][i][n:].any()
    if info["mask_bytes"]:
        assert obj["masks"].shape == (n, s, s) and not batch["masks"][i][n:].any()
    return obj


def test_synthetic_scenes_are_valid_and_their_masks_are_the_boxes():
    batch = DETECTION.synthetic(30, INFO, np.random.default_rng(1))
    for name, spec in DETECTION.fields(INFO).items():
        assert batch[name].shape == (30, *spec["shape"]) and batch[name].dtype == spec["dtype"]
    for i in range(30):
        obj = check_sample(batch, i, INFO)
        for box, mask in zip(obj["boxes"].astype(int), obj["masks"]):
            rect = np.zeros_like(mask)
            rect[box[1]:box[3], box[0]:box[2]] = 1
            assert np.array_equal(mask, rect)
    assert len(set(batch["image_id"].tolist())) == 30
    plain = DETECTION.synthetic(4, {**INFO, "mask_bytes": 0}, np.random.default_rng(1))
    assert "masks" not in plain and objects(plain, 0)["masks"] is None
    with pytest.raises(ValueError, match="mask_bytes 10 is too small"):
        DETECTION.synthetic(1, {**INFO, "mask_bytes": 10}, np.random.default_rng(0))


def test_digit_scene_boxes_tightly_bound_their_masks_and_labels_are_the_digits():
    pool = digit_pool(0)
    digits, labels = pool["train"]
    for k in range(40):
        scene = digit_scene(digits, labels, 64, 3, np.random.default_rng([5, k]))
        assert scene["image"].shape == (64, 64, 3) and scene["image"].dtype == np.uint8
        assert 1 <= len(scene["labels"]) <= 3 and set(scene["labels"].tolist()) <= set(range(10))
        for box, mask in zip(scene["boxes"], scene["masks"]):
            ys, xs = np.nonzero(mask)
            assert box.tolist() == [xs.min(), ys.min(), xs.max() + 1, ys.max() + 1]
            assert 12 * 0.3 <= box[2] - box[0] <= 28 and box[3] - box[1] <= 28
    sevens = labels == 7
    only = digit_scene(digits[sevens], labels[sevens], 64, 3, np.random.default_rng(0))
    assert set(only["labels"].tolist()) == {7}  # scenes draw from the digits they are given


def test_train_and_val_digits_partition_sklearn_digits_stratified():
    from sklearn.datasets import load_digits

    pool = digit_pool(3)
    all_rows = np.round(load_digits().images * (255 / 16)).astype(np.uint8).reshape(-1, 64)
    split_rows = np.concatenate([pool["train"][0], pool["val"][0]]).reshape(-1, 64)
    # Together the splits are exactly the 1,797 scans, each once: no scan is in both.
    assert sorted(map(bytes, all_rows)) == sorted(map(bytes, split_rows))
    counts = np.bincount(pool["val"][1], minlength=10)
    assert counts.min() >= 35 and len(pool["val"][1]) == 360  # ceil(0.2 x 1,797), as scikit-learn rounds


def test_digit_scenes_are_deterministic_in_the_seed():
    a = scenes_mod.digit_scenes({"train": 12, "val": 4}, 64, 3, seed=2)
    b = scenes_mod.digit_scenes({"train": 12, "val": 4}, 64, 3, seed=2)
    c = scenes_mod.digit_scenes({"train": 12, "val": 4}, 64, 3, seed=3)
    def same(x, y):
        return all(np.array_equal(p["image"], q["image"]) and p["rles"] == q["rles"]
                   for s in x for p, q in zip(x[s], y[s]))
    assert same(a, b) and not same(a, c)
    ids = [sc["image_id"] for s in a for sc in a[s]]
    assert ids == list(range(1, 17))


@pytest.fixture(scope="module")
def scenes(tmp_path_factory):
    out = tmp_path_factory.mktemp("det") / "scenes"
    prepare_digit_scenes(out, opts=SMALL, options=PrepareOptions(command="test"))
    return out


def test_prepared_digit_scenes_verify_and_read_back(scenes):
    from hvdbench.data.readers import open_dataset
    from hvdbench.data.verify import verify

    manifest = json.loads((scenes / "manifest.json").read_text())
    assert manifest["kind"] == "detection" and manifest["generated"] is True
    assert manifest["source"].startswith("generated:") and manifest["class_names"] == [str(d) for d in range(10)]
    assert manifest["category_ids"] == list(range(1, 11)) and manifest["max_objects"] == 3
    assert manifest["mask_bytes"] % 8 == 0 and manifest["splits"]["train"]["samples"] == 60
    report = verify(scenes)
    assert report.ok, report.problems
    info = {k: manifest[k] for k in DETECTION.info_keys}
    ds = open_dataset(scenes)
    ids = []
    for batch in ds.loader("val", 8, shuffle=False, drop_last=False):
        for i in range(len(batch["image_id"])):
            obj = check_sample(batch, i, info)
            for box, mask in zip(obj["boxes"], obj["masks"]):
                ys, xs = np.nonzero(mask)
                assert box.tolist() == [xs.min(), ys.min(), xs.max() + 1, ys.max() + 1]
            ids.append(int(batch["image_id"][i]))
    assert sorted(ids) == list(range(61, 81))


def test_rerun_keeps_the_shards(scenes):
    stamps = {p.name: p.stat().st_mtime_ns for p in scenes.glob("*.h5")}
    prepare_digit_scenes(scenes, opts=SMALL, options=PrepareOptions(command="test"))
    assert {p.name: p.stat().st_mtime_ns for p in scenes.glob("*.h5")} == stamps


def test_synthetic_detection_data_verifies(tmp_path):
    from hvdbench.data.synthetic import prepare_synthetic
    from hvdbench.data.verify import verify

    manifest = prepare_synthetic("detection", 24, tmp_path / "syn", val_fraction=0.25,
                                 info={"image_size": 40, "num_classes": 5, "max_objects": 4, "mask_bytes": 64},
                                 options=PrepareOptions(workers=1))
    assert manifest["synthetic"] and manifest["category_ids"] == [1, 2, 3, 4, 5]
    assert verify(tmp_path / "syn").ok
    boxes_only = prepare_synthetic("detection", 8, tmp_path / "plain",
                                   info={"image_size": 40, "num_classes": 5, "max_objects": 4},
                                   options=PrepareOptions(workers=1))
    assert "masks" not in boxes_only["fields"] and verify(tmp_path / "plain").ok
