"""`prepare images` on real image files (the bundled digits written as PNG/JPEG folders)."""

import hashlib
import os

import h5py
import numpy as np
import pytest
from PIL import Image

from hvdbench.data.parallel import PrepareOptions
from hvdbench.data.readers import open_dataset
from hvdbench.data.verify import verify
from hvdbench.errors import DatasetError
from hvdbench.families.images.digits import write_tree
from hvdbench.families.images.prepare import decode_image, prepare_images, scan_tree


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("tree")
    write_tree(root, size=20, per_class=4)  # 10 classes x 4 images, train and val
    return root


def all_samples(path, split):
    ds = open_dataset(path)
    batches = list(ds.loader(split, 7, shuffle=False, drop_last=False))
    return np.concatenate([b["images"] for b in batches]), np.concatenate([b["labels"] for b in batches])


def test_decode_resizes_shorter_side_and_centre_crops(tmp_path):
    wide = np.zeros((40, 80, 3), np.uint8)
    wide[:, 20:60] = 255  # the centre 40x40 square is white, the sides black
    Image.fromarray(wide).save(tmp_path / "wide.png")
    out = decode_image(tmp_path / "wide.png", 10)
    assert out.shape == (10, 10, 3) and out.dtype == np.uint8
    assert out[:, 1:-1].min() == 255 and out.min() > 128  # the black sides are cropped away (the
    # resampling filter only blurs the crop's edge a little)
    Image.fromarray(np.zeros((5, 5), np.uint8), "L").save(tmp_path / "grey.png")
    assert decode_image(tmp_path / "grey.png", 8).shape == (8, 8, 3)  # greyscale -> RGB


def test_prepare_round_trip(tree, tmp_path):
    out = tmp_path / "ds"
    m = prepare_images(tree, out, size=16, samples_per_shard=12, options=PrepareOptions(workers=1, command="test"))
    assert m["kind"] == "images" and m["num_classes"] == 10 and m["class_names"] == [str(d) for d in range(10)]
    assert m["splits"]["train"]["samples"] == 40 and len(m["splits"]["train"]["shards"]) == 4
    assert m["fields"]["images"] == {"shape": [16, 16, 3], "dtype": "uint8"}
    images, labels = all_samples(out, "train")
    # Every file decoded into exactly one sample, with its folder's label.
    expected = {}
    for cls in range(10):
        for f in sorted((tree / "train" / str(cls)).iterdir()):
            expected[decode_image(f, 16).tobytes()] = cls
    got = {img.tobytes(): int(lab) for img, lab in zip(images, labels)}
    assert got == expected
    assert verify(out).ok


def test_shards_mix_classes(tree, tmp_path):
    prepare_images(tree, tmp_path / "ds", size=8, samples_per_shard=12, options=PrepareOptions(workers=1))
    with h5py.File(tmp_path / "ds" / "train-00000-of-00004.h5") as f:
        assert len(set(f["labels"][:].tolist())) > 3  # files were shuffled (seeded) before sharding


def test_parallel_workers_and_reruns_give_identical_bytes(tree, tmp_path):
    a = prepare_images(tree, tmp_path / "a", size=16, samples_per_shard=12, options=PrepareOptions(workers=1))
    b = prepare_images(tree, tmp_path / "b", size=16, samples_per_shard=12, options=PrepareOptions(workers=2))
    files = [s["file"] for split in a["splits"].values() for s in split["shards"]]
    for f in files:
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes()
    assert a["splits"] == b["splits"]
    c = prepare_images(tree, tmp_path / "c", size=16, samples_per_shard=12, seed=1, options=PrepareOptions(workers=1))
    assert c["splits"]["train"]["shards"][0]["sha256"] != a["splits"]["train"]["shards"][0]["sha256"]


