"""`prepare digits`: scikit-learn's bundled real handwritten digits as an image dataset."""

import numpy as np
from sklearn.datasets import load_digits

from hvdbench.data.parallel import PrepareOptions
from hvdbench.data.readers import open_dataset
from hvdbench.data.verify import verify
from hvdbench.families.images.digits import prepare_digits


def labels_of(path, split):
    return np.concatenate([b["labels"] for b in open_dataset(path).loader(split, 100, drop_last=False)])


def test_digits_dataset(tmp_path):
    m = prepare_digits(tmp_path / "d", size=16, options=PrepareOptions(command="test"))
    assert m["splits"]["train"]["samples"] + m["splits"]["val"]["samples"] == 1797
    assert m["splits"]["val"]["samples"] == 360  # 20 %
    assert m["num_classes"] == 10 and m["image_size"] == 16
    ds = open_dataset(tmp_path / "d")
    batch = next(iter(ds.loader("train", 64)))
    assert batch["images"].shape == (64, 16, 16, 3) and batch["images"].dtype == np.uint8
    assert batch["images"].max() > 200 and batch["images"].min() == 0  # 0..16 scaled to 0..255
    np.testing.assert_array_equal(batch["images"][..., 0], batch["images"][..., 2])  # grey in 3 channels
    # Stratified: each class's share of val matches its share of the whole set within one sample.
    whole = np.bincount(load_digits().target)
    val = np.bincount(labels_of(tmp_path / "d", "val"), minlength=10)
    assert np.all(np.abs(val - whole * 0.2) <= 1)
    assert verify(tmp_path / "d").ok


def test_digits_seeded(tmp_path):
    a = prepare_digits(tmp_path / "a", size=8)
    b = prepare_digits(tmp_path / "b", size=8)
    c = prepare_digits(tmp_path / "c", size=8, seed=1)
    for split in ("train", "val"):
        for sa, sb in zip(a["splits"][split]["shards"], b["splits"][split]["shards"]):
            assert (tmp_path / "a" / sa["file"]).read_bytes() == (tmp_path / "b" / sb["file"]).read_bytes()
    assert a["splits"]["val"]["shards"][0]["sha256"] != c["splits"]["val"]["shards"][0]["sha256"]


def test_digits_at_original_size_are_the_original_pixels(tmp_path):
    prepare_digits(tmp_path / "d", size=8)
    ds = open_dataset(tmp_path / "d")
    images = np.concatenate([b["images"][..., 0] for s in ("train", "val")
                             for b in ds.loader(s, 500, drop_last=False)])
    original = np.round(load_digits().images * 255 / 16).astype(np.uint8)
    assert sorted(map(bytes, images)) == sorted(map(bytes, original))