def test_rerun_keeps_finished_shards_and_rewrites_the_rest(tree, tmp_path):
    out = tmp_path / "ds"
    prepare_images(tree, out, size=16, samples_per_shard=12, options=PrepareOptions(workers=1))
    keep, redo = out / "train-00000-of-00004.h5", out / "train-00001-of-00004.h5"
    os.utime(keep, (1, 1))
    redo.rename(redo.with_name(redo.name + ".partial"))  # as if killed while writing it
    (out / "manifest.json").unlink()
    m = prepare_images(tree, out, size=16, samples_per_shard=12, options=PrepareOptions(workers=1))
    assert keep.stat().st_mtime == 1  # untouched
    assert redo.exists() and not redo.with_name(redo.name + ".partial").exists()
    assert m["splits"]["train"]["samples"] == 40 and verify(out).ok


def test_bad_files_are_skipped_and_reported(tree, tmp_path):
    src = tmp_path / "src"
    write_tree(src, size=12, per_class=2)
    (src / "train" / "3" / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n garbage")
    (src / "train" / "5" / "notes.txt").write_text("not an image")
    m = prepare_images(src, tmp_path / "ds", size=8, options=PrepareOptions(workers=1))
    assert m["skipped"]["count"] == 2
    assert sorted(m["skipped"]["first"]) == ["train/3/broken.png", "train/5/notes.txt"]
    assert m["splits"]["train"]["samples"] == 20
    with pytest.raises(DatasetError, match=r"notes\.txt: not an image file \(--strict\)"):
        prepare_images(src, tmp_path / "strict", size=8, strict=True, options=PrepareOptions(workers=1))
    (src / "train" / "5" / "notes.txt").unlink()
    with pytest.raises(DatasetError, match=r"broken\.png: unreadable image"):
        prepare_images(src, tmp_path / "strict2", size=8, strict=True, options=PrepareOptions(workers=1))


def test_tree_errors_are_one_line_and_name_the_folder(tmp_path):
    with pytest.raises(DatasetError, match="no train/ folder"):
        scan_tree(tmp_path, 0.1, 0)
    (tmp_path / "train").mkdir()
    with pytest.raises(DatasetError, match="no class folders"):
        scan_tree(tmp_path, 0.1, 0)
    (tmp_path / "train" / "cat").mkdir()
    with pytest.raises(DatasetError, match=r"train/cat: empty class folder") as e:
        scan_tree(tmp_path, 0.1, 0)
    assert "\n" not in str(e.value)
    Image.new("RGB", (4, 4)).save(tmp_path / "train" / "cat" / "a.png")
    (tmp_path / "val" / "dog").mkdir(parents=True)
    Image.new("RGB", (4, 4)).save(tmp_path / "val" / "dog" / "b.png")
    with pytest.raises(DatasetError, match="class 'dog' is not a class of"):
        scan_tree(tmp_path, 0.1, 0)


def test_without_val_folder_a_stratified_share_is_held_out(tmp_path):
    src = tmp_path / "src"
    write_tree(src, size=8, per_class=10)
    for p in sorted((src / "val").rglob("*"), reverse=True):
        p.unlink() if p.is_file() else p.rmdir()
    (src / "val").rmdir()
    m = prepare_images(src, tmp_path / "ds", size=8, val_fraction=0.2, options=PrepareOptions(workers=1))
    assert m["splits"]["val"]["samples"] == 20 and m["splits"]["train"]["samples"] == 80
    _, labels = all_samples(tmp_path / "ds", "val")
    assert np.bincount(labels).tolist() == [2] * 10


def test_a_different_dataset_in_out_is_refused(tree, tmp_path):
    prepare_images(tree, tmp_path / "ds", size=8, options=PrepareOptions(workers=1))
    with pytest.raises(DatasetError, match="already holds a different dataset"):
        prepare_images(tree, tmp_path / "ds", size=16, options=PrepareOptions(workers=1))
    m = prepare_images(tree, tmp_path / "ds", size=16, options=PrepareOptions(workers=1, overwrite=True))
    assert m["image_size"] == 16 and verify(tmp_path / "ds").ok


def test_tree_of_digits_is_real_data(tmp_path):
    counts = write_tree(tmp_path, size=16, per_class=3)
    assert counts == {"train": 30, "val": 30}
    files = sorted((tmp_path / "train").rglob("*.*"))
    assert {f.suffix for f in files} == {".png", ".JPEG"}
    digests = {hashlib.sha256(f.read_bytes()).hexdigest() for f in files}
    assert len(digests) == 30
